package e2e

import (
	"fmt"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestRebalanceRequestCount counts, through a proxy, the API requests of a
// batch: one write per workload, and a fixed number of lists and watches
// however many workloads there are (a batch of more than 8 reads its bindings
// with a LIST per namespace).
func TestRebalanceRequestCount(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, size = "rb-requests", 12
	fixtures.TestNamespace(ctx, t, c, ns)
	names := make([]string, 0, size)
	for i := range size {
		name := fmt.Sprintf("app%02d", i)
		names = append(names, name)
		_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, fixtures.Deployment(ns, name, 1), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, "apps", "apps/v1", "Deployment", names, []string{"member1", "member2"}), metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range names {
		fixtures.WaitScheduled(ctx, t, c, ns, name+"-deployment")
	}

	proxy, err := cp.StartCountingProxy()
	require.NoError(t, err)
	t.Cleanup(proxy.Close)
	cache := t.TempDir()
	count := func(oneWrite bool, args ...string) map[string]int {
		t.Helper()
		before := proxy.Counter.Counts()
		flags := []string{"--kubeconfig", proxy.Kubeconfig, "--cache-dir", cache}
		if oneWrite {
			flags = append(flags, "--max-unavailable=100%")
		}
		res := rebalanceCmd(t, cp, append(flags, args...)...)
		after := proxy.Counter.Counts()
		spent := maps.Clone(after)
		for verb, n := range before {
			spent[verb] -= n
			if spent[verb] == 0 {
				delete(spent, verb)
			}
		}
		t.Logf("requests: %s", harness.FormatCounts(spent))
		require.Equal(t, cmd.ExitOK, res.code)
		return spent
	}
	// The one-write move (make-before-break reads the binding of each
	// workload and follows it: docs/make-before-break.md, measured below).
	run := func(args ...string) map[string]int { return count(true, args...) }

	// The first run fills the discovery cache, as any kubectl command does.
	run("deploy/app00", "-n", ns)

	// By name: no template is read; a batch this size reads its bindings
	// with one LIST for the namespace instead of a GET each.
	byName := run(append([]string{"deployments", "-n", ns}, names...)...)
	assert.Equal(t, map[string]int{"PATCH": size, "LIST": 2, "WATCH": 1}, byName)

	// By selection: one list of the templates on top.
	all := run("deployments", "--all", "-n", ns)
	assert.Equal(t, map[string]int{"PATCH": size, "LIST": 3, "WATCH": 1}, all)

	// Without waiting: reads and writes only.
	noWait := run("deployments", "--all", "-n", ns, "--wait=false")
	assert.Equal(t, map[string]int{"PATCH": size, "LIST": 2}, noWait)

	// A client dry run only reads.
	dry := run("deployments", "--all", "-n", ns, "--dry-run=client")
	assert.Equal(t, map[string]int{"LIST": 2}, dry)

	// The default, make-before-break: the clusters, estimators and members
	// its predictions need are read once for the run (not once per
	// workload), so the lists do not grow with the batch; a workload that
	// stages reads and follows its own binding, one left to one write shares
	// the batch's list and watch (docs/make-before-break.md).
	single := count(false, "deploy/app01", "-n", ns)
	t.Logf("FIGURES make-before-break, 1 workload: %s", harness.FormatCounts(single))
	mbb := count(false, append([]string{"deployments", "-n", ns}, names...)...)
	t.Logf("FIGURES make-before-break, %d workloads by name: %s", size, harness.FormatCounts(mbb))
	// Each further workload adds at most the LIST of its own binding's
	// follow: the clusters, estimators and members are listed once per run
	// (before they were read per workload: LIST=48 for these 12).
	assert.LessOrEqual(t, mbb["LIST"], single["LIST"]+size-1+1, "the members and clusters are listed once per run, not once per workload")
}
