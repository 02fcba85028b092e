package predict

import (
	"context"
	"testing"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// The releases the tests predict for: as Detect tells them from the schema
// (v1.16 cannot be told from v1.15 and v1.17).
var (
	v112   = &karmadaversion.Info{Oldest: karmadaversion.Release{Minor: 12}, Newest: karmadaversion.Release{Minor: 12}}
	v11517 = &karmadaversion.Info{Oldest: karmadaversion.Release{Minor: 15}, Newest: karmadaversion.Release{Minor: 17}}
	v116   = &karmadaversion.Info{Oldest: karmadaversion.Release{Minor: 16}, Newest: karmadaversion.Release{Minor: 16}}
	v118   = &karmadaversion.Info{Oldest: karmadaversion.Release{Minor: 18}, Newest: karmadaversion.Release{Minor: 18}}
)

// want is the verdict and placement expected on one release.
type want struct {
	verdict   Verdict
	reason    string
	predicted map[string]int32
}

func predictOn(t *testing.T, release *karmadaversion.Info, clusters []*clusterv1alpha1.Cluster, b *workv1alpha2.ResourceBinding) Prediction {
	t.Helper()
	got, err := Predict(context.Background(), input(clusters, b), []rebalance.Target{deploy(b.Spec.Resource.Name)}, Options{Release: release})
	require.NoError(t, err)
	require.Len(t, got, 1)
	return got[0]
}

// modelled is a cluster whose resource models count one node of 32 to 64
// CPUs, the way Karmada's default models grade it.
func modelled(name string, pods int64) *clusterv1alpha1.Cluster {
	c := cluster(name, pods)
	c.Spec.ResourceModels = []clusterv1alpha1.ResourceModel{
		{Grade: 0, Ranges: []clusterv1alpha1.ResourceModelRange{{Name: corev1.ResourceCPU, Min: resource.MustParse("0"), Max: resource.MustParse("32")}}},
		{Grade: 1, Ranges: []clusterv1alpha1.ResourceModelRange{{Name: corev1.ResourceCPU, Min: resource.MustParse("32"), Max: resource.MustParse("64")}}},
	}
	c.Status.ResourceSummary.AllocatableModelings = []clusterv1alpha1.AllocatableModeling{{Grade: 0, Count: 0}, {Grade: 1, Count: 1}}
	return c
}

func TestPredictPerRelease(t *testing.T) {
	onlyM1M2 := func(p policyv1alpha1.Placement) policyv1alpha1.Placement {
		p.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}
		return p
	}
	static := policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
			{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Weight: 1},
			{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}, Weight: 1},
			{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member3"}}, Weight: 2},
		}},
	}}
	small := func(b *workv1alpha2.ResourceBinding) *workv1alpha2.ResourceBinding {
		b.Spec.ReplicaRequirements = &workv1alpha2.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
		return b
	}
	byRelease := func(w112, w11517, w116, w118 want) map[*karmadaversion.Info]want {
		return map[*karmadaversion.Info]want{v112: w112, v11517: w11517, v116: w116, v118: w118}
	}
	moves := func(p map[string]int32) want { return want{WouldMove, ReasonFreshReschedule, p} }

	tests := []struct {
		name     string
		clusters []*clusterv1alpha1.Cluster
		binding  *workv1alpha2.ResourceBinding
		want     map[*karmadaversion.Info]want
	}{
		{
			// Weights 100, 99, 98 for 6 replicas: floors 2, 1, 1 and the two
			// left to the two largest before v1.16; Webster rounds 2.01, 1.99,
			// 1.97 to 2 each.
			name:     "dynamic weight: remainders to the largest weights before v1.16",
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 96), cluster("member3", 95)},
			binding:  binding("a", dynamic, 6, tc("member2", 3), tc("member3", 3)),
			want: byRelease(
				moves(map[string]int32{"member1": 3, "member2": 2, "member3": 1}),
				want{CannotPredict, ReasonReleaseDependent, map[string]int32{"member2": 3, "member3": 3}},
				moves(map[string]int32{"member1": 2, "member2": 2, "member3": 2}),
				moves(map[string]int32{"member1": 2, "member2": 2, "member3": 2})),
		},
		{
			// Three equal weights and one replica left: v1.12 picks at random.
			name:     "dynamic weight: a tie v1.12 breaks at random",
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 96), cluster("member3", 100)},
			binding:  binding("a", dynamic, 4, tc("member2", 4)),
			want: byRelease(
				want{CannotPredict, ReasonRandomTie, map[string]int32{"member2": 4}},
				want{CannotPredict, ReasonReleaseDependent, map[string]int32{"member2": 4}},
				// Webster breaks the tie by the workload's UID.
				moves(map[string]int32{"member1": 1, "member2": 1, "member3": 2}),
				moves(map[string]int32{"member1": 1, "member2": 1, "member3": 2})),
		},
		{
			// Room 6 and 5 for 10 replicas: 5.45 and 4.55 make 6 and 4 before
			// v1.16 (the replica left goes to the larger), 5 and 5 by Webster.
			name:     "aggregated over two clusters",
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", 6), cluster("member2", 5), cluster("member3", 0)},
			binding:  binding("a", onlyM1M2(aggregated), 10, tc("member3", 10)),
			want: byRelease(
				moves(map[string]int32{"member1": 6, "member2": 4}),
				want{CannotPredict, ReasonReleaseDependent, map[string]int32{"member3": 10}},
				moves(map[string]int32{"member1": 5, "member2": 5}),
				moves(map[string]int32{"member1": 5, "member2": 5})),
		},
		{
			// Weights 1:1:2 for 3 replicas: before v1.16 member3 gets 2 and
			// the replica left goes to the weight-1 cluster that had one, as
			// now; Webster gives 1 each.
			name:     "static weights keep their inertia before v1.16",
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 100), cluster("member3", 100)},
			binding:  binding("a", static, 3, tc("member1", 1), tc("member3", 2)),
			want: byRelease(
				want{CannotChange, rebalance.ReasonStaticWeight, map[string]int32{"member1": 1, "member3": 2}},
				want{CannotPredict, ReasonReleaseDependent, map[string]int32{"member1": 1, "member3": 2}},
				want{WouldMove, rebalance.ReasonStaticWeight, map[string]int32{"member1": 1, "member2": 1, "member3": 1}},
				want{WouldMove, rebalance.ReasonStaticWeight, map[string]int32{"member1": 1, "member2": 1, "member3": 1}}),
		},
		{
			// 100m each on one modelled 32-CPU node: 320 replicas before v1.18,
			// 110 (the pods of one simulated node) from v1.18; member2 has no
			// models and room for 320 by its summary.
			name:     "resource models hold more replicas before v1.18",
			clusters: []*clusterv1alpha1.Cluster{modelled("member1", 1000), cluster("member2", 1000), cluster("member3", 1000)},
			binding:  small(binding("a", onlyM1M2(dynamic), 42, tc("member3", 42))),
			want: byRelease(
				moves(map[string]int32{"member1": 21, "member2": 21}),
				moves(map[string]int32{"member1": 21, "member2": 21}),
				moves(map[string]int32{"member1": 21, "member2": 21}),
				moves(map[string]int32{"member1": 11, "member2": 31})),
		},
	}
	for _, tt := range tests {
		for _, release := range []*karmadaversion.Info{v112, v11517, v116, v118} {
			t.Run(tt.name+" on "+release.Range(), func(t *testing.T) {
				w := tt.want[release]
				got := predictOn(t, release, tt.clusters, tt.binding)
				assert.Equal(t, w.verdict, got.Verdict, got.Message)
				assert.Equal(t, w.reason, got.Reason, got.Message)
				assert.Equal(t, w.predicted, placementMap(got.Predicted), got.Message)
			})
		}
	}
}

