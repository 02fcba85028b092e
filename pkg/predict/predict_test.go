package predict

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// cluster is a Ready member serving Deployments with room for pods pods.
func cluster(name string, pods int64) *clusterv1alpha1.Cluster {
	return &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: clusterv1alpha1.ClusterStatus{
			Conditions:     []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue}},
			APIEnablements: []clusterv1alpha1.APIEnablement{{GroupVersion: "apps/v1", Resources: []clusterv1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}}}},
			ResourceSummary: &clusterv1alpha1.ResourceSummary{
				Allocatable: corev1.ResourceList{
					corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
					corev1.ResourceCPU:    resource.MustParse("32"),
					corev1.ResourceMemory: resource.MustParse("256Gi"),
				},
			},
		},
	}
}

var (
	dynamic = policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas},
	}}
	aggregated = policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated,
	}}
	duplicated = policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated,
	}}
)

func deploy(name string) rebalance.Target {
	return rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: name}}
}

// binding is a scheduled binding of deployment name with replicas split as clusters.
func binding(name string, placement policyv1alpha1.Placement, replicas int32, clusters ...workv1alpha2.TargetCluster) *workv1alpha2.ResourceBinding {
	last := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-deployment",
			Labels: map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: "id"}},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource:  workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: name, UID: types.UID(name + "-uid")},
			Replicas:  replicas,
			Placement: placement.DeepCopy(),
			Clusters:  clusters,
		},
		Status: workv1alpha2.ResourceBindingStatus{LastScheduledTime: &last},
	}
}

func tc(name string, replicas int32) workv1alpha2.TargetCluster {
	return workv1alpha2.TargetCluster{Name: name, Replicas: replicas}
}

func input(clusters []*clusterv1alpha1.Cluster, bindings ...*workv1alpha2.ResourceBinding) Input {
	in := Input{Clusters: clusters, Bindings: map[string]*workv1alpha2.ResourceBinding{}}
	for _, b := range bindings {
		in.Bindings[Key(b.Namespace, b.Name)] = b
	}
	return in
}

func TestPredictSingle(t *testing.T) {
	three := func() []*clusterv1alpha1.Cluster {
		return []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 100), cluster("member3", 100)}
	}
	suspended := binding("s", dynamic, 3, tc("member2", 3))
	suspended.Spec.Suspension = &workv1alpha2.Suspension{Scheduling: ptr.To(true)}
	held := binding("h", dynamic, 3, tc("member2", 3))
	held.Spec.Suspension = &workv1alpha2.Suspension{Scheduling: ptr.To(true)}
	held.Annotations = map[string]string{rebalance.HandoverAnnotation: `{"phase":"Held"}`}
	foreign := binding("f", dynamic, 3, tc("member2", 3))
	foreign.Spec.SchedulerName = "other"
	noPolicy := binding("n", dynamic, 3, tc("member2", 3))
	noPolicy.Labels = nil

	tests := []struct {
		name      string
		clusters  []*clusterv1alpha1.Cluster
		binding   *workv1alpha2.ResourceBinding
		estimated []string
		verdict   Verdict
		reason    string
		predicted map[string]int32
	}{
		{name: "dynamic weight spreads over the recovered cluster", clusters: three(),
			binding: binding("a", dynamic, 6, tc("member2", 3), tc("member3", 3)),
			verdict: WouldMove, reason: ReasonFreshReschedule, predicted: map[string]int32{"member1": 2, "member2": 2, "member3": 2}},
		{name: "aggregated stays where its replicas are", clusters: three(),
			binding: binding("a", aggregated, 4, tc("member2", 4)),
			verdict: Unchanged, reason: ReasonFreshReschedule, predicted: map[string]int32{"member2": 4}},
		{name: "aggregated leaves a full cluster", clusters: []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 0)},
			binding: binding("a", aggregated, 4, tc("member2", 4)),
			verdict: WouldMove, reason: ReasonFreshReschedule, predicted: map[string]int32{"member1": 4}},
		{name: "duplicated cannot change", clusters: three(),
			binding: binding("a", duplicated, 2, tc("member1", 2), tc("member2", 2), tc("member3", 2)),
			verdict: CannotChange, reason: rebalance.ReasonDuplicated, predicted: map[string]int32{"member1": 2, "member2": 2, "member3": 2}},
		{name: "no room anywhere", clusters: []*clusterv1alpha1.Cluster{cluster("member1", 1), cluster("member2", 1)},
			binding: binding("a", dynamic, 10, tc("member2", 1)),
			verdict: CannotFit, reason: ReasonUnschedulable, predicted: map[string]int32{"member2": 1}},
		{name: "suspended", clusters: three(), binding: suspended,
			verdict: CannotChange, reason: rebalance.ReasonSchedulingSuspended, predicted: map[string]int32{"member2": 3}},
		{name: "held by an unfinished move", clusters: three(), binding: held,
			verdict: CannotChange, reason: ReasonHeldByMove, predicted: map[string]int32{"member2": 3}},
		{name: "foreign scheduler", clusters: three(), binding: foreign,
			verdict: CannotChange, reason: rebalance.ReasonForeignScheduler, predicted: map[string]int32{"member2": 3}},
		{name: "dependency only", clusters: three(), binding: noPolicy,
			verdict: CannotChange, reason: rebalance.ReasonNoPolicy, predicted: map[string]int32{"member2": 3}},
		{name: "scheduler estimator", clusters: three(), estimated: []string{"member1"},
			binding: binding("a", dynamic, 6, tc("member2", 6)),
			verdict: CannotPredict, reason: ReasonSchedulerEstimator, predicted: map[string]int32{"member2": 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(tt.clusters, tt.binding)
			in.Estimated = tt.estimated
			target := deploy(tt.binding.Spec.Resource.Name)
			got, err := Predict(context.Background(), in, []rebalance.Target{target}, Options{})
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, tt.verdict, got[0].Verdict, got[0].Message)
			assert.Equal(t, tt.reason, got[0].Reason)
			assert.Equal(t, tt.predicted, placementMap(got[0].Predicted))
		})
	}
}

