// Package deschedule proves `kubectl rebalance deschedule` on a real Karmada
// control plane set up as Karmada's descheduler guide asks: a
// karmada-scheduler-estimator for every member and karmada-scheduler with
// --enable-scheduler-estimator, so that the scheduler sizes members by their
// schedulable nodes. Here the guide's example is run as written: a replica
// that a cordoned member cannot run is evicted by one pass and placed
// elsewhere for good.
//
// The tests of the formula, limits, scope, the daemon and RBAC, which make
// pods stuck through the view of a scheduler without estimators, are in
// the noestimator package.
package deschedule

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{
		Members:    3,
		NodeCPU:    "100",
		NodeMemory: "1Ti",
		NodePods:   "60",
		Progress:   os.Stderr,
	}))
}
