// Package failback proves kubectl rebalance failback on a real Karmada
// control plane with two member clusters whose kwok nodes run the pods: the
// seed tutorial's failover (member1 tainted NoExecute) and recovery, with
// the workloads back on member1 after the stabilization window and no
// command run; a cluster that flaps during its window; and a failure budget
// spent on a workload that never gets ready.
//
// Known gap (docs/testing.md): this suite still runs on the environment it was
// written for - two Push members, no scheduler-estimators, and every Karmada
// controller but the workloadRebalancer one - because failback does not work
// on the default environment yet: with estimators on, plan cannot predict the
// seed workload, so failback selects nothing (issue 26), and Karmada's
// workloadRebalancer controller triggers every workload of a failback record
// at once (issue 27). TestKnownGapFailbackSeedStoryDefaultEnv in test/e2e shows
// the symptom on the default environment; the issues that fix them move this
// suite to the default.
package failback

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{
		Members:                   2,
		Progress:                  os.Stderr,
		KarmadaControllers:        "*,-workloadRebalancer",
		WithoutSchedulerEstimator: true,
	}))
}
