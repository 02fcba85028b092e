// Package withcontroller proves that recorded runs of kubectl rebalance and
// Karmada's own workloadRebalancer controller (karmada-controller-manager
// with its default controllers, on a real control plane) work on the same
// WorkloadRebalancer without stepping on each other: one status, one
// trigger per binding, one deletion. It also proves --server-side against
// the real controller.
package withcontroller

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Progress: os.Stderr}))
}
