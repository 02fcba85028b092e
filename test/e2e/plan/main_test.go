// Package plan measures `kubectl rebalance plan` against what karmada-scheduler
// then really does, on a real Karmada control plane: each scenario plans,
// rebalances for real, and compares the predicted placement with the
// binding's placement after the scheduler answered.
//
// Known gap (docs/testing.md): the suite runs karmada-scheduler without
// scheduler-estimators, because with them on (the default environment) plan
// answers CannotPredict for every capacity-dependent workload (issue 26).
// TestKnownGapPlanWithEstimators in test/e2e shows the symptom on the default
// environment; issue 26 moves this suite to it.
package plan

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	// Members with room for 1,000 pods each, as real clusters have: with the
	// default 110, a few pods more or less on a member shift a dynamic
	// division, and when the members report them is a matter of timing.
	// PLAN_E2E_DIR keeps the control plane's logs (karmada-scheduler's among
	// them) after a passing run too, to compare a plan with the scheduler.
	os.Exit(harness.RunTests(m, harness.Options{Dir: os.Getenv("PLAN_E2E_DIR"), Members: 3, NodePods: "1000", Progress: os.Stderr, WithoutSchedulerEstimator: true}))
}
