package handover

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestMoveOntoAFailingClusterLetsKarmadaDecide fails the gaining cluster in
// the middle of a move: member1 is tainted NoExecute while its staged
// replica starts, and Karmada's taint manager evicts it from the suspended
// binding. The move must not release its prediction onto the failing
// cluster (which scales member2 down for a replica that is being evicted):
// it lets go of the binding as Karmada placed it - suspension lifted,
// ledger removed, no trigger - and says so. The workload keeps every ready
// replica throughout.
func TestMoveOntoAFailingClusterLetsKarmadaDecide(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-failing", "app"
	fixtures.TestNamespace(ctx, t, c, ns)
	seedWorkload(ctx, t, c, ns, name)
	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)
	bin := buildPlugin(ctx, t)

	w := watchReady(t, cp, twoMembers, ns, name)
	command, out := startMove(ctx, t, cp, c, bin, ns, name)
	require.NoError(t, c.SetClusterTaint(ctx, "member1", true))
	t.Cleanup(func() { _ = c.SetClusterTaint(context.Background(), "member1", false) })
	done := make(chan error, 1)
	go func() { done <- command.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the move did not end within 3 minutes of its target failing; output:\n%s", out.String())
	}
	t.Logf("exit %d:\n%s", command.ProcessState.ExitCode(), out.String())

	assert.Equal(t, 3, command.ProcessState.ExitCode(), "the workload is left pending")
	rb := binding(ctx, t, c, ns, name)
	assert.False(t, rb.Spec.SchedulingSuspended(), "no binding is left suspended")
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	assert.Contains(t, out.String(), "member1")
	assert.Contains(t, out.String(), "changed during the move")
	// Karmada's failover keeps the workload off member1 while it is tainted.
	_, err := c.WaitForPlacement(ctx, ns, name+"-deployment", 2*time.Minute, "{member2:3}")
	require.NoError(t, err)
	waitReadySum(ctx, t, cp, ns, name, 3, twoMembers)
	w.Close()
	lo, _ := w.Range()
	t.Logf("FIGURES failing target: ready replicas never below %d", lo)
	assert.GreaterOrEqual(t, lo, int32(3), "the failing target cost no ready replica")
}
