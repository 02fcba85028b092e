package failback

import (
	"testing"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func binding(name string, clusters map[string]int32, evictedFrom ...string) *workv1alpha2.ResourceBinding {
	rb := &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + "-deployment"}}
	rb.Spec.Resource = workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: name}
	for c, n := range clusters {
		rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: c, Replicas: n})
	}
	for _, c := range evictedFrom {
		rb.Spec.GracefulEvictionTasks = append(rb.Spec.GracefulEvictionTasks, workv1alpha2.GracefulEvictionTask{
			FromCluster: c, Reason: workv1alpha2.EvictionReasonTaintUntolerated, Producer: workv1alpha2.EvictionProducerTaintManager})
	}
	return rb
}

func names(ds []Displaced) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Workload.Name)
	}
	return out
}

func TestDisplacements(t *testing.T) {
	downNone := func(string, []corev1.Toleration) bool { return false }
	down1 := func(c string, _ []corev1.Toleration) bool { return c == "member1" }
	d := NewDisplacements()

	// app: the seed's failover, with graceful eviction.
	before := binding("app", map[string]int32{"member1": 2, "member2": 1})
	d.Observe(nil, before, downNone)
	evicting := binding("app", map[string]int32{"member2": 3}, "member1")
	assert.Empty(t, d.Observe(before, evicting, down1))
	ready, n := d.Of("member1")
	assert.Empty(t, ready)
	assert.Equal(t, 1, n, "still evicting")
	evicted := binding("app", map[string]int32{"member2": 3})
	assert.Equal(t, []string{"member1"}, d.Observe(evicting, evicted, down1), "the eviction ended")
	ready, n = d.Of("member1")
	assert.Equal(t, []string{"app"}, names(ready))
	assert.Equal(t, 0, n)

	// moved: lost member1 while it was down, with no eviction task.
	m0 := binding("moved", map[string]int32{"member1": 1, "member2": 2})
	d.Observe(nil, m0, down1)
	d.Observe(m0, binding("moved", map[string]int32{"member2": 3}), down1)
	// rescaled: lost member1 replicas while member1 was healthy: not displaced.
	r0 := binding("rescaled", map[string]int32{"member1": 1, "member2": 2})
	d.Observe(r0, binding("rescaled", map[string]int32{"member2": 3}), downNone)
	// newcomer: never on member1.
	d.Observe(nil, binding("newcomer", map[string]int32{"member2": 3}), down1)
	// failed app: an application failover is not the cluster's doing.
	af := binding("appfail", map[string]int32{"member2": 3})
	af.Spec.GracefulEvictionTasks = []workv1alpha2.GracefulEvictionTask{{FromCluster: "member1", Reason: workv1alpha2.EvictionReasonApplicationFailure}}
	d.Observe(nil, af, down1)

	ready, _ = d.Of("member1")
	assert.Equal(t, []string{"app", "moved"}, names(ready))

	// Back on member1: no longer displaced.
	d.Observe(evicted, binding("app", map[string]int32{"member1": 1, "member2": 2}), downNone)
	d.Forget("ns", "moved-deployment")
	ready, n = d.Of("member1")
	assert.Empty(t, ready)
	assert.Equal(t, 0, n)
}

func TestDisplacementsTolerates(t *testing.T) {
	d := NewDisplacements()
	rb := binding("app", map[string]int32{"member2": 3}, "member1")
	rb.Spec.Placement = &policyv1alpha1.Placement{ClusterTolerations: []corev1.Toleration{
		{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
		{Key: "fail", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](0)},
	}}
	d.Observe(nil, rb, func(string, []corev1.Toleration) bool { return true })
	assert.True(t, d.Tolerates("member1", corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}))
	assert.False(t, d.Tolerates("member1", corev1.Taint{Key: "dedicated", Value: "cpu", Effect: corev1.TaintEffectNoSchedule}))
	assert.False(t, d.Tolerates("member1", corev1.Taint{Key: "fail", Effect: corev1.TaintEffectNoExecute}), "tolerated for a while only")
	assert.False(t, d.Tolerates("member2", corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}), "nothing displaced from member2")

	cluster := &clusterv1alpha1.Cluster{Spec: clusterv1alpha1.ClusterSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}},
		Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue}}}}
	assert.False(t, ClusterDown(cluster, rb.Spec.Placement.ClusterTolerations))
	assert.True(t, ClusterDown(cluster, nil))
}
