// Package waves proves waved runs of kubectl rebalance (--max-in-flight,
// readiness gates, --progress-deadline, --max-failures, abort and resume)
// on a real Karmada control plane with two member clusters whose kwok nodes
// run the pods. karmada-controller-manager runs every controller but the
// workloadRebalancer one, so whatever happens to a WorkloadRebalancer here
// is the plugin's doing.
package waves

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Members: 2, Progress: os.Stderr, KarmadaControllers: "*,-workloadRebalancer"}))
}
