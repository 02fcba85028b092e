// Package e2e proves kubectl-rebalance and the control-plane harness on a real
// Karmada control plane: real kube-apiservers, Karmada's CRDs, scheduler,
// controller-manager, webhook and aggregated apiserver, and kwok-backed members.
package e2e

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Members: 3, Progress: os.Stderr}))
}
