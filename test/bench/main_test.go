// Package bench measures kubectl-rebalance on a real Karmada control plane
// and prints wall time and API requests by verb next to the bare limit and
// Karmada's own controllers. Run it with `make bench`.
package bench

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunBenchmarks(m, harness.Options{
		Members:        3,
		NodesPerMember: 2,
		NodePods:       "1000",
	}))
}
