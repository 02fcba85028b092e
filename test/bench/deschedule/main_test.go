// Package deschedulebench measures one `kubectl rebalance deschedule` pass
// over 5,000 candidate ResourceBindings on a real Karmada control plane with
// three members, next to the bare cost of listing the same bindings and
// member objects. It prints wall time, API requests by verb and peak heap.
// Run it with `make bench`; docs/performance.md records the figures.
package deschedulebench

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunBenchmarks(m, harness.Options{
		Members:  3,
		NodePods: "1000",
		// The bindings are written by the benchmark, not by Karmada: only
		// the controllers that keep the clusters Ready run, so that nothing
		// else reacts to 5,000 bindings without templates.
		KarmadaControllers: "cluster,clusterStatus",
		// karmada-descheduler's own pass over them would be timed too.
		WithoutKarmadaDescheduler: true,
	}))
}
