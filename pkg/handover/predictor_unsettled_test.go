package handover

import (
	"context"
	"errors"
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

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/estimate"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// TestUnsettledWhilePodsTerminate: a one-replica workload settled on
// member1 just before its release. member2's estimator still counts pods
// that are being deleted (another move's stopped replicas); once they are
// gone member2 has more room than member1 and karmada-scheduler's fresh
// reschedule picks it, so the prediction from the read is not settled (the
// CI run of 2026-11-26 released such a move and the workload lost its only
// ready replica). With the same pods staying, or with the terminating pods
// too few to change the answer, it is settled.
func TestUnsettledWhilePodsTerminate(t *testing.T) {
	tests := []struct {
		name string
		// member2's other pods: running and being deleted (member1 runs
		// the workload's own pod and two others).
		running, leaving int
		want             string
	}{
		{name: "nothing terminates", running: 4},
		{name: "terminating pods that do not change the answer", running: 3, leaving: 1},
		{name: "terminating pods that change the answer", running: 1, leaving: 3,
			want: "the estimator of member2 still counts pods that are being deleted; the resource summary of member2 still counts replicas its estimator no longer sees (once they caught up the scheduler would choose {member2:1})"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := moveSource{reads: noServer{}}
			member1 := settleMember(t, 3, 0)
			member2 := settleMember(t, tt.running, tt.leaving)
			in := predict.Input{
				Clusters:  []*clusterv1alpha1.Cluster{settleCluster("member1", 3), settleCluster("member2", int64(tt.running+tt.leaving))},
				Estimated: []string{"member1", "member2"},
				Accurate:  map[string]predict.AccurateEstimator{"member1": member1, "member2": member2},
			}
			b := settleBinding()
			target := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "r"}}
			placements := [][]workv1alpha2.TargetCluster{{{Name: "member1", Replicas: 1}}}
			assert.Equal(t, tt.want, s.unsettled(context.Background(), in, target, b, placements))
		})
	}
}

// settleMember is the estimator of a member with room for 10 pods, running
// some and deleting others.
func settleMember(t *testing.T, running, leaving int) *estimate.Member {
	t.Helper()
	slots := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(10, resource.DecimalSI),
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("64Gi")}
	nodes := []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node"}, Status: corev1.NodeStatus{Allocatable: slots, Capacity: slots}}}
	var pods []*corev1.Pod
	for i := range running + leaving {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: string(rune('a' + i)), UID: types.UID(rune('a' + i))},
			Spec: corev1.PodSpec{NodeName: "node"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if i >= running {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		pods = append(pods, p)
	}
	m, err := estimate.NewMember(nodes, pods)
	require.NoError(t, err)
	return m
}

// settleCluster is a ready member whose resource summary counts pods
// allocated pods of 10.
func settleCluster(name string, pods int64) *clusterv1alpha1.Cluster {
	return &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: clusterv1alpha1.ClusterStatus{
			Conditions:     []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue}},
			APIEnablements: []clusterv1alpha1.APIEnablement{{GroupVersion: "apps/v1", Resources: []clusterv1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}}}},
			ResourceSummary: &clusterv1alpha1.ResourceSummary{
				Allocatable: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(10, resource.DecimalSI),
					corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("64Gi")},
				Allocated: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)},
			},
		},
	}
}

// settleBinding is deployment ns/r, one replica divided by the members'
// available replicas, settled on member1.
func settleBinding() *workv1alpha2.ResourceBinding {
	last := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r-deployment",
			Labels: map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: "id"}},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "r", UID: "r-uid"},
			Replicas: 1,
			Placement: &policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas},
				}},
			Clusters: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 1}},
		},
		Status: workv1alpha2.ResourceBindingStatus{LastScheduledTime: &last},
	}
}

// noServer is the Reads of a test without a server: no source, no release.
type noServer struct{}

func (noServer) Source() (Source, error) { return nil, errors.New("no server in this test") }

func (noServer) Release() (karmadaversion.Info, error) {
	return karmadaversion.Info{}, errors.New("no server in this test")
}
