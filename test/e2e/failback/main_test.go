// Package failback proves kubectl rebalance failback on a real Karmada
// control plane whose kwok nodes run the pods: the
// seed tutorial's failover (member1 tainted NoExecute) and recovery, with
// the workloads back on member1 after the stabilization window and no
// command run; a cluster that flaps during its window; and a failure budget
// spent on a workload that never gets ready.
//
// It runs on the default environment: three members (member3 Pull), an
// estimator per member and every Karmada controller on, Karmada's
// workloadRebalancer controller included, which a failback's waved record
// leaves nothing to trigger (docs/waves.md, "The record over time").
package failback

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunTests(m, harness.Options{Members: 3, Progress: os.Stderr}))
}
