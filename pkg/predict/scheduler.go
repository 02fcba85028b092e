package predict

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/features"
	clusterlister "github.com/karmada-io/karmada/pkg/generated/listers/cluster/v1alpha1"
	schedcache "github.com/karmada-io/karmada/pkg/scheduler/cache"
	"github.com/karmada-io/karmada/pkg/scheduler/core"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"
	"github.com/karmada-io/karmada/pkg/util/names"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
)

// overcommitGate turns on, in this process only, the feature gate under
// which Karmada's general estimator deducts the capacity that earlier
// decisions assumed. The prediction relies on it to consume capacity in
// order; it changes nothing on the control plane.
var overcommitGate sync.Once

func enableOvercommitProtection() error {
	var err error
	overcommitGate.Do(func() {
		err = features.FeatureGate.SetFromMap(map[string]bool{string(features.SchedulingOvercommitProtection): true})
	})
	return err
}

// karmadaScheduler runs Karmada's generic scheduling algorithm, with the
// in-tree plugins karmada-scheduler registers by default, over a fixed set of
// clusters. Between the decisions of a batch it makes each decision consume
// capacity, so that a batch does not fit twice into the same free space:
// either as the clusters will report it once the pods moved (consume), or,
// for a scheduler with overcommit protection, in Karmada's own assumption
// cache (assume).
type karmadaScheduler struct {
	// engine is Karmada's algorithm and framework, taken for this
	// scheduler's life (engines.go); done gives it back.
	*engine
	// clusters are the scheduler's own copies. Their resource summaries are
	// changed through setAllocating only, which drops the cached snapshot.
	clusters map[string]*clusterv1alpha1.Cluster
}

// newKarmadaScheduler sets up a scheduler over copies of clusters. The
// caller calls done once it has no more passes to run.
func newKarmadaScheduler(clusters []*clusterv1alpha1.Cluster) (*karmadaScheduler, error) {
	if err := enableOvercommitProtection(); err != nil {
		return nil, err
	}
	installAccurateEstimator()
	own := make(map[string]*clusterv1alpha1.Cluster, len(clusters))
	clusterIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range clusters {
		c = c.DeepCopy()
		own[c.Name] = c
		if err := clusterIndex.Add(c); err != nil {
			return nil, err
		}
	}
	e, err := takeEngine()
	if err != nil {
		return nil, err
	}
	// The binding index only serves the workload-affinity plugins, which
	// karmada-scheduler registers behind an alpha gate that is off by default.
	bindingIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e.cache.Cache = schedcache.NewCache(clusterlister.NewClusterLister(clusterIndex), bindingIndex, schedcache.DefaultAssumptionTTL)
	return &karmadaScheduler{engine: e, clusters: own}, nil
}

// done gives the scheduler's engine back; s runs no pass after it.
func (s *karmadaScheduler) done() {
	if s.engine != nil {
		s.engine.giveBack()
		s.engine = nil
	}
}

// snapshotCache is Karmada's scheduler cache with its cluster snapshot kept
// until the scheduler changes one of its cluster copies. Karmada's cache
// deep-copies every Cluster (API enablements, resource models and all) for
// each scheduling pass; a plan makes thousands of passes over clusters that
// mostly stay the same, and that copying was the larger part of the
// algorithm's time. The algorithm and its plugins only read a snapshot.
type snapshotCache struct {
	schedcache.Cache
	kept *schedcache.Snapshot
}

// Snapshot returns the snapshot taken since the clusters last changed.
func (c *snapshotCache) Snapshot() schedcache.Snapshot {
	if c.kept == nil {
		snapshot := c.Cache.Snapshot()
		c.kept = &snapshot
	}
	return *c.kept
}

// setAllocating sets the Allocating resources of the scheduler's copy of
// cluster name, and drops the snapshot taken before. Every change to the
// copies goes through here, so that no pass reads a snapshot older than the
// change.
func (s *karmadaScheduler) setAllocating(name string, allocating corev1.ResourceList) {
	s.clusters[name].Status.ResourceSummary.Allocating = allocating
	s.cache.kept = nil
}

