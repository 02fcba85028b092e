// Package estimator proves plan, kubectl rebalance -C/--clusters and failback
// on the users' default control plane: a karmada-scheduler-estimator per
// member and karmada-scheduler with --enable-scheduler-estimator, every
// Karmada controller on, member3 in Pull mode. Placements that depend on free capacity are
// predicted from the members' nodes and pods with Karmada's own estimator
// code, and the tests hold the predictions to what karmada-scheduler then
// really does.
package estimator

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Dir: os.Getenv("ESTIMATOR_E2E_DIR"), Members: 3, NodePods: "2000", Progress: os.Stderr}))
}
