package deschedule

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestDeschedulePullMember is the descheduler guide's example with the stuck
// replica on member3, the Pull member of local-up-karmada, which the Karmada
// control plane cannot reach through the cluster proxy. With a kubeconfig
// that has no context for member3 the pass says it cannot read member3, with
// the way out, and changes nothing; with one (the harness's kubeconfig has a
// context per member, as local-up-karmada's members.config), the default
// pass reads member3 through it and moves the replica.
func TestDeschedulePullMember(t *testing.T) {
	// Not parallel: cordoning member3 must not disturb the other tests.
	cp := harness.Require(t)
	require.True(t, cp.Member("member3").Pull, "member3 is the Pull member of the default environment")
	e := &env{deschedtest.New(t, cp, "pull-member")}
	fixtures.TestNamespace(e.Ctx, t, e.C, e.NS)
	e.createSeedExampleReadyAfter("5s")

	before, want := e.strandIn("member3", "nginx-deployment", "nginx", e.WaitPods)

	// Member contexts without member3: the proxy cannot read it.
	raw, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	require.NoError(t, err)
	delete(raw.Contexts, "member3")
	noMember3 := filepath.Join(t.TempDir(), "members.config")
	require.NoError(t, clientcmd.WriteToFile(*raw, noMember3))
	code, stdout, stderr := e.Run("-n", e.NS, "--unschedulable-threshold", "1s", "--member-kubeconfig", noMember3)
	assert.NotEqual(t, cmd.ExitOK, code, "a pass that could not read a candidate cluster does not report success")
	assert.Contains(t, stdout+stderr, "of member cluster member3 (")
	assert.Contains(t, stdout+stderr, "a Pull-mode cluster is usually not reachable through the proxy")
	assert.Contains(t, stdout+stderr, "if member3 is one, give a kubeconfig with a context named member3, through which it is read (--member-kubeconfig FILE")
	assert.Equal(t, before, e.settledPlacement("nginx"), "nothing is evicted for a binding whose candidate cluster could not be read")

	// The default: member3 through its context, the other members through
	// the proxy; the replica moves.
	code, stdout, stderr = e.Run("-n", e.NS, "--unschedulable-threshold", "1s")
	require.Equal(t, cmd.ExitOK, code, stderr)
	assert.Regexp(t, fmt.Sprintf(`nginx-deployment\s+member3\s+%d\s+<unknown>\s+%d\s+0\s+evict`, want, want), stdout)
	after := e.settledPlacement("nginx")
	t.Logf("nginx placed %v after the pass", after)
	assert.NotContains(t, after, "member3")
	e.WaitPods("member3", "nginx", podCounts{})
}