// freshTrigger returns a copy of spec with a reschedule trigger one second
// after the last schedule, which is what the scheduler sees once a rebalance
// wrote its trigger: Karmada's assignment then runs in Fresh mode.
func freshTrigger(spec *workv1alpha2.ResourceBindingSpec, status *workv1alpha2.ResourceBindingStatus) *workv1alpha2.ResourceBindingSpec {
	out := spec.DeepCopy()
	if status.LastScheduledTime != nil {
		at := metav1.NewTime(status.LastScheduledTime.Add(time.Second))
		out.RescheduleTriggeredAt = &at
	}
	return out
}

// schedule runs one scheduling pass the way karmada-scheduler does for a
// binding whose trigger it honours. With clusterAffinities it starts from the
// group the binding was last scheduled with on v1.18 and older, from the
// first group on v1.19 and newer (karmada#5425), and moves on while a group
// does not fit; when the release cannot be told between the two and they
// differ, a *releaseError says so. cleared reports
// that the scheduler would write an empty placement: it does so when no
// cluster fits, and keeps the old one for any other error. With a release
// (nil: the pinned one), the placement is the one that release writes
// (release.go); a *releaseError says why it cannot be told.
func (s *karmadaScheduler) schedule(ctx context.Context, release *karmadaversion.Info, spec *workv1alpha2.ResourceBindingSpec, status *workv1alpha2.ResourceBindingStatus) (result []workv1alpha2.TargetCluster, cleared bool, err error) {
	option := &core.ScheduleAlgorithmOption{}
	if spec.Placement.ClusterAffinities == nil {
		r, err := s.algorithm.Schedule(ctx, spec, status, option)
		if err != nil {
			return nil, isFitError(err), err
		}
		return s.release(ctx, release, spec, status, r.SuggestedClusters)
	}

	groups := spec.Placement.ClusterAffinities
	current := affinityIndex(groups, status.SchedulerObservedAffinityName)
	restarts := karmadaversion.Behaviour{Known: true}
	if release != nil {
		restarts = release.RescheduleRestartsAffinityGroups()
	}
	switch {
	case restarts.Known && restarts.Yes:
		return s.scheduleFrom(ctx, release, spec, status, 0)
	case restarts.Known || current == 0:
		return s.scheduleFrom(ctx, release, spec, status, current)
	}
	// The control plane may run v1.18 or v1.19: the two start from
	// different groups, and only a placement both give is a prediction.
	older, olderCleared, olderErr := s.scheduleFrom(ctx, release, spec, status, current)
	newer, newerCleared, newerErr := s.scheduleFrom(ctx, release, spec, status, 0)
	if olderErr == nil && newerErr == nil && SamePlacement(older, newer) || olderErr != nil && newerErr != nil && olderCleared == newerCleared {
		return older, olderCleared, olderErr
	}
	return nil, false, &releaseError{reason: ReasonReleaseDependent, message: fmt.Sprintf(
		"%s: v1.18 and older reschedule from clusterAffinities group %q, where the workload is (%s); v1.19 and newer start again from the first group, %q (%s, karmada#5425)",
		releaseName(release), groups[current].AffinityName, outcomeText(older, olderErr), groups[0].AffinityName, outcomeText(newer, newerErr))}
}

