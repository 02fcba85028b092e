package plan

import (
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestPlanDivisionRuleOfTheRelease divides 2 replicas by static weights
// 6:4:1, where Karmada's releases disagree: v1.16 and newer divide by the
// Webster method ({member1:1, member2:1}), older releases give the floor of
// each share and the replica left to the largest weight ({member1:2}). The
// plan must predict the rule of the release it talks to, which the plugin
// tells from the server's API, not the rule of the scheduler it is built
// with (v1.18): the placement cannot change, and a real rebalance keeps it.
func TestPlanDivisionRuleOfTheRelease(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "plan-release-rule"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployment(ctx, t, c, ns, "weighted", 2, "")
	policy(ctx, t, c, ns, "weighted", policyv1alpha1.Placement{
		ClusterAffinity:   &policyv1alpha1.ClusterAffinity{ClusterNames: all3},
		ReplicaScheduling: staticWeights(map[string]int64{"member1": 6, "member2": 4, "member3": 1})}, "weighted")

	// The release's own rule placed it; which one is the release's fact.
	want := "{member1:1, member2:1}"
	if cp.Versions.KarmadaMinor() < 16 {
		want = "{member1:2}"
	}
	cmp, verdicts := planAndRun(ctx, t, cp, c, "deploy/weighted", "-n", ns)
	cmp.requireExact(t)

	plan := report(t, cp, cmd.ExitOK, "plan", "deploy/weighted", "-n", ns)
	require.Len(t, plan.Workloads, 1)
	w := plan.Workloads[0]
	assert.Equal(t, want, text(w.Placements.Before), "Karmada %s's division", cp.Versions.Karmada)
	assert.Equal(t, want, text(w.Placements.Predicted))
	// Every release is told apart (v1.16 from v1.15 by a description of its
	// schema), so the plan divides by the rule of the release it runs on.
	assert.Equal(t, string(predict.CannotChange), verdicts["weighted"], w.Message)

	// Overcommit protection is a feature gate of v1.18's scheduler: asked
	// of an older release, the plan says it cannot be and predicts without.
	res := run(t, cp, "plan", "deploy/weighted", "-n", ns, "--overcommit-protection")
	require.Equal(t, cmd.ExitOK, res.code, res.stderr)
	if cp.Versions.KarmadaMinor() < 18 {
		assert.Contains(t, res.stderr, "warning: --overcommit-protection ignored: this control plane runs Karmada v1.")
		assert.Contains(t, res.stderr, "whose karmada-scheduler has no SchedulingOvercommitProtection feature gate (added in v1.18)")
	} else {
		assert.NotContains(t, res.stderr, "ignored")
	}
}
