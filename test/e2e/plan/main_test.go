// Package plan measures `kubectl rebalance plan` against what karmada-scheduler
// then really does, on a real Karmada control plane: each scenario plans,
// rebalances for real, and compares the predicted placement with the
// binding's placement after the scheduler answered.
package plan

import (
	"os"
	"testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func TestMain(m *testing.M) {
	// Members with room for 1,000 pods each, as real clusters have: with the
	// default 110, a few pods more or less on a member shift a dynamic
	// division, and when the members report them is a matter of timing.
	// PLAN_E2E_DIR keeps the control plane's logs (karmada-scheduler's among
	// them) after a passing run too, to compare a plan with the scheduler.
	//
	// 64 CPUs a node: v1.18's karmada-scheduler runs with its manifest's
	// AllAlpha gates, SchedulingOvercommitProtection among them, so right
	// after a decision it counts the replicas it just placed twice (its
	// memory and the member's pods); with 32 CPUs the failover of "a cluster
	// without room" then found no room on member2, and the binding waited
	// minutes among the unschedulable ones before its retry.
	os.Exit(harness.RunTests(m, harness.Options{Dir: os.Getenv("PLAN_E2E_DIR"), Members: 3, NodePods: "1000", NodeCPU: "64", Progress: os.Stderr}))
}
