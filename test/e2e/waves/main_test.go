// Package waves proves waved runs of kubectl rebalance (--max-in-flight,
// readiness gates, --progress-deadline, --max-failures, abort and resume)
// on the default environment: three members (member3 Pull), an estimator
// per member and every Karmada controller on, Karmada's workloadRebalancer
// controller included, which a recorded waved run leaves nothing to trigger
// (docs/waves.md, "The record over time").
package waves

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Members: 3, Progress: os.Stderr}))
}