// Without a release, a prediction follows the pinned scheduler (v1.18).
func TestPredictWithoutRelease(t *testing.T) {
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 96), cluster("member3", 95)}
	got := predictOn(t, nil, clusters, binding("a", dynamic, 6, tc("member2", 3), tc("member3", 3)))
	assert.Equal(t, map[string]int32{"member1": 2, "member2": 2, "member3": 2}, placementMap(got.Predicted))
}

func TestPredictReleaseMessages(t *testing.T) {
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 96), cluster("member3", 95)}
	got := predictOn(t, v11517, clusters, binding("a", dynamic, 6, tc("member2", 3), tc("member3", 3)))
	assert.Equal(t, "Karmada v1.16 and newer divide the replicas as {member1:2, member2:2, member3:2} (Webster method), older releases as "+
		"{member1:3, member2:2, member3:1}, and this control plane runs Karmada v1.15 to v1.17", got.Message)

	tie := predictOn(t, v112, []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 96), cluster("member3", 100)},
		binding("a", dynamic, 4, tc("member2", 4)))
	assert.Equal(t, "Karmada before v1.16 gives the replicas left after the proportional shares to the clusters of largest weight, "+
		"and member1, member2, member3 weigh the same: it picks among them at random", tie.Message)
}

// A cluster of the placement that no longer serves the workload's API is
// dropped by v1.12 and kept by v1.16 and newer; the pinned scheduler keeps
// it, so v1.12 cannot be predicted.
func TestPredictAPIEnablementPerRelease(t *testing.T) {
	gone := cluster("member2", 100)
	gone.Status.APIEnablements = nil
	gone.Status.Conditions = append(gone.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionCompleteAPIEnablements, Status: metav1.ConditionTrue})
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 100), gone}
	b := binding("a", duplicated, 2, tc("member1", 2), tc("member2", 2))

	old := predictOn(t, v112, clusters, b)
	assert.Equal(t, CannotPredict, old.Verdict)
	assert.Equal(t, ReasonReleaseDependent, old.Reason)
	assert.Contains(t, old.Message, "cluster member2 no longer serves apps/v1 Deployment: Karmada v1.13 and older drop it from the placement")
	assert.Equal(t, CannotPredict, predictOn(t, v11517, clusters, b).Verdict, "v1.14 and v1.15 were not read")
	assert.Equal(t, CannotChange, predictOn(t, v116, clusters, b).Verdict)
	assert.Equal(t, CannotChange, predictOn(t, v118, clusters, b).Verdict)
}

