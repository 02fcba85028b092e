// Package nocontroller runs the failover-and-recovery waves of
// test/e2e/waves with Karmada's workloadRebalancer controller off
// (karmada-controller-manager --controllers=*,-workloadRebalancer), as on
// installs that turn it off: the run alone writes every trigger and keeps the
// record. A deviation from the default environment, listed in
// docs/testing.md: it tests behaviour that depends on that switch.
package nocontroller

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/waves/wavestest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Members: 3, Progress: os.Stderr, KarmadaControllers: "*,-workloadRebalancer"}))
}

// TestWavesAfterFailoverWithoutController: the waves of
// TestWavesAfterFailoverAndRecovery with no workloadRebalancer controller:
// no trigger is Karmada's, not even the record's first.
func TestWavesAfterFailoverWithoutController(t *testing.T) {
	wavestest.FailoverAndRecovery(t, harness.Require(t), "waves-failover-off", false)
}
