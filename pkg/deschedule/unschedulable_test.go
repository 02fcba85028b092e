package deschedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestCurrentReplicaSet(t *testing.T) {
	d := newDeployment("default", "web")
	old := newReplicaSet(d, "old", "nginx:1.26", testNow.Add(-time.Hour))
	current := newReplicaSet(d, "cur", "", testNow.Add(-time.Minute))
	twin := newReplicaSet(d, "twin", "", testNow)
	sameTimeTwin := newReplicaSet(d, "aaa", "", testNow.Add(-time.Minute))
	foreign := newReplicaSet(d, "foreign", "", testNow.Add(-2*time.Hour))
	foreign.OwnerReferences = controllerRef("Deployment", "other", "other-uid")
	notController := newReplicaSet(d, "adopted", "", testNow.Add(-2*time.Hour))
	notController.OwnerReferences[0].Controller = nil
	otherNamespace := newReplicaSet(d, "elsewhere", "", testNow.Add(-2*time.Hour))
	otherNamespace.Namespace = "other"
	unselected := newReplicaSet(d, "unselected", "", testNow.Add(-2*time.Hour))
	unselected.Labels = map[string]string{"app": "api"}

	tests := []struct {
		name        string
		replicaSets []appsv1.ReplicaSet
		want        string
	}{
		{name: "template equal apart from the hash", replicaSets: []appsv1.ReplicaSet{old, current}, want: current.Name},
		{name: "no replicaset with the current template", replicaSets: []appsv1.ReplicaSet{old}},
		{name: "oldest of two current replicasets", replicaSets: []appsv1.ReplicaSet{twin, current}, want: current.Name},
		{name: "name breaks creation time ties", replicaSets: []appsv1.ReplicaSet{current, sameTimeTwin}, want: sameTimeTwin.Name},
		{name: "replicaset controlled by another deployment", replicaSets: []appsv1.ReplicaSet{foreign}},
		{name: "owner that is not the controller", replicaSets: []appsv1.ReplicaSet{notController}},
		{name: "replicaset in another namespace", replicaSets: []appsv1.ReplicaSet{otherNamespace}},
		{name: "replicaset outside the deployment selector", replicaSets: []appsv1.ReplicaSet{unselected}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewClusterIndex("m1", &ClusterObjects{Deployments: []appsv1.Deployment{d}, ReplicaSets: tt.replicaSets})
			rs, err := ix.CurrentReplicaSet(&d)
			require.NoError(t, err)
			if tt.want == "" {
				assert.Nil(t, rs)
				return
			}
			require.NotNil(t, rs)
			assert.Equal(t, tt.want, rs.Name)
		})
	}
}

func TestCurrentReplicaSetInvalidSelector(t *testing.T) {
	d := newDeployment("default", "web")
	d.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
	ix := NewClusterIndex("m1", &ClusterObjects{Deployments: []appsv1.Deployment{d}})
	_, err := ix.CountUnschedulable(deploymentKind, "default", "web", 0, testNow)
	assert.ErrorContains(t, err, "invalid selector")
}