func TestPredictBindingNotFound(t *testing.T) {
	got, err := Predict(context.Background(), input(nil), []rebalance.Target{deploy("x")}, Options{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, CannotPredict, got[0].Verdict)
	assert.Equal(t, ReasonBindingNotFound, got[0].Reason)
}

// A batch consumes capacity in order: the second workload does not fit into
// the room the first one took; predicted alone, it would.
func TestPredictBatchConsumesCapacity(t *testing.T) {
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 5), cluster("member2", 0)}
	a := binding("a", aggregated, 4, tc("member2", 4))
	b := binding("b", aggregated, 4, tc("member2", 4))
	in := input(clusters, a, b)

	got, err := Predict(context.Background(), in, []rebalance.Target{deploy("b"), deploy("a")}, Options{Eventual: true})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].Workload.Name, "predicted in the order triggers are written")
	assert.Equal(t, map[string]int32{"member1": 4}, placementMap(got[0].Predicted))
	assert.Equal(t, int32(4), got[0].Moves)
	assert.Equal(t, Unchanged, got[1].Verdict, "member1 has room for one replica left, member2 for its own four")
	assert.Equal(t, map[string]int32{"member2": 4}, placementMap(got[1].Predicted), got[1].Message)

	protected, err := Predict(context.Background(), in, []rebalance.Target{deploy("a"), deploy("b")}, Options{OvercommitProtection: true})
	require.NoError(t, err)
	assert.Equal(t, map[string]int32{"member2": 4}, placementMap(protected[1].Predicted), "member1 holds a's assumed footprint")

	// Without either, each decision reads the summaries as the members last
	// reported them: whether a's move is reported before b is decided is a
	// matter of timing, and b goes to member1 or stays. Both are among the
	// batch's first decisions, made before any report is likely: the
	// placement with no report landed is predicted, the other listed.
	independent, err := Predict(context.Background(), in, []rebalance.Target{deploy("a"), deploy("b")}, Options{})
	require.NoError(t, err)
	for _, p := range independent {
		assert.Equal(t, WouldMove, p.Verdict)
		assert.Equal(t, ReasonBatchTiming, p.Reason)
		assert.Equal(t, map[string]int32{"member1": 4}, placementMap(p.Predicted))
		assert.Equal(t, int32(4), p.Moves)
		assert.Equal(t, []map[string]int32{{"member1": 4}, {"member2": 4}}, placementMaps(p.Possible))
		assert.Contains(t, p.Message, "likely {member1:4}")
		assert.Contains(t, p.Message, "changes it to: {member2:4}")
	}
}

func placementMaps(ps [][]workv1alpha2.TargetCluster) []map[string]int32 {
	out := make([]map[string]int32, 0, len(ps))
	for _, p := range ps {
		out = append(out, placementMap(p))
	}
	return out
}