// scheduleFrom runs the scheduling pass over the clusterAffinities groups
// from group first on, moving to the next while a group does not fit.
func (s *karmadaScheduler) scheduleFrom(ctx context.Context, release *karmadaversion.Info, spec *workv1alpha2.ResourceBindingSpec, status *workv1alpha2.ResourceBindingStatus, first int) ([]workv1alpha2.TargetCluster, bool, error) {
	groups := spec.Placement.ClusterAffinities
	option := &core.ScheduleAlgorithmOption{}
	observed := status.DeepCopy()
	var firstErr error
	for i := first; i < len(groups); i++ {
		observed.SchedulerObservedAffinityName = groups[i].AffinityName
		r, err := s.algorithm.Schedule(ctx, spec, observed, option)
		if err == nil {
			return s.release(ctx, release, spec, observed, r.SuggestedClusters)
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, isFitError(firstErr), firstErr
}

// outcomeText is a placement, or the error that stands for it, in a message.
func outcomeText(placement []workv1alpha2.TargetCluster, err error) string {
	if err != nil {
		return "fails: " + err.Error()
	}
	return "placement " + placementText(placement)
}

// release turns the pinned scheduler's placement into the release's.
func (s *karmadaScheduler) release(ctx context.Context, release *karmadaversion.Info, spec *workv1alpha2.ResourceBindingSpec, status *workv1alpha2.ResourceBindingStatus, pinned []workv1alpha2.TargetCluster) ([]workv1alpha2.TargetCluster, bool, error) {
	if release == nil {
		return pinned, false, nil
	}
	out, err := s.forRelease(ctx, release, spec, status, pinned)
	return out, false, err
}

// affinityIndex finds the group named observed, or the first group.
func affinityIndex(groups []policyv1alpha1.ClusterAffinityTerm, observed string) int {
	for i, g := range groups {
		if observed != "" && g.AffinityName == observed {
			return i
		}
	}
	return 0
}

func isFitError(err error) bool {
	var fit *framework.FitError
	return errors.As(err, &fit)
}

// consume changes the clusters' resource summaries as they will read once a
// decision took effect: the replicas a cluster gains are allocated there, the
// ones it loses are freed. This is what the next decisions of a batch see
// from a karmada-scheduler without overcommit protection, once the member
// clusters have reported the moved pods.
func (s *karmadaScheduler) consume(spec *workv1alpha2.ResourceBindingSpec, before, after []workv1alpha2.TargetCluster) {
	if !spec.IsWorkload() {
		return
	}
	old := placementMap(before)
	for name, n := range placementMap(after) {
		old[name] -= n
	}
	for name, freed := range old {
		c := s.clusters[name]
		if freed == 0 || c == nil || c.Status.ResourceSummary == nil {
			continue
		}
		allocating := c.Status.ResourceSummary.Allocating.DeepCopy()
		if allocating == nil {
			allocating = corev1.ResourceList{}
		}
		delta := -int64(freed)
		addQuantity(allocating, corev1.ResourcePods, *resource.NewQuantity(delta, resource.DecimalSI))
		if r := spec.ReplicaRequirements; r != nil {
			for name, q := range r.ResourceRequest {
				addQuantity(allocating, name, *resource.NewMilliQuantity(q.MilliValue()*delta, q.Format))
			}
		}
		s.setAllocating(name, allocating)
	}
}

// assume records the capacity a decision consumes in Karmada's assumption
// cache, as karmada-scheduler does after it wrote a result: the binding's
// whole footprint on each cluster of the new placement. Later estimates
// deduct it from the clusters' resource summaries.
func (s *karmadaScheduler) assume(namespace, name string, spec *workv1alpha2.ResourceBindingSpec, result []workv1alpha2.TargetCluster) {
	if !spec.IsWorkload() {
		return
	}
	key := names.NamespacedKey(namespace, name)
	assumptions := s.cache.AssigningResourceBindings()
	if len(spec.Components) > 0 {
		for _, tc := range result {
			assumptions.Assume(key, tc.Name, schedcache.AssumedWorkload{Namespace: spec.Resource.Namespace, Components: spec.Components})
		}
		return
	}
	for _, tc := range result {
		component := workv1alpha2.Component{Name: spec.Resource.Name, Replicas: tc.Replicas}
		if r := spec.ReplicaRequirements; r != nil {
			component.ReplicaRequirements = &workv1alpha2.ComponentReplicaRequirements{
				NodeClaim: r.NodeClaim, ResourceRequest: r.ResourceRequest, PriorityClassName: r.PriorityClassName,
			}
		}
		assumptions.Assume(key, tc.Name, schedcache.AssumedWorkload{Namespace: spec.Resource.Namespace, Components: []workv1alpha2.Component{component}})
	}
}
