package estimate

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/estimator/pb"
	"github.com/karmada-io/karmada/pkg/estimator/server/framework"
	estimatorplugins "github.com/karmada-io/karmada/pkg/estimator/server/framework/plugins"
	frameworkruntime "github.com/karmada-io/karmada/pkg/estimator/server/framework/runtime"
	schedcache "github.com/karmada-io/karmada/pkg/util/lifted/scheduler/cache"
	corev1 "k8s.io/api/core/v1"
)

// Member answers for one member cluster as its karmada-scheduler-estimator
// would, from the nodes and pods it was built with. It is safe for
// concurrent use: answers are kept per distinct replica requirement, since
// a fleet's workloads mostly share a few.
type Member struct {
	snapshot  *schedcache.Snapshot
	framework framework.Framework

	mu   sync.Mutex
	memo map[string]int32

	// nodes and pods are what the view was built from (bound, not
	// finished), kept for the view without the terminating pods; an
	// estimator with no node answers 0 without running its plugins.
	nodes []*corev1.Node
	pods  []*corev1.Pod
	// terminating counts the pods of the view that are being deleted.
	terminating int
	departed    struct {
		once sync.Once
		m    *Member
		err  error
	}
}

// NewMember builds the estimator's view of a member cluster from its nodes
// and its pods. As karmada-scheduler-estimator's cache does, it counts only
// pods bound to a node and not finished (Succeeded or Failed).
func NewMember(nodes []*corev1.Node, pods []*corev1.Pod) (*Member, error) {
	bound := make([]*corev1.Pod, 0, len(pods))
	terminating := 0
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.DeletionTimestamp != nil {
			terminating++
		}
		bound = append(bound, p)
	}
	// The framework is the one karmada-scheduler-estimator builds: the
	// in-tree plugins, node resources and (behind its alpha gate, off by
	// default) resource quotas. No informer is started: the quota plugin
	// reads one only with its gate on.
	fwk, err := frameworkruntime.NewFramework(estimatorplugins.NewInTreeRegistry())
	if err != nil {
		return nil, fmt.Errorf("set up karmada's estimator framework: %w", err)
	}
	return &Member{snapshot: schedcache.NewSnapshot(bound, nodes), framework: fwk, memo: map[string]int32{},
		nodes: nodes, pods: bound, terminating: terminating}, nil
}

// Terminating is how many pods of the view are being deleted: the estimator
// counts them, as their nodes still hold them, until they are gone.
func (m *Member) Terminating() int {
	return m.terminating
}

// Departed is the view once the terminating pods are gone, which is what
// the estimator answers a moment later (m itself when none terminates).
// It is built once, on first use.
func (m *Member) Departed() (*Member, error) {
	if m.terminating == 0 {
		return m, nil
	}
	m.departed.once.Do(func() {
		staying := make([]*corev1.Pod, 0, len(m.pods)-m.terminating)
		for _, p := range m.pods {
			if p.DeletionTimestamp == nil {
				staying = append(staying, p)
			}
		}
		m.departed.m, m.departed.err = NewMember(m.nodes, staying)
	})
	return m.departed.m, m.departed.err
}

// MaxAvailableReplicas is the estimator's answer for a workload whose every
// replica needs req (nil: a best-effort workload, bounded by pod counts).
func (m *Member) MaxAvailableReplicas(ctx context.Context, req *workv1alpha2.ReplicaRequirements) (int32, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return 0, fmt.Errorf("encode the replica requirements: %w", err)
	}
	key := string(raw)
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.memo[key]; ok {
		return n, nil
	}
	request, err := Request(req)
	if err != nil {
		return 0, err
	}
	n, err := m.estimate(ctx, request)
	if err != nil {
		return 0, err
	}
	m.memo[key] = n
	return n, nil
}

// estimate runs the estimator's plugins the way its gRPC handler does: no
// node means no room, an unschedulable result means none either.
func (m *Member) estimate(ctx context.Context, request *pb.ReplicaRequirements) (int32, error) {
	if len(m.nodes) == 0 {
		return 0, nil
	}
	n, result := m.framework.RunEstimateReplicasPlugins(ctx, framework.ReplicaEstimationContext{Snapshot: m.snapshot, ReplicaRequirements: request})
	switch {
	case result.IsUnschedulable():
		return 0, nil
	case result.IsFailed():
		return 0, fmt.Errorf("karmada's estimator plugins failed: %s", result.Reasons())
	}
	return n, nil
}

// Request is the estimator's request for req, in the wire form
// karmada-scheduler sends (resources, node selector, affinity, tolerations,
// namespace and priority class).
func Request(req *workv1alpha2.ReplicaRequirements) (*pb.ReplicaRequirements, error) {
	if req == nil {
		return nil, nil
	}
	out := &pb.ReplicaRequirements{Namespace: req.Namespace, PriorityClassName: req.PriorityClassName}
	if err := out.SetResourceRequest(req.ResourceRequest); err != nil {
		return nil, fmt.Errorf("encode the replica requirements: %w", err)
	}
	if c := req.NodeClaim; c != nil {
		out.NodeClaim = &pb.NodeClaim{NodeSelector: c.NodeSelector}
		if err := out.NodeClaim.SetNodeAffinity(c.HardNodeAffinity); err != nil {
			return nil, fmt.Errorf("encode the node affinity: %w", err)
		}
		if err := out.NodeClaim.SetTolerations(c.Tolerations); err != nil {
			return nil, fmt.Errorf("encode the tolerations: %w", err)
		}
	}
	return out, nil
}
