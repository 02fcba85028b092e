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

// batchReadyAfter is how long the batch's pods take to start.
const batchReadyAfter = 20 * time.Second

// TestBatchAtDefaultsMovesEveryWorkload is a new user's batch after a
// failover and recovery: 20 one-replica workloads whose pods take 20 s to
// start, moved back by `kubectl rebalance deployments -n NS --all` with
// every flag at its default. The command ends with exit 0 (no move cut by
// the batch's --timeout), nothing is left held, and no workload is ever
// without a ready replica.
func TestBatchAtDefaultsMovesEveryWorkload(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns = "handover-batch"
	names := batchtest.Fleet(ctx, t, cp, c, ns, 20, batchReadyAfter)

	batchtest.FailedOver(ctx, t, cp, c, ns, names)
	m := batchtest.Move(ctx, t, cp, c, ns, names)
	assert.Equal(t, 0, m.Run.Code, "exit code; stderr:\n%s", m.Run.Stderr)
	assert.Positive(t, m.OnMember1, "the fresh reschedules bring replicas back to member1")
	assert.Zero(t, m.Suspended, "no binding left suspended")
	assert.Zero(t, m.Ledgers, "no binding left with a move's ledger")
	for _, n := range m.Dipped {
		assert.Failf(t, "a workload lost its ready replica", "%s: %s", n, m.Rows[n])
	}
}