// The mixed e2e batch in small: 5 replicas divided over members whose room
// differs by fewer pods than the batch's other moves change is decided by
// when the members report those moves; with room far apart, it is not.
func TestPredictBatchTiming(t *testing.T) {
	// After a failover: member1 empty, member2 and member3 hold the batch.
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 996), cluster("member2", 962), cluster("member3", 972)}
	var bindings []*workv1alpha2.ResourceBinding
	var targets []rebalance.Target
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		bindings = append(bindings, binding(name, dynamic, 5, tc("member2", 3), tc("member3", 2)))
		targets = append(targets, deploy(name))
	}
	// Eight: all among the scheduler's first decisions, predicted as they
	// divide with no report landed, the other placement listed.
	got, err := Predict(context.Background(), input(clusters, bindings...), targets, Options{})
	require.NoError(t, err)
	for _, p := range got {
		assert.Equal(t, WouldMove, p.Verdict, p.Message)
		assert.Equal(t, ReasonBatchTiming, p.Reason)
		assert.Equal(t, map[string]int32{"member1": 2, "member2": 1, "member3": 2}, placementMap(p.Predicted), "with no report landed")
		require.GreaterOrEqual(t, len(p.Possible), 2)
		assert.Equal(t, placementMap(p.Predicted), placementMap(p.Possible[0]))
		assert.Contains(t, p.Message, "likely {member1:2, member2:1, member3:2}")
		assert.Contains(t, p.Message, "take up to 14 pods on member1")
		assert.Contains(t, p.Message, "changes it to: {member1:2, member2:2, member3:1}")
		assert.True(t, Selection{Clusters: []string{"member1"}}.Keeps(&p))
		assert.True(t, Selection{ChangedOnly: true}.Keeps(&p))
		assert.False(t, Selection{Clusters: []string{"member3"}}.Keeps(&p))
	}

	// Past the first QuickDecisions the scheduler may well have seen
	// reports: nothing is predicted, every placement it may get is listed.
	var long []*workv1alpha2.ResourceBinding
	var longTargets []rebalance.Target
	for i := range QuickDecisions + 4 {
		name := fmt.Sprintf("w%02d", i)
		long = append(long, binding(name, dynamic, 5, tc("member2", 3), tc("member3", 2)))
		longTargets = append(longTargets, deploy(name))
	}
	got, err = Predict(context.Background(), input(clusters, long...), longTargets, Options{})
	require.NoError(t, err)
	for i, p := range got {
		assert.Equal(t, ReasonBatchTiming, p.Reason, p.Message)
		if i < QuickDecisions {
			assert.Equal(t, WouldMove, p.Verdict, p.Workload.Name)
			continue
		}
		assert.Equal(t, CannotPredict, p.Verdict, p.Workload.Name)
		assert.Equal(t, p.Before, p.Predicted)
		require.GreaterOrEqual(t, len(p.Possible), 2)
		assert.Contains(t, p.Message, "at a moment the client cannot know")
		// Every placement it may get gives member1 replicas: selected by
		// -C member1 and --changed-only, as no guess is made.
		assert.True(t, Selection{Clusters: []string{"member1"}}.Keeps(&p), p.Message)
		assert.True(t, Selection{ChangedOnly: true}.Keeps(&p))
		assert.False(t, Selection{Clusters: []string{"member3"}}.Keeps(&p))
	}

	// One writer at a time: the scheduler takes the batch in its order, so
	// the first workload is decided before any other moved; the last one may
	// see all of them reported.
	ordered, err := Predict(context.Background(), input(clusters, bindings...), targets, Options{InFlight: 1})
	require.NoError(t, err)
	assert.Equal(t, WouldMove, ordered[0].Verdict, ordered[0].Message)
	assert.Equal(t, ReasonFreshReschedule, ordered[0].Reason)
	assert.Equal(t, ReasonBatchTiming, ordered[7].Reason)
	assert.Contains(t, ordered[7].Message, "take up to 14 pods on member1")

	// One workload alone: nothing else moves, the prediction stands.
	alone, err := Predict(context.Background(), input(clusters, bindings[0]), targets[:1], Options{})
	require.NoError(t, err)
	assert.Equal(t, WouldMove, alone[0].Verdict)

	// Room far apart: the batch's moves cannot change the division.
	roomy := []*clusterv1alpha1.Cluster{cluster("member1", 900), cluster("member2", 300), cluster("member3", 300)}
	got, err = Predict(context.Background(), input(roomy, bindings...), targets, Options{})
	require.NoError(t, err)
	for _, p := range got {
		assert.Equal(t, WouldMove, p.Verdict, p.Message)
		assert.Nil(t, p.Possible)
	}
}

