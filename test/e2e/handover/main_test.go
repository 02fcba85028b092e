// Package handover proves make-before-break moves on the users' default
// control plane (harness.Options{}: an estimator per member, every Karmada
// controller on, member3 in Pull mode) with pods that become ready 15 s
// after they start: a watch on the member Deployments records the fewest
// ready replicas summed over the members during each move.
package handover

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Dir: os.Getenv("HANDOVER_E2E_DIR"), Progress: os.Stderr}))
}
