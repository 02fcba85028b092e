// Package plan measures `kubectl rebalance plan` against what karmada-scheduler
// then really does, on a real Karmada control plane: each scenario plans,
// rebalances for real, and compares the predicted placement with the
// binding's placement after the scheduler answered.
package plan

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Members: 3, Progress: os.Stderr}))
}
