// Package bench measures kubectl-rebalance on a real Karmada control plane
// and prints wall time and API requests by verb next to the bare limit and
// Karmada's own controllers. Run it with `make bench`.
package bench

import (
	"flag"
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The control plane is worth starting only when benchmarks run.
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	os.Exit(harness.RunTests(m, harness.Options{
		Members:        3,
		NodesPerMember: 2,
		NodePods:       "1000",
		Progress:       os.Stderr,
	}))
}
