package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestRebalanceSingleDeployment rebalances one Deployment and checks the
// table against the binding.
func TestRebalanceSingleDeployment(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "rb-single"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "web", nil, []string{"member1", "member2"}, "web")
	before := fixtures.WaitScheduled(ctx, t, c, ns, "web-deployment")

	res := rebalanceCmd(t, cp, "deploy/web", "-n", ns)
	require.Equal(t, cmd.ExitOK, res.code)
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, []string{"WORKLOAD", "RESULT", "OUTCOME", "BEFORE", "AFTER", "REASON"}, fixtures.SplitCells(lines[0]))
	row := tableRow(t, res.stdout, "deployment.apps/web")
	assert.Equal(t, []string{"deployment.apps/web", "Successful", "Scheduled"}, row[:3])
	assert.Equal(t, rebalance.FormatPlacement(before.Spec.Clusters), row[3])
	assert.Equal(t, "1 workload: 1 successful, 0 failed, 0 pending; 1 rescheduled, 0 ignored\n", res.stderr)

	after, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, after.Spec.RescheduleTriggeredAt)
	trigger := after.Spec.RescheduleTriggeredAt.Time
	assert.True(t, trigger.After(before.Status.LastScheduledTime.Time), "trigger %s after last schedule %s", trigger, before.Status.LastScheduledTime)
	assert.False(t, after.Status.LastScheduledTime.Time.Before(trigger), "the scheduler answered the trigger")
	assert.Equal(t, rebalance.FormatPlacement(after.Spec.Clusters), row[4])

	// The wide table names the binding, the trigger and the scheduler's words.
	wide := rebalanceCmd(t, cp, "deploy/web", "-n", ns, "-o", "wide", "--karmada-context", harness.KarmadaContext)
	require.Equal(t, cmd.ExitOK, wide.code)
	assert.Equal(t, []string{"WORKLOAD", "RESULT", "OUTCOME", "BEFORE", "AFTER", "BINDING", "TRIGGERED-AT", "REASON", "MESSAGE"},
		fixtures.SplitCells(strings.SplitN(wide.stdout, "\n", 2)[0]))
	row = tableRow(t, wide.stdout, "deployment.apps/web")
	require.Len(t, row, 9)
	assert.Equal(t, "web-deployment", row[5])
	at, err := time.Parse(time.RFC3339, row[6])
	require.NoError(t, err)
	assert.True(t, at.After(trigger), "a second run uses a later trigger")
	assert.Equal(t, "Success", row[7])
}

// TestRebalanceFailoverAndBack is Karmada's WorkloadRebalancer tutorial
// through the command: replicas leave a tainted member, stay away after the
// taint is gone, and come back with one `kubectl rebalance`.
func TestRebalanceFailoverAndBack(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name = "rb-failover", "app"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, name, nil, []string{"member1", "member2"}, name)
	_, err := c.WaitForPlacement(ctx, ns, name+"-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)

	require.NoError(t, c.SetClusterTaint(ctx, "member1", true))
	t.Cleanup(func() { _ = c.SetClusterTaint(ctx, "member1", false) })
	_, err = c.WaitForPlacement(ctx, ns, name+"-deployment", 2*time.Minute, "{member2:3}")
	require.NoError(t, err)
	require.NoError(t, c.SetClusterTaint(ctx, "member1", false))
	time.Sleep(3 * time.Second)
	_, err = c.WaitForPlacement(ctx, ns, name+"-deployment", 5*time.Second, "{member2:3}")
	require.NoError(t, err, "recovery alone moves nothing")

	res := rebalanceCmd(t, cp, "deploy/"+name, "-n", ns)
	require.Equal(t, cmd.ExitOK, res.code)
	row := tableRow(t, res.stdout, "deployment.apps/"+name)
	assert.Equal(t, []string{"deployment.apps/" + name, "Successful", "Scheduled", "{member2:3}"}, row[:4])
	// Karmada breaks the 3-over-2 tie with a hash of the template's uid, so
	// either split is a return to both clusters.
	assert.True(t, samePlacement(fixtures.TutorialSplits[0], row[4]) || samePlacement(fixtures.TutorialSplits[1], row[4]), "after: %s", row[4])

	rb, err := c.WaitForPlacement(ctx, ns, name+"-deployment", 10*time.Second, fixtures.TutorialSplits...)
	require.NoError(t, err)
	assert.True(t, samePlacement(fixtures.Placement(rb.Spec.Clusters), row[4]), "the table shows the binding's placement")
	require.NoError(t, fixtures.WaitForMemberReady(ctx, memberClient(t, cp, "member1"), ns, name, replicasIn(rb, "member1"), 2*time.Minute))
}

