package failback

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// dedicated is a permanent NoSchedule taint, as an operator puts on a
// cluster kept for some workloads.
var dedicated = corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}

// setDedicated adds (or removes) the dedicated taint on a Cluster.
func setDedicated(ctx context.Context, c *fixtures.Clients, cluster string, add bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cl, err := c.Karmada.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var taints []corev1.Taint
		for _, t := range cl.Spec.Taints {
			if t.Key != dedicated.Key {
				taints = append(taints, t)
			}
		}
		if add {
			taints = append(taints, dedicated)
		}
		cl.Spec.Taints = taints
		_, err = c.Karmada.ClusterV1alpha1().Clusters().Update(ctx, cl, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// TestFailbackToleratedTaint: member1 carries a permanent NoSchedule taint
// that "tolerant" tolerates. member1 fails (the tutorial's NoExecute taint)
// and recovers with the NoSchedule taint still on: for the workloads its
// failure displaced it is healthy, and the failback brings "tolerant" back.
func TestFailbackToleratedTaint(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "failback-tolerated"
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })

	d := fixtures.Deployment(ns, "tolerant", 3)
	d.Spec.Template.Annotations = map[string]string{harness.ReadyAfterAnnotation: "5s"}
	_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	policy := fixtures.DynamicWeightPolicy(ns, "policy-tolerant", "apps/v1", "Deployment", []string{"tolerant"}, []string{"member1", "member2"})
	policy.Spec.Placement.ClusterTolerations = append(policy.Spec.Placement.ClusterTolerations,
		corev1.Toleration{Key: dedicated.Key, Operator: corev1.TolerationOpEqual, Value: dedicated.Value, Effect: corev1.TaintEffectNoSchedule})
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	fixtures.WaitScheduled(ctx, t, c, ns, "tolerant-deployment")
	_, err = c.WaitForPlacement(ctx, ns, "tolerant-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)

	require.NoError(t, setDedicated(ctx, c, "member1", true))
	t.Cleanup(func() { _ = setDedicated(context.Background(), c, "member1", false) })
	daemon := startDaemon(t, cp, "-n", ns, "--stabilization-window", window.String(), "--leader-elect-identity", "tolerated")
	daemon.waitLog(t, "acting on recoveries", time.Minute)
	fixtures.Failover(ctx, t, c, ns, "tolerant-deployment")
	recovered := recoverMember1(ctx, t, c)

	rec := waitRecord(ctx, t, c, "member1", 3*time.Minute, func(*appsv1alpha1.WorkloadRebalancer) bool { return true })
	assert.Equal(t, []appsv1alpha1.ObjectReference{recordtest.Deploy(ns, "tolerant")}, rec.Spec.Workloads)
	_, err = c.WaitForPlacement(ctx, ns, "tolerant-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err, "tolerant is back on member1, whose NoSchedule taint it tolerates; logs:\n%s", daemon.text())
	// Back on member1, tolerant is no longer displaced, while its pods there
	// take 5 s to get ready and the failback waits for them. A change of
	// the Cluster now (its status is written every 10 s; a label here, so
	// as not to wait for one) must not read the taint as a new failure.
	_, err = c.Karmada.ClusterV1alpha1().Clusters().Patch(ctx, "member1", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"failback-tolerated-touch":"`+fmt.Sprint(time.Now().UnixNano())+`"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = c.Karmada.ClusterV1alpha1().Clusters().Patch(context.Background(), "member1", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"failback-tolerated-touch":null}}}`), metav1.PatchOptions{})
	})
	waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonFinished, recovered)
	assert.NotContains(t, daemon.text(), "cluster failed during its failback")
}