func TestByClusterAndCounts(t *testing.T) {
	ps := []Prediction{
		{Before: []workv1alpha2.TargetCluster{tc("member2", 3)}, Predicted: []workv1alpha2.TargetCluster{tc("member1", 2), tc("member2", 1)}, Verdict: WouldMove, Reason: ReasonFreshReschedule},
		{Before: []workv1alpha2.TargetCluster{tc("member2", 1)}, Predicted: []workv1alpha2.TargetCluster{tc("member2", 1)}, Verdict: CannotChange, Reason: rebalance.ReasonDuplicated},
	}
	assert.Equal(t, []ClusterChange{{Name: "member1", Before: 0, Predicted: 2}, {Name: "member2", Before: 4, Predicted: 2}}, ByCluster(ps))
	counts := Counts(ps)
	assert.Equal(t, 1, counts[0].Total)
	assert.Equal(t, map[string]int{rebalance.ReasonDuplicated: 1}, counts[4].ByReason)
}

// A decision allocates what a cluster gains and frees what it loses, on the
// scheduler's own copies of the clusters.
func TestConsumeMovesCapacity(t *testing.T) {
	in := []*clusterv1alpha1.Cluster{cluster("member1", 8), cluster("member2", 8)}
	sched, err := newKarmadaScheduler(in)
	require.NoError(t, err)
	defer sched.done()
	spec := binding("a", dynamic, 3).Spec
	spec.ReplicaRequirements = &workv1alpha2.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
	sched.consume(&spec, []workv1alpha2.TargetCluster{tc("member2", 3)}, []workv1alpha2.TargetCluster{tc("member1", 2), tc("member2", 1)})

	m1, m2 := sched.clusters["member1"].Status.ResourceSummary.Allocating, sched.clusters["member2"].Status.ResourceSummary.Allocating
	assert.Equal(t, int64(2), m1.Pods().Value())
	assert.Equal(t, int64(1000), m1.Cpu().MilliValue())
	assert.Equal(t, int64(-2), m2.Pods().Value())
	assert.Equal(t, int64(-1000), m2.Cpu().MilliValue())
	assert.Nil(t, in[0].Status.ResourceSummary.Allocating, "the input is not changed")
}

// Where a second Fresh pass, starting from the first pass's placement,
// would give another placement, both are shown.
func TestPredictSecondPass(t *testing.T) {
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 8), cluster("member2", 2)}
	b := binding("b", dynamic, 6, tc("member2", 6))
	got, err := Predict(context.Background(), input(clusters, b), []rebalance.Target{deploy("b")}, Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int32{"member1": 3, "member2": 3}, placementMap(got[0].Predicted))
	assert.Equal(t, map[string]int32{"member1": 4, "member2": 2}, placementMap(got[0].Alternative))
}

func TestOvercommits(t *testing.T) {
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 3), cluster("member2", 100)}
	ps := []Prediction{
		{Before: []workv1alpha2.TargetCluster{tc("member2", 2)}, Predicted: []workv1alpha2.TargetCluster{tc("member1", 2)}},
		{Before: []workv1alpha2.TargetCluster{tc("member2", 2)}, Predicted: []workv1alpha2.TargetCluster{tc("member1", 2)}},
	}
	assert.Equal(t, []Overcommit{{Cluster: "member1", Gain: 4, Room: 3}}, Overcommits(clusters, ps))
	assert.Empty(t, Overcommits(clusters, ps[:1]))
}

// The timing check's shortcut (filter and score once, then select and
// divide) answers as the whole pass does, also after the summaries change.
func TestDividerAnswersAsSchedule(t *testing.T) {
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 996), cluster("member2", 962), cluster("member3", 972)}
	for _, b := range []*workv1alpha2.ResourceBinding{
		binding("d", dynamic, 5, tc("member2", 3), tc("member3", 2)),
		binding("a", aggregated, 4, tc("member2", 4)),
	} {
		sched, err := newKarmadaScheduler(clusters)
		require.NoError(t, err)
		defer sched.done()
		fresh := freshTrigger(&b.Spec, &b.Status)
		fast, ok := sched.divider(context.Background(), nil, fresh, &b.Status)
		require.True(t, ok)
		for _, free := range []int64{0, 20, 40} {
			sched.setAllocating("member1", corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(free, resource.DecimalSI)})
			want, _, err := sched.schedule(context.Background(), nil, fresh, &b.Status)
			require.NoError(t, err)
			got, err := fast()
			require.NoError(t, err)
			assert.True(t, SamePlacement(want, got), "%s with %d pods allocating on member1: %v, %v", b.Name, free, want, got)
		}
	}
}

