package failback

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestFailbackStatusDuringTheWindow runs the seed story with the daemon in
// the cluster and asks `kubectl rebalance failback status`, as a person on
// another machine would, what it sees: member1 failed with the workload it
// displaced; then member1 recovering, with the time left in its
// stabilization window counting down; then the failback finished and
// member1 cooling down, and the failback's history on its record.
func TestFailbackStatusDuringTheWindow(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "failback-status"
	// Long enough to ask twice within it.
	const statusWindow = 45 * time.Second
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	rt.Deployments(ctx, t, c, ns, "shown")

	d := startDaemon(t, cp, "-n", ns, "--stabilization-window", statusWindow.String(), "--leader-elect-identity", "status")
	d.waitLog(t, "acting on recoveries", time.Minute)
	holder := "kubectl-rebalance/status"

	// status asks until the daemon's view satisfies ok, and returns it.
	status := func(what string, ok func(*cmd.FailbackStatus, failback.ClusterView) bool) (*cmd.FailbackStatus, failback.ClusterView) {
		t.Helper()
		var (
			got    cmd.FailbackStatus
			member failback.ClusterView
			last   string
		)
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			res := fixtures.RunPlugin(t, cp.Kubeconfig, "failback", "status", "-o", "json")
			if res.Code != cmd.ExitOK {
				return false, fmt.Errorf("failback status exited %d: %s", res.Code, res.Stderr)
			}
			last = res.Stdout
			got = cmd.FailbackStatus{}
			if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil {
				return false, err
			}
			if got.Daemon == nil || got.Daemon.Holder != holder {
				return false, nil
			}
			for _, v := range got.Clusters {
				if v.Name == "member1" {
					member = v
					return ok(&got, v), nil
				}
			}
			return false, nil
		})
		require.NoError(t, err, "failback status never showed %s; last:\n%s", what, last)
		return &got, member
	}

	fixtures.Failover(ctx, t, c, ns, "shown-deployment")
	_, failed := status("member1 failed, holding the displaced workload", func(_ *cmd.FailbackStatus, v failback.ClusterView) bool {
		return v.State == failback.StateFailed && v.Displaced == 1
	})
	assert.Contains(t, failed.Detail, "NoExecute")
	require.Len(t, failed.Workloads, 1)
	assert.Equal(t, rt.Deploy(ns, "shown"), failed.Workloads[0].Workload)
	assert.Equal(t, ns+"/shown-deployment", failed.Workloads[0].Binding)

	recovered := recoverMember1(ctx, t, c)
	got, first := status("member1 recovering", func(_ *cmd.FailbackStatus, v failback.ClusterView) bool {
		return v.State == failback.StateRecovering
	})
	require.NotNil(t, first.TimeLeft)
	assert.Positive(t, first.TimeLeft.Duration, "asked inside the window")
	assert.LessOrEqual(t, first.TimeLeft.Duration, statusWindow)
	assert.Equal(t, "stabilization window "+statusWindow.String(), first.Detail)
	assert.Equal(t, 1, first.Displaced, "still displaced until its failback")
	assert.Equal(t, statusWindow, got.Daemon.Window.Duration)
	assert.Equal(t, holder, got.Daemon.Leader)
	assert.False(t, got.Daemon.Stale)
	t.Logf("member1 recovered at %s; %s left in its window", recovered.Format(time.RFC3339), first.TimeLeft.Duration)

	// The table a person reads says the same.
	table := fixtures.RunPlugin(t, cp.Kubeconfig, "failback", "status")
	require.Equal(t, cmd.ExitOK, table.Code)
	line := fixtures.SplitCells(fixtures.TableLine(t, table.Stdout, "member1"))
	require.GreaterOrEqual(t, len(line), 5)
	assert.Equal(t, []string{"member1", "Recovering"}, line[:2])
	assert.NotEqual(t, "<none>", line[3], "TIME-LEFT")
	assert.Contains(t, table.Stderr, "failback daemon "+holder+": view published")

	// Later in the same window, less is left.
	time.Sleep(3 * time.Second)
	_, second := status("member1 still recovering", func(_ *cmd.FailbackStatus, v failback.ClusterView) bool {
		return v.State == failback.StateRecovering && v.TimeLeft != nil
	})
	assert.Less(t, second.TimeLeft.Duration, first.TimeLeft.Duration, "the time left counts down")

	// Once the window is over the failback runs; afterwards member1 cools
	// down and the record is listed as finished.
	rec := waitRecord(ctx, t, c, "member1", 3*time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool { return rb.Status.FinishTime != nil })
	assert.False(t, rec.CreationTimestamp.Time.Before(recovered.Add(statusWindow-time.Second)), "the failback waited for the window")
	got, after := status("member1 cooling down after its failback", func(s *cmd.FailbackStatus, v failback.ClusterView) bool {
		return v.State == failback.StateCoolingDown && len(s.Failbacks) > 0 && s.Failbacks[0].State == failback.RecordFinished
	})
	require.NotNil(t, after.TimeLeft)
	assert.Positive(t, after.TimeLeft.Duration)
	assert.Equal(t, 0, after.Displaced, "back on member1")
	assert.Equal(t, rec.Name, got.Failbacks[0].Name)
	assert.Equal(t, 1, got.Failbacks[0].Successful)

	// The failback's run is a recorded run like any: its history is on its
	// record, from the daemon.
	waitEvent(ctx, t, c, metav1.NamespaceDefault, "WorkloadRebalancer", rec.Name, run.ReasonStarted, recovered)
	moved := waitEvent(ctx, t, c, metav1.NamespaceDefault, "WorkloadRebalancer", rec.Name, run.ReasonRescheduled, recovered)
	assert.Contains(t, moved.Message, "Deployment "+ns+"/shown rescheduled: {member2:3} -> ")
	waitEvent(ctx, t, c, metav1.NamespaceDefault, "WorkloadRebalancer", rec.Name, run.ReasonFinished, recovered)
}
