// Package recorded proves recorded runs of kubectl rebalance (--name, --ttl,
// WorkloadRebalancer manifests, kubectl rebalance get) on a real Karmada
// control plane whose karmada-controller-manager runs every controller but
// the workloadRebalancer one: whatever happens to a WorkloadRebalancer here
// is the plugin's doing. The package withcontroller runs the same kind of
// runs next to Karmada's own controller.
package recorded

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Members: 2, Progress: os.Stderr, KarmadaControllers: "*,-workloadRebalancer"}))
}
