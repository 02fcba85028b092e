package waves

import (
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/waves/wavestest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestWavesAfterFailoverAndRecovery: after member1 fails and recovers, a
// recorded waved run moves six workloads whose pods take 10-20 s to become
// ready back two at a time, on the default environment (Karmada's
// workloadRebalancer controller on): the waves gate on readiness, the run
// writes the triggers, and the record ends complete (wavestest.FailoverAndRecovery).
func TestWavesAfterFailoverAndRecovery(t *testing.T) {
	wavestest.FailoverAndRecovery(t, harness.Require(t), "waves-failover", true)
}
