// Package failback proves kubectl rebalance failback on a real Karmada
// control plane with two member clusters whose kwok nodes run the pods: the
// seed tutorial's failover (member1 tainted NoExecute) and recovery, with
// the workloads back on member1 after the stabilization window and no
// command run; a cluster that flaps during its window; and a failure budget
// spent on a workload that never gets ready.
//
// Known gap (docs/testing.md): this suite still runs two Push members and
// every Karmada controller but the workloadRebalancer one, because on the
// default environment Karmada's workloadRebalancer controller triggers every
// workload of a failback record at once, so its waves, readiness gate and
// failure budget do nothing (issue 27, the same defect as
// TestKnownGapWavesWithWorkloadRebalancerController in test/e2e). The seed
// story itself runs on the default environment in test/e2e/estimator
// (TestFailbackSeedStoryWithEstimators).
package failback

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{
		Members:            2,
		Progress:           os.Stderr,
		KarmadaControllers: "*,-workloadRebalancer",
	}))
}