// A zone selector with In matches a cluster of several zones when all of them
// are listed before v1.18, when any is from v1.18.
func TestPredictZonesPerRelease(t *testing.T) {
	multi := cluster("member2", 100)
	multi.Spec.Zones = []string{"a", "b"}
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 100), multi}
	p := dynamic
	p.ClusterAffinity = &policyv1alpha1.ClusterAffinity{FieldSelector: &policyv1alpha1.FieldSelector{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}
	b := binding("a", p, 2, tc("member2", 2))

	assert.Equal(t, ReasonReleaseDependent, predictOn(t, v116, clusters, b).Reason)
	assert.NotEqual(t, CannotPredict, predictOn(t, v118, clusters, b).Verdict)
}

func TestRemainderDivision(t *testing.T) {
	tests := []struct {
		name   string
		n      int32
		shares []share
		want   map[string]int32
		tied   []string
	}{
		{"exact", 9, []share{{"a", 1, 0}, {"b", 2, 0}}, map[string]int32{"a": 3, "b": 6}, nil},
		{"left to the largest weight", 9, []share{{"a", 1, 0}, {"b", 3, 0}}, map[string]int32{"a": 2, "b": 7}, nil},
		{"equal weights, more replicas before first", 3, []share{{"a", 1, 0}, {"b", 1, 1}}, map[string]int32{"a": 1, "b": 2}, nil},
		{"equal keys at the edge", 4, []share{{"a", 1, 0}, {"b", 1, 0}, {"c", 1, 0}}, map[string]int32{"a": 2, "b": 1, "c": 1}, []string{"a", "b", "c"}},
		{"equal keys away from the edge", 5, []share{{"a", 2, 0}, {"b", 1, 0}, {"c", 1, 0}}, map[string]int32{"a": 3, "b": 1, "c": 1}, nil},
		{"no weight", 3, []share{{"a", 0, 0}}, map[string]int32{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, tied := remainderDivision(tt.n, tt.shares)
			assert.Equal(t, tt.want, placementMap(got))
			assert.Equal(t, tt.tied, tied)
		})
	}
}

