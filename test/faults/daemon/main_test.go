// Package daemon runs two `kubectl rebalance deschedule` daemons with leader
// election, as real processes, each through a fault-injecting proxy in front
// of a real Karmada apiserver (member clusters read through its cluster
// proxy, so through the faults too), on the control plane the seed's
// descheduler example asks for (karmada-scheduler-estimator for every
// member). The apiserver is restarted while the leader writes, and the
// leader is killed while it writes; the benchmark checks that every
// stranded workload is descheduled by exactly one binding write, that every
// write came from the daemon holding the Lease, that the standby takes over
// and finishes the work, and that the survivor stops promptly on SIGTERM.
// Run it with `make faults`; it prints the figures docs/reliability.md
// quotes.
package daemon

import (
	"flag"
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The control plane is worth starting only when the benchmark runs.
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	code := harness.RunTests(m, harness.Options{
		Members:    3,
		NodeCPU:    "100",
		NodeMemory: "1Ti",
		NodePods:   "60",
		Progress:   os.Stderr,
	})
	removeBinary()
	os.Exit(code)
}
