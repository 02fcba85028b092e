// Package plan measures `kubectl rebalance plan` at fleet scale on a real
// Karmada control plane: 2,000 workloads after a failover of member1 and its
// recovery. It prints the exact-match rate of the predicted placements
// against what karmada-scheduler then really does, the plan's wall time and
// API requests by verb, next to the bare cost of listing the bindings and the
// clusters. Run it with `make bench`.
package plan

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunBenchmarks(m, harness.Options{
		Members:        3,
		NodesPerMember: 2,
		NodePods:       "2000",
	}))
}
