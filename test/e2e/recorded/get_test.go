package recorded

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestGet lists WorkloadRebalancers with their summary in every output
// format, and shows the workloads of one, including one made by hand whose
// spec was never reconciled.
func TestGet(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "rec-get"
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, "web", "api")
	for _, name := range []string{"rec-get-a", "rec-get-b", "rec-get-hand"} {
		rt.DeleteRebalancerAfter(t, c, name)
	}

	require.Equal(t, cmd.ExitFailed, rt.Rebalance(t, cp, "deploy/web", "deploy/ghost", "-n", ns, "--name", "rec-get-a", "--wait=false").Code)
	require.Equal(t, cmd.ExitOK, rt.Rebalance(t, cp, "deploy/api", "-n", ns, "--name", "rec-get-b", "--ttl", "3600", "--wait-ttl=false", "--wait=false").Code)
	_, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Create(ctx, &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "rec-get-hand"},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{rt.Deploy(ns, "web"), rt.Deploy("other", "x")}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("list", func(t *testing.T) {
		res := rt.Rebalance(t, cp, "get")
		require.Equal(t, cmd.ExitOK, res.Code)
		assert.Equal(t, []string{"NAME", "WORKLOADS", "SUCCESSFUL", "FAILED", "PENDING", "FINISHED", "AGE", "TTL-LEFT"}, fixtures.SplitCells(strings.SplitN(res.Stdout, "\n", 2)[0]))
		a := fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "rec-get-a"))
		assert.Equal(t, []string{"rec-get-a", "2", "1", "1", "0"}, a[:5])
		assert.Regexp(t, `^\d+s$`, a[5], "finished seconds ago")
		assert.Equal(t, "<none>", a[7], "no ttl")
		b := fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "rec-get-b"))
		assert.Equal(t, []string{"rec-get-b", "1", "1", "0", "0"}, b[:5])
		assert.Regexp(t, `^(59m|60m)`, b[7], "about an hour left")
		hand := fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "rec-get-hand"))
		assert.Equal(t, []string{"rec-get-hand", "2", "0", "0", "2", "<none>"}, hand[:6], "not reconciled: both pending")
		assert.Equal(t, "<none>", hand[7])
	})

	t.Run("list wide", func(t *testing.T) {
		res := rt.Rebalance(t, cp, "get", "-o", "wide")
		require.Equal(t, cmd.ExitOK, res.Code)
		assert.Equal(t, []string{"NAME", "WORKLOADS", "SUCCESSFUL", "FAILED", "PENDING", "FINISHED", "AGE", "TTL-LEFT", "GENERATION", "TTL", "FINISH-TIME"},
			fixtures.SplitCells(strings.SplitN(res.Stdout, "\n", 2)[0]))
		b := fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "rec-get-b"))
		assert.Equal(t, []string{"1/1", "3600s"}, b[8:10])
		assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, b[10])
		assert.Equal(t, []string{"0/1", "<none>", "<none>"}, fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "rec-get-hand"))[8:])
	})

	t.Run("list as names, yaml and json", func(t *testing.T) {
		names := rt.Rebalance(t, cp, "get", "-o", "name")
		require.Equal(t, cmd.ExitOK, names.Code)
		assert.Contains(t, names.Stdout, "workloadrebalancer.apps.karmada.io/rec-get-a\nworkloadrebalancer.apps.karmada.io/rec-get-b\nworkloadrebalancer.apps.karmada.io/rec-get-hand\n")

		asYAML := rt.Rebalance(t, cp, "get", "-o", "yaml")
		require.Equal(t, cmd.ExitOK, asYAML.Code)
		var list appsv1alpha1.WorkloadRebalancerList
		require.NoError(t, yaml.UnmarshalStrict([]byte(asYAML.Stdout), &list))
		assert.Equal(t, "WorkloadRebalancerList", list.Kind)
		assert.NotContains(t, asYAML.Stdout, "managedFields")

		asJSON := rt.Rebalance(t, cp, "get", "rec-get-a", "-o", "json")
		require.Equal(t, cmd.ExitOK, asJSON.Code)
		var one appsv1alpha1.WorkloadRebalancer
		require.NoError(t, json.Unmarshal([]byte(asJSON.Stdout), &one))
		assert.Equal(t, "WorkloadRebalancer", one.Kind)
		assert.Len(t, one.Status.ObservedWorkloads, 2)
	})

	t.Run("one", func(t *testing.T) {
		res := rt.Rebalance(t, cp, "get", "rec-get-a")
		require.Equal(t, cmd.ExitOK, res.Code)
		assert.Equal(t, []string{"WORKLOAD", "RESULT", "REASON", "IN-SPEC"}, fixtures.SplitCells(strings.SplitN(res.Stdout, "\n", 2)[0]))
		assert.Equal(t, []string{"deployment.apps/ghost", "Failed", "ReferencedBindingNotFound", "yes"}, fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "deployment.apps/ghost")))
		assert.Equal(t, []string{"deployment.apps/web", "Successful", "<none>", "yes"}, fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "deployment.apps/web")))
		assert.Regexp(t, `^workloadrebalancer rec-get-a, generation 1: 2 workloads: 1 successful, 1 failed, 0 pending; finished at \S+Z\n$`, res.Stderr)

		wide := rt.Rebalance(t, cp, "get", "rec-get-hand", "-o", "wide")
		require.Equal(t, cmd.ExitOK, wide.Code)
		assert.Equal(t, []string{"NAMESPACE", "WORKLOAD", "RESULT", "REASON", "IN-SPEC", "BINDING", "API-VERSION"}, fixtures.SplitCells(strings.SplitN(wide.Stdout, "\n", 2)[0]))
		assert.Equal(t, []string{"other", "deployment.apps/x", "Pending", "<none>", "yes", "x-deployment", "apps/v1"}, fixtures.SplitCells(fixtures.TableLine(t, wide.Stdout, "deployment.apps/x")))
		assert.Contains(t, wide.Stderr, "(generation 1 not reconciled yet)")
	})

	t.Run("missing", func(t *testing.T) {
		res := rt.Rebalance(t, cp, "get", "rec-get-missing")
		assert.Equal(t, cmd.ExitError, res.Code)
		assert.Equal(t, "error: workloadrebalancer rec-get-missing not found; run `kubectl rebalance get` to list them\n", res.Stderr)
	})
}