// TestRebalanceSameSecondTrigger shows the silent no-op of a trigger in the
// second of the last schedule on the real scheduler, and that the command
// does not fall into it.
func TestRebalanceSameSecondTrigger(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "rb-clock"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "clock", nil, []string{"member1", "member2"}, "clock")
	rbs := c.Karmada.WorkV1alpha2().ResourceBindings(ns)

	// What a WorkloadRebalancer created in the second of the last schedule
	// writes: the scheduler sees the new generation and does nothing.
	rb := fixtures.WaitScheduled(ctx, t, c, ns, "clock-deployment")
	last := rb.Status.LastScheduledTime.Time
	patch := `{"spec":{"rescheduleTriggeredAt":"` + last.UTC().Format(time.RFC3339) + `"}}`
	written, err := rbs.Patch(ctx, "clock-deployment", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	rb = fixtures.WaitScheduled(ctx, t, c, ns, "clock-deployment")
	require.GreaterOrEqual(t, rb.Status.SchedulerObservedGeneration, written.Generation)
	assert.True(t, last.Equal(rb.Status.LastScheduledTime.Time), "a same-second trigger is ignored: lastScheduledTime stays %s, got %s", last, rb.Status.LastScheduledTime)

	// Back to back: the second run starts in, or right after, the second in
	// which the first run's reschedule happened.
	for i := range 3 {
		res := rebalanceCmd(t, cp, "deploy/clock", "-n", ns, "-o", "wide")
		require.Equal(t, cmd.ExitOK, res.code, "run %d", i)
		row := tableRow(t, res.stdout, "deployment.apps/clock")
		assert.Equal(t, "Scheduled", row[2], "run %d", i)

		after, err := rbs.Get(ctx, "clock-deployment", metav1.GetOptions{})
		require.NoError(t, err)
		trigger := after.Spec.RescheduleTriggeredAt.Time
		assert.True(t, trigger.After(last), "run %d: trigger %s must be after the previous schedule %s", i, trigger, last)
		assert.False(t, after.Status.LastScheduledTime.Time.Before(trigger), "run %d was answered", i)
		t.Logf("run %d: previous schedule %s, trigger %s, new schedule %s", i, last.Format(time.RFC3339), trigger.Format(time.RFC3339),
			after.Status.LastScheduledTime.Format(time.RFC3339))
		last = after.Status.LastScheduledTime.Time
	}
}

// TestRebalanceDryRun checks that neither dry run changes the binding.
func TestRebalanceDryRun(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "rb-dry"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "dry", nil, []string{"member1", "member2"}, "dry")
	before := fixtures.WaitScheduled(ctx, t, c, ns, "dry-deployment")

	tests := []struct {
		flag, marker string
	}{
		{flag: "--dry-run=client", marker: " (dry run)\n"},
		{flag: "--dry-run=server", marker: " (server dry run)\n"},
		{flag: "--dry-run", marker: " (dry run)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			res := rebalanceCmd(t, cp, "deploy/dry", "-n", ns, "-o", "wide", tt.flag)
			require.Equal(t, cmd.ExitOK, res.code)
			row := tableRow(t, res.stdout, "deployment.apps/dry")
			assert.Equal(t, "DryRun", row[1])
			assert.Contains(t, row[8], "dry run")
			assert.True(t, strings.HasSuffix(res.stderr, tt.marker), res.stderr)

			now, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, "dry-deployment", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, before.Generation, now.Generation)
			assert.Nil(t, now.Spec.RescheduleTriggeredAt)
		})
	}
}

// TestRebalanceHandWrittenTrigger starts from a trigger written by hand in
// another time zone: whatever form the API server keeps it in, the command
// replaces it once.
func TestRebalanceHandWrittenTrigger(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "rb-handwritten"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "app", nil, []string{"member1", "member2"}, "app")
	rbs := c.Karmada.WorkV1alpha2().ResourceBindings(ns)
	_, err := rbs.Patch(ctx, "app-deployment", types.MergePatchType, []byte(`{"spec":{"rescheduleTriggeredAt":"2020-01-01T02:00:00+02:00"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	fixtures.WaitScheduled(ctx, t, c, ns, "app-deployment")

	res := rebalanceCmd(t, cp, "deploy/app", "-n", ns, "-o", "wide")
	require.Equal(t, cmd.ExitOK, res.code)
	assert.Equal(t, []string{"Successful", "Scheduled"}, tableRow(t, res.stdout, "deployment.apps/app")[1:3])
	after, err := rbs.Get(ctx, "app-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, after.Spec.RescheduleTriggeredAt.After(time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)))
}
