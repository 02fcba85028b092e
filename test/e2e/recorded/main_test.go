// Package recorded proves recorded runs of kubectl rebalance (--name, --ttl,
// WorkloadRebalancer manifests, kubectl rebalance get) on a real Karmada
// control plane whose karmada-controller-manager runs every controller but
// the workloadRebalancer one: whatever happens to a WorkloadRebalancer here
// is the plugin's doing. That is a deviation from the default environment on
// purpose (docs/testing.md): what is tested is how the plugin keeps a
// record's status with the controller's rules where no controller does. The
// package withcontroller runs the same kind of runs on the default
// environment, next to Karmada's own controller.
package recorded

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Progress: os.Stderr, KarmadaControllers: "*,-workloadRebalancer"}))
}
