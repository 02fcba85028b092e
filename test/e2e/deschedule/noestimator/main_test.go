// Package noestimator proves `kubectl rebalance deschedule` on a real Karmada
// control plane whose karmada-scheduler runs without
// karmada-scheduler-estimator: member kube-schedulers leave pods
// Unschedulable, the command counts them through the Karmada cluster proxy (or
// member contexts), lowers the binding, and the real karmada-scheduler places
// the replicas elsewhere - or, where it still sees room, straight back, which
// the command must report instead of evicting in a loop.
//
// Without an estimator Karmada sizes a member by its resource summary alone,
// and these tests use that to make pods stuck cheaply and exactly: member base
// nodes have 60 pod slots, enough for every test at once, but no test pod can
// run there. Test workloads select small dedicated kwok nodes by label, which
// decides exactly how many of their pods run and how many stay Unschedulable.
// A "filler" of 60 pending pods makes a member look full to Karmada. The
// descheduler guide's own example, which needs the estimator, is in the
// parent package.
package noestimator

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	code := harness.RunTests(m, harness.Options{
		Members: 3,
		// The behaviour under test depends on it (docs/testing.md).
		WithoutSchedulerEstimator: true,
		NodeCPU:                   "100",
		NodeMemory:                "1Ti",
		NodePods:                  "60",
		Progress:                  os.Stderr,
	})
	removeBinary()
	os.Exit(code)
}
