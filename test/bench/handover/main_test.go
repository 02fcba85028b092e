// Package handover measures a batch of make-before-break moves on the
// users' default control plane (harness.Options{}) next to the same batch
// moved in one write each: wall time until every workload runs its replica
// ready again (start-up included), API requests by verb and the workloads
// that were without a ready replica. Run it with `make bench-handover`.
package handover

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunBenchmarks(m, harness.Options{}))
}
