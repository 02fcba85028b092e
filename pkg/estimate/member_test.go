package estimate

import (
	"context"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func node(name string, pods int64, cpu string) *corev1.Node {
	list := corev1.ResourceList{
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: list, Capacity: list}}
}

func pod(name, nodeName, cpu string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func oneCPU() *workv1alpha2.ReplicaRequirements {
	return &workv1alpha2.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
}

// The answers are those of karmada-scheduler-estimator: node by node, the
// replicas that fit in what the bound, unfinished pods leave; cordoned and
// tainted nodes take nothing.
func TestMemberMaxAvailableReplicas(t *testing.T) {
	cordoned := node("cordoned", 110, "8")
	cordoned.Spec.Unschedulable = true
	tainted := node("tainted", 110, "8")
	tainted.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	tolerated := oneCPU()
	tolerated.NodeClaim = &workv1alpha2.NodeClaim{Tolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}}

	tests := []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		req   *workv1alpha2.ReplicaRequirements
		want  int32
	}{
		{name: "whole cpus per node", nodes: []*corev1.Node{node("a", 110, "2500m"), node("b", 110, "4")}, req: oneCPU(), want: 6},
		{name: "bound pods take their requests", nodes: []*corev1.Node{node("a", 110, "4")},
			pods: []*corev1.Pod{pod("p", "a", "2", corev1.PodRunning), pod("pending", "", "2", corev1.PodPending), pod("done", "a", "2", corev1.PodSucceeded)},
			req:  oneCPU(), want: 2},
		{name: "pod slots bound a best-effort workload", nodes: []*corev1.Node{node("a", 3, "4")},
			pods: []*corev1.Pod{pod("p", "a", "0", corev1.PodRunning)}, want: 2},
		{name: "cordoned and tainted nodes take nothing", nodes: []*corev1.Node{cordoned, tainted, node("c", 110, "1")}, req: oneCPU(), want: 1},
		{name: "a toleration opens the tainted node", nodes: []*corev1.Node{cordoned, tainted, node("c", 110, "1")}, req: tolerated, want: 9},
		{name: "no node", req: oneCPU(), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMember(tt.nodes, tt.pods)
			require.NoError(t, err)
			got, err := m.MaxAvailableReplicas(context.Background(), tt.req)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := m.MaxAvailableReplicas(context.Background(), tt.req)
			require.NoError(t, err)
			assert.Equal(t, got, again, "a remembered answer")
		})
	}
}

// A terminating pod holds its node's room until it is gone: the view counts
// it, Departed is the view without it, and a view with none is its own.
func TestMemberDeparted(t *testing.T) {
	leaving := pod("leaving", "a", "1", corev1.PodRunning)
	leaving.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	m, err := NewMember([]*corev1.Node{node("a", 110, "4")}, []*corev1.Pod{pod("p", "a", "1", corev1.PodRunning), leaving})
	require.NoError(t, err)
	assert.Equal(t, 1, m.Terminating())
	now, err := m.MaxAvailableReplicas(context.Background(), oneCPU())
	require.NoError(t, err)
	assert.Equal(t, int32(2), now, "the terminating pod still counts")

	later, err := m.Departed()
	require.NoError(t, err)
	assert.Zero(t, later.Terminating())
	gone, err := later.MaxAvailableReplicas(context.Background(), oneCPU())
	require.NoError(t, err)
	assert.Equal(t, int32(3), gone, "once it is gone its cpu is free")
	again, err := m.Departed()
	require.NoError(t, err)
	assert.Same(t, later, again, "built once")
	same, err := later.Departed()
	require.NoError(t, err)
	assert.Same(t, later, same)
}
