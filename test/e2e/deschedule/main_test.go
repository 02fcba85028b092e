// Package deschedule proves `kubectl rebalance deschedule` on a real Karmada
// control plane: member kube-schedulers leave pods Unschedulable, the command
// counts them through the Karmada cluster proxy (or member contexts), lowers
// the binding, and the real karmada-scheduler places the replicas elsewhere.
//
// Karmada's general estimator sizes a member by its free pod slots (and CPU
// grades): member base nodes have 60 pod slots, enough for every test at
// once, but no test pod can run there. Test workloads select small dedicated
// kwok nodes by label, which decides exactly how many of their pods run and
// how many stay Unschedulable. A "filler" of 60 pending pods makes a member
// look full to Karmada.
package deschedule

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	code := harness.RunTests(m, harness.Options{
		Members:    3,
		NodeCPU:    "100",
		NodeMemory: "1Ti",
		NodePods:   "60",
		// As karmada-descheduler's prerequisites ask: an estimator per member
		// and karmada-scheduler with --enable-scheduler-estimator.
		SchedulerEstimator: true,
		Progress:           os.Stderr,
	})
	removeBinary()
	os.Exit(code)
}
