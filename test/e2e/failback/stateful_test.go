package failback

import (
	"context"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// statefulSet is the tutorial's workload as a StatefulSet of 3 replicas
// whose pods get ready 5 s after they start, one after the other (the
// StatefulSet controller's default ordering).
func statefulSet(ns, name string) *appsv1.StatefulSet {
	d := fixtures.Deployment(ns, name, 3)
	tpl := d.Spec.Template
	tpl.Annotations = map[string]string{harness.ReadyAfterAnnotation: "5s"}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: d.Labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](3),
			ServiceName: name,
			Selector:    d.Spec.Selector,
			Template:    tpl,
		},
	}
}

// TestFailbackStatefulSet: member1 fails and Karmada evicts the StatefulSet
// "db" from it. Two daemons follow the same recovery: one with the default
// kinds, whose window ends first, leaves db where it is and says why
// (StatefulSets need --include-stateful); one with --include-stateful,
// whose window ends later, brings db back on member1, where its pods get
// ready again.
func TestFailbackStatefulSet(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name, binding = "failback-stateful", "db", "db-statefulset"
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	_, err := c.Kube.AppsV1().StatefulSets(ns).Create(ctx, statefulSet(ns, name), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, "policy-"+name, "apps/v1", "StatefulSet", []string{name}, []string{"member1", "member2"}), metav1.CreateOptions{})
	require.NoError(t, err)
	fixtures.WaitScheduled(ctx, t, c, ns, binding)
	_, err = c.WaitForPlacement(ctx, ns, binding, 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)

	// Each daemon holds a Lease of its own: both act on the recovery.
	deploymentsOnly := startDaemon(t, cp, "-n", ns, "--stabilization-window", window.String(),
		"--leader-elect-resource-name", "failback-stateful-default", "--leader-elect-identity", "stateful-default")
	const laterWindow = 3 * window
	stateful := startDaemon(t, cp, "-n", ns, "--include-stateful", "--stabilization-window", laterWindow.String(),
		"--leader-elect-resource-name", "failback-stateful-opt-in", "--leader-elect-identity", "stateful-opt-in")
	deploymentsOnly.waitLog(t, "acting on recoveries", time.Minute)
	stateful.waitLog(t, "acting on recoveries", time.Minute)
	fixtures.Failover(ctx, t, c, ns, binding)
	recovered := recoverMember1(ctx, t, c)

	// The default daemon's failback: db is displaced but not of its kinds.
	// Only member1's failure displaced anything.
	deploymentsOnly.waitLog(t, "displaced=1 stillEvicting=0", window+time.Minute)
	time.Sleep(5 * time.Second)
	assert.Empty(t, failbackRecords(ctx, t, c, "member1"), "without --include-stateful nothing is failed back")
	rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, rb.Spec.RescheduleTriggeredAt, "db not triggered without --include-stateful")
	assert.Equal(t, "{member2:3}", fixtures.Placement(rb.Spec.Clusters))
	assert.Contains(t, deploymentsOnly.text(), "statefulset "+ns+"/"+name+" was displaced by the failure of member1 and is not failed back: "+
		"StatefulSets are failed back only with --include-stateful")
	require.True(t, time.Now().Before(recovered.Add(laterWindow)), "the opt-in daemon's window is not over yet")

	// The opt-in daemon's failback brings db back.
	rec := waitRecord(ctx, t, c, "member1", 3*time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool { return rb.Status.FinishTime != nil })
	assert.False(t, rec.CreationTimestamp.Time.Before(recovered.Add(laterWindow-time.Second)), "the opt-in daemon's failback: created %s", rec.CreationTimestamp)
	assert.Equal(t, []appsv1alpha1.ObjectReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: ns, Name: name}}, rec.Spec.Workloads)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, rec.Status.ObservedWorkloads[0].Result)
	back, err := c.WaitForPlacement(ctx, ns, binding, 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err, "db is back on member1; logs:\n%s", stateful.text())
	var onMember1 int32
	for _, tc := range back.Spec.Clusters {
		if tc.Name == "member1" {
			onMember1 = tc.Replicas
		}
	}
	member1, err := kubernetes.NewForConfig(cp.Member("member1").Config)
	require.NoError(t, err)
	require.NoError(t, waitStatefulSetReady(ctx, member1, ns, name, onMember1), "db's pods on member1 get ready")
	assert.NotContains(t, stateful.text(), "StatefulSets are failed back only with --include-stateful")
}

// waitStatefulSetReady waits until a member's StatefulSet has want ready
// replicas out of want.
func waitStatefulSetReady(ctx context.Context, member kubernetes.Interface, ns, name string, want int32) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := member.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return s.Status.ReadyReplicas == want && ptr.Deref(s.Spec.Replicas, 0) == want, nil
	})
}
