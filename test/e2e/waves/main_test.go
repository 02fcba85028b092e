// Package waves proves waved runs of kubectl rebalance (--max-in-flight,
// readiness gates, --progress-deadline, --max-failures, abort and resume)
// on a real Karmada control plane with two member clusters whose kwok nodes
// run the pods.
//
// Known gap (docs/testing.md): karmada-controller-manager runs every
// controller but the workloadRebalancer one, because on the default
// environment Karmada's workloadRebalancer controller triggers every workload
// of a waved run's record at once and the waves pace nothing (issue 27).
// TestKnownGapWavesWithWorkloadRebalancerController in test/e2e shows the
// symptom on the default environment; issue 27 moves this suite to it.
package waves

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Members: 2, Progress: os.Stderr, KarmadaControllers: "*,-workloadRebalancer"}))
}
