package predict

import (
	"context"
	"errors"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/estimate"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// fixedRoom is a member's estimator that answers the same for every workload.
type fixedRoom int32

func (f fixedRoom) MaxAvailableReplicas(context.Context, *workv1alpha2.ReplicaRequirements) (int32, error) {
	return int32(f), nil
}

// With estimators on, karmada-scheduler takes per cluster the lower of the
// general estimate and the member's estimator: a member whose nodes are
// cordoned reports room in its summary but gets nothing.
func TestPredictWithMemberEstimators(t *testing.T) {
	three := []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 100), cluster("member3", 100)}
	all := []string{"member1", "member2", "member3"}
	tests := []struct {
		name       string
		accurate   map[string]AccurateEstimator
		unreadable map[string]error
		verdict    Verdict
		predicted  map[string]int32
		message    string
	}{
		{name: "the estimators agree with the summaries",
			accurate: map[string]AccurateEstimator{"member1": fixedRoom(100), "member2": fixedRoom(100), "member3": fixedRoom(100)},
			verdict:  WouldMove, predicted: map[string]int32{"member1": 2, "member2": 2, "member3": 2}},
		{name: "member1's nodes are cordoned",
			accurate: map[string]AccurateEstimator{"member1": fixedRoom(0), "member2": fixedRoom(100), "member3": fixedRoom(100)},
			verdict:  Unchanged, predicted: map[string]int32{"member2": 3, "member3": 3}},
		{name: "the lower of the two counts",
			accurate: map[string]AccurateEstimator{"member1": fixedRoom(1000), "member2": fixedRoom(50), "member3": fixedRoom(25)},
			verdict:  WouldMove, predicted: map[string]int32{"member1": 3, "member2": 2, "member3": 1}},
		{name: "a member that cannot be read",
			accurate:   map[string]AccurateEstimator{"member1": fixedRoom(100), "member2": fixedRoom(100)},
			unreadable: map[string]error{"member3": errors.New("member3 is a Pull cluster: give --member-kubeconfig")},
			verdict:    CannotPredict, predicted: map[string]int32{"member2": 3, "member3": 3},
			message: "karmada-scheduler asks the karmada-scheduler-estimator of member3 for free capacity, which cannot be computed: member3 is a Pull cluster: give --member-kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(three, binding("a", dynamic, 6, tc("member2", 3), tc("member3", 3)))
			in.Estimated, in.Accurate, in.Unreadable = all, tt.accurate, tt.unreadable
			got, err := Predict(context.Background(), in, []rebalance.Target{deploy("a")}, Options{})
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, tt.verdict, got[0].Verdict, got[0].Message)
			assert.Equal(t, tt.predicted, placementMap(got[0].Predicted))
			if tt.message != "" {
				assert.Equal(t, tt.message, got[0].Message)
			}
		})
	}
}

// A prediction without estimators is not answered by the estimators of
// another one made at the same time: each reads its own members.
func TestPredictEstimatorsArePerPrediction(t *testing.T) {
	three := []*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 100), cluster("member3", 100)}
	with := input(three, binding("a", dynamic, 6, tc("member2", 3), tc("member3", 3)))
	with.Estimated = []string{"member1", "member2", "member3"}
	with.Accurate = map[string]AccurateEstimator{"member1": fixedRoom(0), "member2": fixedRoom(100), "member3": fixedRoom(100)}
	marked, forget := withAccurate(with.Clusters, with.Accurate)
	defer forget()
	require.NotEmpty(t, marked[0].Annotations[viewAnnotation])
	assert.Empty(t, three[0].Annotations, "the clusters read are left as they are")

	without := input(three, binding("a", dynamic, 6, tc("member2", 3), tc("member3", 3)))
	got, err := Predict(context.Background(), without, []rebalance.Target{deploy("a")}, Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int32{"member1": 2, "member2": 2, "member3": 2}, placementMap(got[0].Predicted))
}

