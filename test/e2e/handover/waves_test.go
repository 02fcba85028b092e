package handover

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/handover/batchtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestWavedBatchKeepsReplicasReady moves 50 one-replica workloads back to
// member1 after its failover, in waves of 10: every workload moved whole
// keeps its replica ready throughout; the same batch in one-write moves
// (--max-unavailable=100%) leaves the moved workloads without one.
func TestWavedBatchKeepsReplicasReady(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns = "handover-waves"
	names := batchtest.Fleet(ctx, t, cp, c, ns, 50, readyAfter)

	batchtest.FailedOver(ctx, t, cp, c, ns, names)
	mbb := batchtest.Move(ctx, t, cp, c, ns, names, "--max-in-flight", "10", "--timeout", "10m")
	assert.Equal(t, 0, mbb.Run.Code, mbb.Run.Stderr)
	assert.Positive(t, mbb.OnMember1, "the fresh reschedules bring replicas back to member1")
	assert.Zero(t, mbb.Suspended, "no binding left suspended")
	// No workload may lose its ready replica. Each one that did is named
	// with its row, which says whether karmada-scheduler decided against
	// the prediction ("predicted {...}").
	for _, n := range mbb.Dipped {
		assert.Failf(t, "a workload lost its ready replica", "%s: %s", n, mbb.Rows[n])
	}
	t.Logf("FIGURES waved batch: karmada-scheduler chose other than predicted for %d workload(s)", mbb.Mismatched())

	batchtest.FailedOver(ctx, t, cp, c, ns, names)
	one := batchtest.Move(ctx, t, cp, c, ns, names, "--max-in-flight", "10", "--timeout", "10m", "--max-unavailable=100%")
	assert.Equal(t, 0, one.Run.Code, one.Run.Stderr)
	assert.Positive(t, one.OnMember1)
	assert.NotEmpty(t, one.Dipped, "the one-write moves leave workloads without a ready replica")
}
