// Package failback proves kubectl rebalance failback on a real Karmada
// control plane with two member clusters whose kwok nodes run the pods: the
// seed tutorial's failover (member1 tainted NoExecute) and recovery, with
// the workloads back on member1 after the stabilization window and no
// command run; a cluster that flaps during its window; and a failure budget
// spent on a workload that never gets ready. karmada-controller-manager runs
// every controller but the workloadRebalancer one, so whatever happens to a
// WorkloadRebalancer here is the daemon's doing.
package failback

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Members: 2, Progress: os.Stderr, KarmadaControllers: "*,-workloadRebalancer"}))
}