// The shift of a member's estimator answer is the general estimator's
// change between the cluster as read and the scheduler's copy that a batch
// check changed, for each set of requirements its own: the answer on the
// cluster as read is remembered, never taken for another request.
func TestShiftRemembersTheClustersAsReadByRequest(t *testing.T) {
	read := cluster("member1", 100)
	read.Status.ResourceSummary.Allocatable[corev1.ResourceCPU] = resource.MustParse("10")
	view := &accurateView{clusters: map[string]*clusterv1alpha1.Cluster{"member1": read}}
	changed := read.DeepCopy()
	changed.Status.ResourceSummary.Allocating = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("20"), corev1.ResourceCPU: resource.MustParse("4")}
	requests := func(cpu string) *workv1alpha2.ReplicaRequirements {
		return &workv1alpha2.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
	ctx := context.Background()
	// 1 CPU each: 10 fit as read, 6 once 4 CPUs are allocating.
	assert.Equal(t, int32(-4), view.shift(ctx, changed, requests("1")))
	// 50m each: the pods bound it, 100 as read and 80 with 20 allocating.
	assert.Equal(t, int32(-20), view.shift(ctx, changed, requests("50m")))
	// Asked again, from what was remembered.
	assert.Equal(t, int32(-4), view.shift(ctx, changed, requests("1")))
	assert.Equal(t, int32(0), view.shift(ctx, read, requests("1")), "the cluster as read has not moved")
}

// A member whose resource summary still counts pods its estimator no longer
// sees (replicas that stopped since the last status update) is stale; one
// whose summary counts as many, or fewer (cordoned nodes, pods started
// since), is not; clusters outside names are not looked at.
func TestStaleSummaries(t *testing.T) {
	stale := cluster("member1", 110)
	stale.Status.ResourceSummary.Allocated = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	current := cluster("member2", 110)
	current.Status.ResourceSummary.Allocated = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(3, resource.DecimalSI)}
	behind := cluster("member3", 110)
	in := Input{
		Clusters: []*clusterv1alpha1.Cluster{stale, current, behind},
		Accurate: map[string]AccurateEstimator{"member1": fixedRoom(110), "member2": fixedRoom(107), "member3": fixedRoom(105)},
	}
	all := map[string]bool{"member1": true, "member2": true, "member3": true}
	assert.Equal(t, []string{"member1"}, StaleSummaries(context.Background(), in, nil, all))
	assert.Empty(t, StaleSummaries(context.Background(), in, nil, map[string]bool{"member2": true, "member3": true}))
}

// CaughtUp clears the lag of the named clusters' summaries only, on copies.
func TestCaughtUp(t *testing.T) {
	stale := cluster("member1", 110)
	stale.Status.ResourceSummary.Allocated = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	other := cluster("member2", 110)
	other.Status.ResourceSummary.Allocated = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	in := Input{
		Clusters: []*clusterv1alpha1.Cluster{stale, other},
		Accurate: map[string]AccurateEstimator{"member1": fixedRoom(110), "member2": fixedRoom(110)},
	}
	all := map[string]bool{"member1": true, "member2": true}
	later := CaughtUp(in, []string{"member1"})
	assert.Equal(t, []string{"member2"}, StaleSummaries(context.Background(), later, nil, all))
	assert.Equal(t, []string{"member1", "member2"}, StaleSummaries(context.Background(), in, nil, all), "the input is left as read")
}

// Departing names the clusters whose estimator counts pods that are being
// deleted; Departed answers for them as once those are gone, on a copy.
func TestDepartingAndDeparted(t *testing.T) {
	podsOnly := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(10, resource.DecimalSI)}
	nodes := []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: podsOnly, Capacity: podsOnly}}}
	running := func(name string, leaving bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
			Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if leaving {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return p
	}
	member1, err := estimate.NewMember(nodes, []*corev1.Pod{running("a", false), running("b", true)})
	require.NoError(t, err)
	member2, err := estimate.NewMember(nodes, []*corev1.Pod{running("c", false)})
	require.NoError(t, err)
	in := Input{Accurate: map[string]AccurateEstimator{"member1": member1, "member2": member2, "member3": fixedRoom(7)}}
	all := map[string]bool{"member1": true, "member2": true, "member3": true}

	assert.Equal(t, []string{"member1"}, Departing(in, all))
	assert.Empty(t, Departing(in, map[string]bool{"member2": true, "member3": true}))

	later, err := Departed(in, []string{"member1"})
	require.NoError(t, err)
	ctx := context.Background()
	for name, want := range map[string]int32{"member1": 9, "member2": 9, "member3": 7} {
		got, err := later.Accurate[name].MaxAvailableReplicas(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
	}
	now, err := in.Accurate["member1"].MaxAvailableReplicas(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, int32(8), now, "the input is left as read")
	assert.Empty(t, Departing(later, all))
}