func TestCountUnschedulable(t *testing.T) {
	d := newDeployment("default", "web")
	old := newReplicaSet(d, "old", "nginx:1.26", testNow.Add(-time.Hour))
	current := newReplicaSet(d, "cur", "", testNow.Add(-time.Minute))
	other := newDeployment("default", "api")
	other.UID = "deploy-api"
	otherRS := newReplicaSet(other, "api1", "", testNow.Add(-time.Minute))

	strayPod := newPods(current, 1, pendingUnschedulable, time.Hour)[0]
	strayPod.Labels = map[string]string{"app": "api"}

	pods := func(groups ...[]corev1.Pod) []corev1.Pod {
		var all []corev1.Pod
		for _, g := range groups {
			all = append(all, g...)
		}
		return all
	}
	tests := []struct {
		name      string
		pods      []corev1.Pod
		threshold time.Duration
		want      int32
	}{
		{
			name:      "pods unschedulable past the threshold",
			pods:      pods(newPods(current, 2, pendingUnschedulable, 10*time.Minute), newPods(current, 3, running, 0)),
			threshold: 5 * time.Minute,
			want:      2,
		},
		{
			name:      "pods of the old replicaset never count",
			pods:      pods(newPods(old, 4, pendingUnschedulable, time.Hour), newPods(current, 1, pendingUnschedulable, time.Hour)),
			threshold: 5 * time.Minute,
			want:      1,
		},
		{
			name:      "pods of another deployment never count",
			pods:      newPods(otherRS, 2, pendingUnschedulable, time.Hour),
			threshold: 5 * time.Minute,
			want:      0,
		},
		{
			name:      "pods outside the deployment selector never count",
			pods:      []corev1.Pod{strayPod},
			threshold: 5 * time.Minute,
			want:      0,
		},
		{
			name:      "younger than the threshold",
			pods:      newPods(current, 2, pendingUnschedulable, 4*time.Minute),
			threshold: 5 * time.Minute,
			want:      0,
		},
		{
			name:      "exactly the threshold is not older than it",
			pods:      newPods(current, 2, pendingUnschedulable, 5*time.Minute),
			threshold: 5 * time.Minute,
			want:      0,
		},
		{
			// Karmada compares with a sub-second local clock, where a zero
			// threshold counts every such pod; the member's whole-second
			// time must not hold back the ones of its current second.
			name:      "negative threshold counts as zero, which counts every unschedulable pod",
			pods:      pods(newPods(current, 2, pendingUnschedulable, time.Second), newPods(current, 1, pendingUnschedulable, 0)),
			threshold: -time.Hour,
			want:      3,
		},
		{
			name:      "terminal pods never count",
			pods:      pods(newPods(current, 1, succeeded, time.Hour), newPods(current, 1, failed, time.Hour)),
			threshold: 0,
			want:      0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewClusterIndex("m1", &ClusterObjects{
				Deployments: []appsv1.Deployment{d, other},
				ReplicaSets: []appsv1.ReplicaSet{old, current, otherRS},
				Pods:        tt.pods,
			})
			got, err := ix.CountUnschedulable(deploymentKind, "default", "web", tt.threshold, testNow)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCountUnschedulableWithoutCurrentReplicaSet(t *testing.T) {
	d := newDeployment("default", "web")
	old := newReplicaSet(d, "old", "nginx:1.26", testNow.Add(-time.Hour))
	ix := NewClusterIndex("m1", &ClusterObjects{
		Deployments: []appsv1.Deployment{d},
		ReplicaSets: []appsv1.ReplicaSet{old},
		Pods:        newPods(old, 3, pendingUnschedulable, time.Hour),
	})
	got, err := ix.CountUnschedulable(deploymentKind, "default", "web", 0, testNow)
	require.NoError(t, err)
	assert.Zero(t, got)
}

func TestCountUnschedulableDeploymentNotFound(t *testing.T) {
	ix := NewClusterIndex("m1", &ClusterObjects{Deployments: []appsv1.Deployment{newDeployment("default", "web")}})
	_, err := ix.CountUnschedulable(deploymentKind, "other", "web", 0, testNow)
	assert.ErrorIs(t, err, ErrWorkloadNotFound)
	assert.ErrorContains(t, err, "Deployment.apps other/web in cluster m1")
}

func TestIsUnschedulable(t *testing.T) {
	cond := func(status corev1.ConditionStatus, reason string, age time.Duration) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodScheduled, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(testNow.Add(-age))}
	}
	tests := []struct {
		name       string
		phase      corev1.PodPhase
		conditions []corev1.PodCondition
		threshold  time.Duration
		want       bool
	}{
		{name: "unschedulable past threshold", phase: corev1.PodPending, conditions: []corev1.PodCondition{cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable, time.Hour)}, threshold: time.Minute, want: true},
		{name: "within threshold", phase: corev1.PodPending, conditions: []corev1.PodCondition{cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable, time.Second)}, threshold: time.Minute},
		{name: "scheduling gated is not unschedulable", phase: corev1.PodPending, conditions: []corev1.PodCondition{cond(corev1.ConditionFalse, corev1.PodReasonSchedulingGated, time.Hour)}},
		{name: "scheduled", phase: corev1.PodRunning, conditions: []corev1.PodCondition{cond(corev1.ConditionTrue, "", time.Hour)}},
		{name: "no scheduled condition yet", phase: corev1.PodPending},
		{
			name:  "only the first scheduled condition counts",
			phase: corev1.PodPending,
			conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionFalse},
				cond(corev1.ConditionTrue, "", time.Hour),
				cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable, time.Hour),
			},
		},
		{name: "failed pod", phase: corev1.PodFailed, conditions: []corev1.PodCondition{cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable, time.Hour)}},
		{name: "succeeded pod", phase: corev1.PodSucceeded, conditions: []corev1.PodCondition{cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable, time.Hour)}},
		{name: "negative threshold is zero", phase: corev1.PodPending, conditions: []corev1.PodCondition{cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable, time.Millisecond)}, threshold: -time.Hour, want: true},
		{name: "zero threshold counts a pod unschedulable within the member's current second", phase: corev1.PodPending, conditions: []corev1.PodCondition{cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable, 0)}, want: true},
		{name: "a second's threshold waits past the member's current second", phase: corev1.PodPending, conditions: []corev1.PodCondition{cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable, time.Second)}, threshold: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{Phase: tt.phase, Conditions: tt.conditions}}
			assert.Equal(t, tt.want, IsUnschedulable(pod, tt.threshold, testNow))
		})
	}
}

// BenchmarkCountUnschedulable measures counting every Deployment of a
// large member cluster from one index.
func BenchmarkCountUnschedulable(b *testing.B) {
	const deployments, podsEach = 2000, 10
	objs := &ClusterObjects{}
	for i := range deployments {
		d := newDeployment("ns", "web")
		d.Name = "web-" + string(rune('a'+i%26)) + "-" + time.Duration(i).String()
		d.UID = types.UID("uid-" + d.Name)
		rs := newReplicaSet(d, "cur", "", testNow)
		objs.Deployments = append(objs.Deployments, d)
		objs.ReplicaSets = append(objs.ReplicaSets, rs, newReplicaSet(d, "old", "nginx:1.26", testNow.Add(-time.Hour)))
		objs.Pods = append(objs.Pods, newPods(rs, podsEach/2, pendingUnschedulable, time.Hour)...)
		objs.Pods = append(objs.Pods, newPods(rs, podsEach/2, running, 0)...)
	}
	b.ResetTimer()
	for b.Loop() {
		ix := NewClusterIndex("m1", objs)
		for i := range objs.Deployments {
			if _, err := ix.CountUnschedulable(deploymentKind, "ns", objs.Deployments[i].Name, time.Minute, testNow); err != nil {
				b.Fatal(err)
			}
		}
	}
}