func TestModelEstimateBefore118(t *testing.T) {
	req := func(cpu string) *workv1alpha2.ReplicaRequirements {
		return &workv1alpha2.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
	c := modelled("member1", 1000)
	n, ok := modelEstimateBefore118(c, req("100m"))
	assert.True(t, ok)
	assert.Equal(t, int64(320), n, "one node of grade 1 holds 32 / 0.1")
	n, ok = modelEstimateBefore118(c, req("40"))
	assert.True(t, ok)
	assert.Equal(t, int64(0), n, "no grade's minimum covers 40 CPUs")
	_, ok = modelEstimateBefore118(cluster("member2", 10), req("1"))
	assert.False(t, ok, "no models: the summary decides")
	mem := &workv1alpha2.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	_, ok = modelEstimateBefore118(c, mem)
	assert.False(t, ok, "a resource the models do not grade: the summary decides")
}

func TestTiedOutcomes(t *testing.T) {
	tests := []struct {
		name   string
		n      int32
		shares []share
		want   []map[string]int32
	}{
		{"two equal, one left", 3, []share{{"a", 1, 0}, {"b", 1, 0}},
			[]map[string]int32{{"a": 2, "b": 1}, {"a": 1, "b": 2}}},
		{"three equal, one left", 4, []share{{"a", 1, 0}, {"b", 1, 0}, {"c", 1, 0}},
			[]map[string]int32{{"a": 2, "b": 1, "c": 1}, {"a": 1, "b": 2, "c": 1}, {"a": 1, "b": 1, "c": 2}}},
		{"the heavier share always gets its leftover", 7, []share{{"x", 2, 0}, {"a", 1, 0}, {"b", 1, 0}, {"c", 1, 0}},
			[]map[string]int32{{"x": 3, "a": 2, "b": 1, "c": 1}, {"x": 3, "a": 1, "b": 2, "c": 1}, {"x": 3, "a": 1, "b": 1, "c": 2}}},
		{"three equal, two left", 5, []share{{"a", 1, 0}, {"b", 1, 0}, {"c", 1, 0}},
			[]map[string]int32{{"a": 2, "b": 2, "c": 1}, {"a": 1, "b": 2, "c": 2}, {"a": 2, "b": 1, "c": 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []map[string]int32
			for _, p := range tiedOutcomes(tt.n, tt.shares) {
				got = append(got, placementMap(p))
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// A prediction that depends on which release of the detected range runs
// lists what each may write, the newest first, so that a make-before-break
// move can start them all before it stops anything.
func TestPredictReleaseDependentPossible(t *testing.T) {
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 96), cluster("member3", 95)}
	got := predictOn(t, v11517, clusters, binding("a", dynamic, 6, tc("member2", 3), tc("member3", 3)))
	require.Equal(t, ReasonReleaseDependent, got.Reason)
	require.Len(t, got.Possible, 2)
	assert.Equal(t, map[string]int32{"member1": 2, "member2": 2, "member3": 2}, placementMap(got.Possible[0]))
	assert.Equal(t, map[string]int32{"member1": 3, "member2": 2, "member3": 1}, placementMap(got.Possible[1]))

	tie := predictOn(t, v11517, []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 96), cluster("member3", 100)},
		binding("a", dynamic, 4, tc("member2", 4)))
	require.Equal(t, ReasonReleaseDependent, tie.Reason)
	require.Greater(t, len(tie.Possible), 2, "the newest release's division and each way the tie may fall")
	assert.Equal(t, map[string]int32{"member1": 1, "member2": 1, "member3": 2}, placementMap(tie.Possible[0]))
	for _, p := range tie.Possible {
		var sum int32
		for _, c := range p {
			sum += c.Replicas
		}
		assert.Equal(t, int32(4), sum, "%v", p)
	}
}
