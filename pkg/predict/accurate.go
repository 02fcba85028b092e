package predict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	estimatorclient "github.com/karmada-io/karmada/pkg/estimator/client"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/estimate"
)

// AccurateEstimator is what a member's karmada-scheduler-estimator answers
// karmada-scheduler: how many replicas needing req its nodes can still take.
// package estimate computes it with Karmada's estimator framework.
type AccurateEstimator interface {
	MaxAvailableReplicas(ctx context.Context, req *workv1alpha2.ReplicaRequirements) (int32, error)
}

// accurateEstimatorName is the name karmada-scheduler registers its
// scheduler-estimator client under, beside the general estimator.
const accurateEstimatorName = "scheduler-estimator"

// viewAnnotation marks the scheduler's copies of the clusters with the
// prediction they belong to, so that the estimator registered in Karmada's
// process-wide registry answers each prediction from its own members' nodes
// and pods: Karmada hands an estimator the cluster objects only.
const viewAnnotation = "predict.kubectl-rebalance.io/estimator-view"

var (
	installAccurate sync.Once
	views           sync.Map // view id -> *accurateView
	viewSeq         atomic.Uint64
)

// accurateView is what one prediction knows of the members' estimators.
type accurateView struct {
	members map[string]AccurateEstimator
	// clusters are the Clusters as read: a scheduler's copy whose summary a
	// batch check changed is compared with them.
	clusters map[string]*clusterv1alpha1.Cluster
	// asRead remembers the general estimator's answer on clusters, by
	// cluster and requirements (readKey): they do not change, and a batch
	// check asks for it on every pass it makes, each answer a copy of the
	// cluster's resource summary to collect.
	asRead sync.Map
}

// withAccurate registers the members' estimators of a prediction and returns
// copies of clusters marked with it, and the function that unregisters it.
// With no estimator it returns clusters as they are.
func withAccurate(clusters []*clusterv1alpha1.Cluster, members map[string]AccurateEstimator) ([]*clusterv1alpha1.Cluster, func()) {
	if len(members) == 0 {
		return clusters, func() {}
	}
	installAccurateEstimator()
	id := strconv.FormatUint(viewSeq.Add(1), 10)
	view := &accurateView{members: members, clusters: make(map[string]*clusterv1alpha1.Cluster, len(clusters))}
	out := make([]*clusterv1alpha1.Cluster, len(clusters))
	for i, c := range clusters {
		view.clusters[c.Name] = c
		marked := *c
		marked.Annotations = make(map[string]string, len(c.Annotations)+1)
		for k, v := range c.Annotations {
			marked.Annotations[k] = v
		}
		marked.Annotations[viewAnnotation] = id
		out[i] = &marked
	}
	views.Store(id, view)
	return out, func() { views.Delete(id) }
}

// installAccurateEstimator registers accurateEstimator in Karmada's
// process-wide registry of estimators, once. Every scheduler of this package
// calls it before its first pass (newKarmadaScheduler), so that the
// registry is never written while a pass reads it.
func installAccurateEstimator() {
	installAccurate.Do(func() {
		estimatorclient.GetReplicaEstimators()[accurateEstimatorName] = accurateEstimator{}
	})
}

// accurateEstimator is the scheduler-estimator client of the predictions:
// for each cluster it answers what that member's estimator would, and for a
// cluster without one UnauthenticReplica, which karmada-scheduler ignores
// (as it does when it cannot reach an estimator).
type accurateEstimator struct{}

var errNoComponents = errors.New("multi-template workloads are not estimated member by member")

func (accurateEstimator) MaxAvailableReplicas(ctx context.Context, req estimatorclient.ReplicaEstimationRequest) ([]workv1alpha2.TargetCluster, error) {
	out := make([]workv1alpha2.TargetCluster, len(req.Clusters))
	for i, c := range req.Clusters {
		out[i] = workv1alpha2.TargetCluster{Name: c.Name, Replicas: estimatorclient.UnauthenticReplica}
		v, ok := views.Load(c.Annotations[viewAnnotation])
		if !ok {
			continue
		}
		view := v.(*accurateView)
		m := view.members[c.Name]
		if m == nil {
			continue
		}
		n, err := m.MaxAvailableReplicas(ctx, req.ReplicaRequirements)
		if err != nil {
			continue
		}
		out[i].Replicas = max(0, n+view.shift(ctx, c, req.ReplicaRequirements))
	}
	return out, nil
}

func (accurateEstimator) MaxAvailableComponentSets(context.Context, estimatorclient.ComponentSetEstimationRequest) ([]estimatorclient.ComponentSetEstimationResponse, error) {
	return nil, errNoComponents
}

