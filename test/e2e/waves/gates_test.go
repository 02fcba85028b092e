package waves

import (
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestStepsWaitForApproval runs a recorded run with --steps 1,100% in a
// process of its own: it moves exactly one workload, pauses with a message
// and the record's paused-at-step annotation, and moves no other workload
// however long it waits; `approve NAME` from this (second) process records
// who approved, and the run goes on and finishes every workload. The
// record keeps the approval; the events tell the pause and the approval.
func TestStepsWaitForApproval(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name = "steer-steps", "steer-steps"
	apps := names("app", 3)
	failedOverApps(ctx, t, c, ns, apps)
	rt.DeleteRebalancerAfter(t, c, name)

	early := rt.Rebalance(t, cp, "approve", name)
	require.Equal(t, cmd.ExitError, early.Code, "no record yet")

	p := rt.StartBinary(t, cp, append([]string{"-n", ns, "--name", name, "--steps", "1,100%"}, deployArgs(apps)...)...)
	rt.WaitRebalancer(ctx, t, c, name, 2*time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool {
		_, paused := record.PausedAt(rb)
		return rb != nil && paused
	})
	rb := rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rb)
	assert.Equal(t, "1", rb.Annotations[record.PausedAtStepAnnotation])
	assert.Len(t, rb.Spec.Workloads, 1, "the record lists the one workload of step 1")
	assert.Len(t, triggered(ctx, t, c, ns, apps), 1, "step 1 moved one workload")
	// However long it waits, the run starts nothing more.
	time.Sleep(8 * time.Second)
	assert.Len(t, triggered(ctx, t, c, ns, apps), 1, "nothing more moves before the approval")
	for _, app := range apps {
		assert.Empty(t, rt.Binding(ctx, t, c, ns, app+"-deployment").Annotations["kubectl-rebalance.io/handover"], "%s held while paused", app)
	}
	require.Nil(t, p.Cmd.ProcessState, "the run waits")
	assert.Contains(t, p.Stderr(), "paused after step 1 of 2 (1 of 3 workloads): run `kubectl rebalance approve "+name+"` to go on")
	shown := rt.Rebalance(t, cp, "get", name)
	assert.Contains(t, shown.Stderr, "; paused after step 1, waiting for `kubectl rebalance approve "+name+"`")

	approved := rt.Rebalance(t, cp, "approve", name)
	require.Equal(t, cmd.ExitOK, approved.Code)
	assert.Equal(t, "workloadrebalancer.apps.karmada.io/"+name+" approved\n", approved.Stdout)
	assert.Contains(t, approved.Stderr, "step 1 approved by ")

	res := p.Wait(t, 3*time.Minute)
	require.Equal(t, cmd.ExitOK, res.Code)
	assert.Contains(t, res.Stderr, "workloadrebalancer "+name+": step 1 approved by ")
	assert.Contains(t, res.Stderr, "going on with step 2 (up to 3 workloads)")

	rb = rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rb)
	_, paused := record.PausedAt(rb)
	assert.False(t, paused)
	a, ok := record.Approved(rb, 1)
	require.True(t, ok, "the approval is on the record")
	assert.NotEmpty(t, a.By)
	assert.False(t, a.At.IsZero())
	assert.Len(t, rb.Spec.Workloads, len(apps))
	for _, o := range rb.Status.ObservedWorkloads {
		assert.Equal(t, appsv1alpha1.RebalanceSuccessful, o.Result, o.Workload.Name)
	}
	assert.Len(t, triggered(ctx, t, c, ns, apps), len(apps))
	shown = rt.Rebalance(t, cp, "get", name)
	assert.Contains(t, shown.Stderr, "; step 1 approved by "+a.By)
	again := rt.Rebalance(t, cp, "approve", name)
	assert.Equal(t, cmd.ExitError, again.Code)
	assert.Contains(t, again.Stderr, "workloadrebalancer "+name+" is not paused: its run is finished")

	events, err := c.Kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "WorkloadRebalancer", "involvedObject.name": name, "involvedObject.uid": string(rb.UID),
	}.String()})
	require.NoError(t, err)
	messages := map[string]string{}
	for _, e := range events.Items {
		messages[e.Reason] = e.Message
	}
	assert.Equal(t, "Paused after step 1 of 2 (1 of 3 workloads); waiting for `kubectl rebalance approve "+name+"`", messages[run.ReasonPaused])
	assert.Contains(t, messages[run.ReasonApproved], "Step 1 approved by "+a.By)
}
