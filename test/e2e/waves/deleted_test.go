package waves

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestWavesRecordDeletedMidRun deletes the WorkloadRebalancer of a recorded
// waved run (one at a time, a pause between) while it runs, on the default
// environment: the run stops starting workloads (stop reason LedgerGone),
// says so and what a second run would do, marks the rest not started
// (pending), and exits 3, as after Ctrl-C (docs/exit-codes.md). No trigger is written after the run ends.
func TestWavesRecordDeletedMidRun(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "waves-deleted"
	apps := names("app", 6)
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, apps...)
	rt.DeleteRebalancerAfter(t, c, ns)

	p := rt.StartBinary(t, cp, append([]string{"-n", ns, "--name", ns, "--max-in-flight", "1", "--pause", "3s", "-o", "wide"}, deployArgs(apps)...)...)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return len(triggered(ctx, t, c, ns, apps)) >= 2, nil
	}), "no second workload started; stderr so far:\n%s", p.Stderr())
	require.NoError(t, c.Karmada.AppsV1alpha1().WorkloadRebalancers().Delete(ctx, ns, metav1.DeleteOptions{}))
	atDelete := len(triggered(ctx, t, c, ns, apps))

	res := p.Wait(t, 2*time.Minute)
	require.Equal(t, cmd.ExitPending, res.Code, "a run whose record is deleted leaves workloads pending: exit 3")
	assert.Contains(t, res.Stderr, "stopped: the workloadrebalancer of the run was deleted, so no further workload was started")
	assert.Contains(t, res.Stderr, "the run's record is gone, so running the same command again starts every workload again under a new one")
	after := triggered(ctx, t, c, ns, apps)
	// The run notices the deletion at its next record write (at most a
	// second later): one more workload may have started meanwhile.
	assert.LessOrEqual(t, len(after), atDelete+1, "workloads started after the record was deleted")
	require.Less(t, len(after), len(apps), "the run stopped before the last workload")
	notStarted := 0
	for _, app := range apps {
		if after[app] {
			continue
		}
		notStarted++
		assert.Contains(t, fixtures.TableLine(t, res.Stdout, "deployment.apps/"+app), "not started: the run's workloadrebalancer was deleted", app)
	}
	assert.Positive(t, notStarted)
	assert.Contains(t, res.Stderr, "workloadrebalancer "+ns+" was deleted by someone else while it was reconciled; the triggers already written stay")
	assert.Nil(t, rt.Rebalancer(ctx, t, c, ns), "the run does not create its record again")

	// Nothing is started once the run is over.
	time.Sleep(5 * time.Second)
	assert.Equal(t, after, triggered(ctx, t, c, ns, apps), "a trigger written after the run ended")
}
