package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// batchFixture puts a Deployment, a ConfigMap and a ClusterRole whose name
// holds a colon under policies, and waits for their bindings.
func batchFixture(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, clusterRole string) {
	t.Helper()
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "web", nil, []string{"member1", "member2"}, "web")
	_, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"mode": "fast"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, duplicatedPolicy(ns, "settings", []string{"member1", "member2"},
		policyv1alpha1.ResourceSelector{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"}), metav1.CreateOptions{})
	require.NoError(t, err)
	fixtures.WaitScheduled(ctx, t, c, ns, "settings-configmap")
	clusterRoleWithPolicy(ctx, t, c, clusterRole, rebalance.BindingName(clusterRole, "ClusterRole"), []string{"member1", "member3"})
}

// TestRebalanceBatch rebalances workloads of three kinds, one of them
// cluster-scoped, and one that does not exist, in one command.
func TestRebalanceBatch(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, role = "rb-batch", "rb-batch:reader"
	batchFixture(ctx, t, c, ns, role)

	res := rebalanceCmd(t, cp, "deploy/web", "configmap/settings", "clusterrole/"+role, "deploy/ghost", "-n", ns, "-o", "wide")
	require.Equal(t, cmd.ExitFailed, res.code, "the missing workload fails the run")
	summary, warning, _ := strings.Cut(res.stderr, "\n")
	assert.Equal(t, "4 workloads: 3 successful, 1 failed, 0 pending; 3 rescheduled, 0 ignored", summary)
	// A ClusterRole and a ConfigMap are placed whole, whatever the free capacity.
	assert.Equal(t, "Warning: a fresh reschedule cannot change the placement of clusterrole.rbac.authorization.k8s.io/"+role+" (NonWorkload), configmap/settings (NonWorkload): "+
		"it does not follow free capacity, so the trigger only repeats an ordinary scheduling pass; 'kubectl rebalance plan' shows which workloads would move\n", warning)

	// Controller order: apiVersion, kind, namespace, name, byte-wise.
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n")[1:] {
		for _, cell := range fixtures.SplitCells(line) {
			if strings.Contains(cell, "/") {
				order = append(order, cell)
				break
			}
		}
	}
	assert.Equal(t, []string{"deployment.apps/ghost", "deployment.apps/web", "clusterrole.rbac.authorization.k8s.io/" + role, "configmap/settings"}, order)
	assert.True(t, strings.HasPrefix(res.stdout, "NAMESPACE"), "rows span namespaces")

	ghost := tableRow(t, res.stdout, "deployment.apps/ghost")
	assert.Equal(t, []string{"deployment.apps/ghost", "Failed", "<none>", "<none>", "<none>", "ghost-deployment", "<none>", "ReferencedBindingNotFound",
		"resourcebinding rb-batch/ghost-deployment not found: deployment.apps/ghost does not exist in namespace rb-batch"}, ghost)
	for _, name := range []string{"deployment.apps/web", "configmap/settings", "clusterrole.rbac.authorization.k8s.io/" + role} {
		row := tableRow(t, res.stdout, name)
		assert.Equal(t, []string{"Successful", "Scheduled"}, row[1:3], name)
	}
	roleRow := tableRow(t, res.stdout, "clusterrole.rbac.authorization.k8s.io/"+role)
	assert.Equal(t, "rb-batch.reader-clusterrole", roleRow[5])

	crb, err := c.Karmada.WorkV1alpha2().ClusterResourceBindings().Get(ctx, "rb-batch.reader-clusterrole", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, crb.Spec.RescheduleTriggeredAt)
	assert.Equal(t, roleRow[6], crb.Spec.RescheduleTriggeredAt.UTC().Format(time.RFC3339))
}

// TestRebalanceOutputIsAnApplicableRebalancer prints the run as a
// WorkloadRebalancer, creates that object as printed, and checks that
// Karmada's own controller comes to the same status.
func TestRebalanceOutputIsAnApplicableRebalancer(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, role = "rb-yaml", "rb-yaml:reader"
	batchFixture(ctx, t, c, ns, role)

	res := rebalanceCmd(t, cp, "deploy/web", "configmap/settings", "clusterrole/"+role, "deploy/ghost", "-n", ns, "-o", "yaml")
	require.Equal(t, cmd.ExitFailed, res.code)
	var printed appsv1alpha1.WorkloadRebalancer
	require.NoError(t, yaml.UnmarshalStrict([]byte(res.stdout), &printed))
	require.NotNil(t, printed.Status.FinishTime)
	require.Len(t, printed.Status.ObservedWorkloads, 4)

	rebalancers := c.Karmada.AppsV1alpha1().WorkloadRebalancers()
	_, err := rebalancers.Create(ctx, &printed, metav1.CreateOptions{})
	require.NoError(t, err, "the printed object is accepted as is")
	t.Cleanup(func() { _ = rebalancers.Delete(context.Background(), printed.Name, metav1.DeleteOptions{}) })

	var got *appsv1alpha1.WorkloadRebalancer
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err = rebalancers.Get(ctx, printed.Name, metav1.GetOptions{})
		return err == nil && got.Status.FinishTime != nil, err
	}))
	assert.Equal(t, printed.Spec, got.Spec)
	assert.Equal(t, printed.Status.ObservedWorkloads, got.Status.ObservedWorkloads, "the controller records what the command printed")
	assert.Equal(t, printed.Status.ObservedGeneration, got.Status.ObservedGeneration)

	// The same object read back from the API server, as `kubectl get -o
	// yaml` shows it, names the same workloads again (a client dry run
	// only reads, whatever else the command does with such a manifest).
	got.APIVersion, got.Kind = appsv1alpha1.SchemeGroupVersion.String(), appsv1alpha1.ResourceKindWorkloadRebalancer
	manifest, err := yaml.Marshal(got)
	require.NoError(t, err)
	path := t.TempDir() + "/rebalancer.yaml"
	require.NoError(t, writeFile(path, manifest))
	again := rebalanceCmd(t, cp, "-f", path, "-o", "yaml", "--dry-run=client")
	require.Equal(t, cmd.ExitFailed, again.code, "the missing workload fails a dry run too")
	var reprinted appsv1alpha1.WorkloadRebalancer
	require.NoError(t, yaml.UnmarshalStrict([]byte(again.stdout), &reprinted))
	assert.Equal(t, printed.Name, reprinted.Name)
	assert.Equal(t, printed.Spec, reprinted.Spec)
	assert.Equal(t, printed.Status.ObservedWorkloads[0], reprinted.Status.ObservedWorkloads[0], "ghost is Failed in a dry run as well")
}
