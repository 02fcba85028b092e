// Package faults runs kubectl rebalance through a proxy that injects faults
// (429 with Retry-After, 500, 503, resets, latency, answers lost after a
// write landed) between it and a real Karmada apiserver, restarts that
// apiserver in the middle of a run, and checks that nothing is lost: every
// workload ends Successful or correctly pending, each binding gets exactly
// one trigger, the record keeps every entry. Run it with `make faults`; it
// prints the figures docs/reliability.md quotes.
package faults

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