// The timing check's whole scheduling pass (cluster affinity groups, which
// the shortcut does not take) reads each reported state afresh: the
// scheduler's snapshot of the clusters is not kept across a change.
func TestPredictBatchTimingWholePass(t *testing.T) {
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 996), cluster("member2", 962), cluster("member3", 972)}
	grouped := dynamic.DeepCopy()
	grouped.ClusterAffinities = []policyv1alpha1.ClusterAffinityTerm{{
		AffinityName:    "all",
		ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2", "member3"}},
	}}
	var bindings []*workv1alpha2.ResourceBinding
	var targets []rebalance.Target
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		b := binding(name, *grouped, 5, tc("member2", 3), tc("member3", 2))
		b.Status.SchedulerObservedAffinityName = "all"
		bindings = append(bindings, b)
		targets = append(targets, deploy(name))
	}
	sched, err := newKarmadaScheduler(clusters)
	require.NoError(t, err)
	defer sched.done()
	_, ok := sched.divider(context.Background(), nil, &bindings[0].Spec, &bindings[0].Status)
	require.False(t, ok, "cluster affinity groups take the whole pass")

	got, err := Predict(context.Background(), input(clusters, bindings...), targets, Options{})
	require.NoError(t, err)
	for _, p := range got {
		assert.Equal(t, ReasonBatchTiming, p.Reason, p.Message)
		assert.Equal(t, []map[string]int32{
			{"member1": 2, "member2": 1, "member3": 2},
			{"member1": 2, "member2": 2, "member3": 1},
		}, placementMaps(p.Possible)[:2], p.Message)
	}
}

// A batch predicted side by side gives what one goroutine gives, row for
// row, including the timing check's verdicts.
func TestPredictSideBySideAsInTurn(t *testing.T) {
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 1400), cluster("member2", 1200), cluster("member3", 1250)}
	bindings, targets := recoveryBatch(300, 5, 100, 2)
	in := input(clusters, bindings...)
	predictWith := func(procs int) []Prediction {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		require.Equal(t, min(procs, maxWorkers), workersFor(len(targets)))
		got, err := Predict(context.Background(), in, targets, Options{InFlight: 50})
		require.NoError(t, err)
		return got
	}
	inTurn, sideBySide := predictWith(1), predictWith(4)
	require.Equal(t, inTurn, sideBySide)
	timed := 0
	for _, p := range inTurn {
		if p.Reason == ReasonBatchTiming {
			timed++
		}
	}
	assert.Positive(t, timed, "the batch exercises the timing check")
}

// recoveryBatch is a batch after a failover of member1: dyn workloads
// divided by dynamic weights, dynReplicas each split over member2 and
// member3, then agg Aggregated workloads of aggReplicas on member2.
func recoveryBatch(dyn int, dynReplicas int32, agg int, aggReplicas int32) ([]*workv1alpha2.ResourceBinding, []rebalance.Target) {
	var bindings []*workv1alpha2.ResourceBinding
	var targets []rebalance.Target
	for i := range dyn {
		name := fmt.Sprintf("dyn-%04d", i)
		bindings = append(bindings, binding(name, dynamic, dynReplicas, tc("member2", (dynReplicas+1)/2), tc("member3", dynReplicas/2)))
		targets = append(targets, deploy(name))
	}
	for i := range agg {
		name := fmt.Sprintf("agg-%04d", i)
		bindings = append(bindings, binding(name, aggregated, aggReplicas, tc("member2", aggReplicas)))
		targets = append(targets, deploy(name))
	}
	return bindings, targets
}

// A pass keeps one copy of each distinct list of placements it finds, in the
// order found; a list that differs in any placement, or in order, is its own.
func TestPlacementListsShareEqualLists(t *testing.T) {
	lists := &placementLists{byKey: map[string][][]workv1alpha2.TargetCluster{}}
	list := func(ps ...[]workv1alpha2.TargetCluster) [][]workv1alpha2.TargetCluster { return ps }
	a := []workv1alpha2.TargetCluster{tc("member2", 2), tc("member3", 1)}
	b := []workv1alpha2.TargetCluster{tc("member1", 3)}
	first := lists.of(list(a, b))
	again := lists.of(list(slices.Clone(a), slices.Clone(b)))
	assert.Same(t, &first[0], &again[0], "an equal list is the one kept")
	assert.NotSame(t, &first[0], &lists.of(list(b, a))[0], "the order is the prediction's: the first is the row's own")
	other := lists.of(list(a, []workv1alpha2.TargetCluster{tc("member1", 2)}))
	assert.NotSame(t, &first[0], &other[0])
	assert.Equal(t, int32(2), other[1][0].Replicas)
}