// shift is how much a batch check changed the room of cluster c for a
// replica of req: the members' reports of the batch's own moves reach the
// estimators (which watch the pods) as they reach the resource summaries,
// so the estimator's answer moves by what the general estimator's does.
func (v *accurateView) shift(ctx context.Context, c *clusterv1alpha1.Cluster, req *workv1alpha2.ReplicaRequirements) int32 {
	read := v.clusters[c.Name]
	if read == nil || read.Status.ResourceSummary == nil || c.Status.ResourceSummary == nil ||
		apiequality.Semantic.DeepEqual(read.Status.ResourceSummary.Allocating, c.Status.ResourceSummary.Allocating) {
		return 0
	}
	now, ok := generalEstimate(ctx, c, req)
	if !ok {
		return 0
	}
	key, err := readKey(c.Name, req)
	if err != nil {
		return 0
	}
	if before, ok := v.asRead.Load(key); ok {
		return now - before.(int32)
	}
	before, ok := generalEstimate(ctx, read, req)
	if !ok {
		return 0
	}
	v.asRead.Store(key, before)
	return now - before
}

// generalEstimate is the general estimator's answer for one cluster.
func generalEstimate(ctx context.Context, c *clusterv1alpha1.Cluster, req *workv1alpha2.ReplicaRequirements) (int32, bool) {
	out, err := estimatorclient.NewGeneralEstimator().MaxAvailableReplicas(ctx, estimatorclient.ReplicaEstimationRequest{
		Clusters: []*clusterv1alpha1.Cluster{c}, ReplicaRequirements: req})
	if err != nil || len(out) != 1 {
		return 0, false
	}
	return out[0].Replicas, true
}

// readKey names a cluster and what of req the general estimator reads (the
// requests, and the node claim where the cluster reports resource models).
func readKey(cluster string, req *workv1alpha2.ReplicaRequirements) (string, error) {
	if req == nil {
		return cluster, nil
	}
	read, err := json.Marshal(struct {
		Requests  corev1.ResourceList     `json:"r"`
		NodeClaim *workv1alpha2.NodeClaim `json:"n"`
	}{req.ResourceRequest, req.NodeClaim})
	if err != nil {
		return "", err
	}
	return cluster + "\x00" + string(read), nil
}

// StaleSummaries names the clusters among names whose general estimate
// (from the Cluster's resource summary, which the member refreshes only
// every status update period) leaves fewer replicas needing req than the
// member's estimator: the summary still counts pods that stopped.
// karmada-scheduler takes the lower of the two answers, so until the next
// status update it weighs such a cluster by the stale summary, and the
// cluster's room changes when the summary catches up.
func StaleSummaries(ctx context.Context, in Input, req *workv1alpha2.ReplicaRequirements, names map[string]bool) []string {
	var out []string
	for _, c := range in.Clusters {
		member := in.Accurate[c.Name]
		if !names[c.Name] || member == nil || c.Status.ResourceSummary == nil {
			continue
		}
		general, ok := generalEstimate(ctx, c, req)
		if !ok {
			continue
		}
		if accurate, err := member.MaxAvailableReplicas(ctx, req); err == nil && general < accurate {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return out
}

// CaughtUp returns in with the resource summaries of the named clusters as
// they will read once the members' next status update caught up with
// their estimators: without the allocated and allocating counts, so that
// the general estimate no longer undercuts the estimator's answer, which is
// then the one karmada-scheduler takes. A prediction from it next to one
// from in tells whether the summaries' lag changes the decision.
func CaughtUp(in Input, names []string) Input {
	out := in
	out.Clusters = make([]*clusterv1alpha1.Cluster, len(in.Clusters))
	for i, c := range in.Clusters {
		if c.Status.ResourceSummary != nil && slices.Contains(names, c.Name) {
			c = c.DeepCopy()
			c.Status.ResourceSummary.Allocated = nil
			c.Status.ResourceSummary.Allocating = nil
		}
		out.Clusters[i] = c
	}
	return out
}

// departing is what package estimate's members add to an
// AccurateEstimator: the pods being deleted that the estimator still
// counts, and the view once they are gone.
type departing interface {
	Terminating() int
	Departed() (*estimate.Member, error)
}

// Departing names the clusters among names whose estimator still counts
// pods that are being deleted: karmada-scheduler-estimator sees a pod until
// it is gone, not from the moment its deletion began (when the member's
// workload status already leaves it out), so such a cluster's room grows a
// moment later.
func Departing(in Input, names map[string]bool) []string {
	var out []string
	for name, member := range in.Accurate {
		if d, ok := member.(departing); ok && names[name] && d.Terminating() > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Departed returns in with the estimators of the named clusters as they
// will answer once their terminating pods are gone (on a copy of the map).
// A prediction from it next to one from in tells whether those pods change
// the decision.
func Departed(in Input, names []string) (Input, error) {
	out := in
	out.Accurate = make(map[string]AccurateEstimator, len(in.Accurate))
	for name, member := range in.Accurate {
		if d, ok := member.(departing); ok && slices.Contains(names, name) {
			later, err := d.Departed()
			if err != nil {
				return in, fmt.Errorf("the estimator of %s without its terminating pods: %w", name, err)
			}
			member = later
		}
		out.Accurate[name] = member
	}
	return out, nil
}
