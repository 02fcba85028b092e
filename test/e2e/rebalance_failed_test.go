package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestRebalanceSchedulingFailed rebalances a workload whose clusters no
// longer match its policy: the scheduler fails the fresh schedule with
// NoClusterFit, and the command reports that failure, with the scheduler's
// reason and message, instead of waiting for a success that cannot come.
func TestRebalanceSchedulingFailed(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, label = "rb-failed", "rebalance.test/rb-failed"
	fixtures.TestNamespace(ctx, t, c, ns)

	for _, cluster := range []string{"member1", "member2"} {
		setClusterLabel(ctx, t, c, cluster, label, "yes")
		t.Cleanup(func() { setClusterLabel(context.Background(), t, c, cluster, label, "") })
	}
	policy := fixtures.DynamicWeightPolicy(ns, "misfit", "apps/v1", "Deployment", []string{"misfit"}, nil)
	policy.Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}}}
	createWithPolicy(ctx, t, c, ns, "misfit", policy)
	fixtures.WaitScheduled(ctx, t, c, ns, "misfit-deployment")

	// Take the label away: no cluster fits the policy any more. The
	// scheduler requeues the binding but keeps its placement; only a fresh
	// schedule applies the affinity again.
	for _, cluster := range []string{"member1", "member2"} {
		setClusterLabel(ctx, t, c, cluster, label, "")
	}
	time.Sleep(2 * time.Second)
	before, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, "misfit-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, meta.IsStatusConditionTrue(before.Status.Conditions, workv1alpha2.Scheduled), "still scheduled before the trigger")
	require.Len(t, before.Spec.Clusters, 2)

	res := rebalanceCmd(t, cp, "deploy/misfit", "-n", ns, "-o", "wide")
	require.Equal(t, cmd.ExitFailed, res.code)
	row := tableRow(t, res.stdout, "deployment.apps/misfit")
	assert.Equal(t, []string{"Successful", "SchedulingFailed"}, row[1:3])
	assert.Equal(t, "NoClusterFit", row[7])
	assert.Contains(t, res.stdout, "did not match the placement cluster affinity constraint")
	assert.Equal(t, "1 workload: 1 successful, 0 failed, 0 pending; 0 rescheduled, 0 ignored, 1 scheduling failed\n", res.stderr)

	after, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, "misfit-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, meta.IsStatusConditionFalse(after.Status.Conditions, workv1alpha2.Scheduled))

	// Again, on a binding that is failing already: the scheduler's new
	// attempt fails the same way and leaves the binding's status as it was.
	time.Sleep(1100 * time.Millisecond)
	again := rebalanceCmd(t, cp, "deploy/misfit", "-n", ns, "-o", "wide", "--timeout", "20s")
	require.Equal(t, cmd.ExitFailed, again.code)
	row = tableRow(t, again.stdout, "deployment.apps/misfit")
	assert.Equal(t, []string{"Successful", "SchedulingFailed", "<none>", "<none>"}, row[1:5])
	assert.Equal(t, "NoClusterFit", row[7])
}

// setClusterLabel sets (or with an empty value removes) a label on a Cluster.
func setClusterLabel(ctx context.Context, t *testing.T, c *fixtures.Clients, cluster, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, key)
	}
	_, err := c.Karmada.ClusterV1alpha1().Clusters().Patch(ctx, cluster, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err, "label cluster %s", cluster)
}
