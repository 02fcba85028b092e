package waves

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/watch"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// failedOverApps makes Deployments over member1 and member2 whose pods
// get ready 4 s after they start, and fails member1 over until Karmada
// moved them all to member2, then lets it recover: a rebalance then moves
// replicas back, make-before-break (held, staging, settling).
func failedOverApps(ctx context.Context, t *testing.T, c *fixtures.Clients, ns string, apps []string) {
	t.Helper()
	fixtures.TestNamespace(ctx, t, c, ns)
	bindings := make([]string, len(apps))
	for i, app := range apps {
		d := fixtures.Deployment(ns, app, 3)
		d.Spec.Template.Annotations = map[string]string{harness.ReadyAfterAnnotation: "4s"}
		_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
		bindings[i] = app + "-deployment"
	}
	_, err := c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, "steer", "apps/v1", "Deployment", apps, []string{"member1", "member2"}), metav1.CreateOptions{})
	require.NoError(t, err)
	for _, b := range bindings {
		_, err := c.WaitForPlacement(ctx, ns, b, 2*time.Minute, fixtures.TutorialSplits...)
		require.NoError(t, err)
	}
	fixtures.Failover(ctx, t, c, ns, bindings...)
	require.NoError(t, c.SetClusterTaint(ctx, "member1", false))
}

// stateOrder ranks the states of the live view in the order a workload
// goes through them.
func stateOrder(s string) int { return slices.Index(watch.States, watch.State(s)) }

// watchedStates reads, from the output of `get NAME -w`, the states each
// workload was shown in, in order.
func watchedStates(t *testing.T, stdout string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, line := range strings.Split(stdout, "\n") {
		cells := strings.Fields(line)
		if len(cells) < 3 || !strings.HasPrefix(cells[1], "deployment.apps/") {
			continue
		}
		app := strings.TrimPrefix(cells[1], "deployment.apps/")
		if states := out[app]; len(states) == 0 || states[len(states)-1] != cells[2] {
			out[app] = append(out[app], cells[2])
		}
	}
	return out
}

// TestWatchFollowsWavedRun follows a recorded waved run, one workload at a
// time, with `get NAME -w` started once the record exists: every workload
// is shown waiting first and done last, its states in the order the moves
// go through them, a move under way is seen held or staging from the
// binding's ledger, and the watch ends with the same table as `get NAME`.
func TestWatchFollowsWavedRun(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name = "steer-watch", "steer-watch"
	apps := names("app", 3)
	failedOverApps(ctx, t, c, ns, apps)
	rt.DeleteRebalancerAfter(t, c, name)

	run := rt.Start(t, cp, append([]string{"-n", ns, "--name", name, "--max-in-flight", "1", "--pause", "2s"}, deployArgs(apps)...)...)
	rt.WaitRebalancer(ctx, t, c, name, time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool { return rb != nil })
	watched := rt.Start(t, cp, "get", name, "-w")

	res := run.Wait(t, 3*time.Minute)
	require.Equal(t, cmd.ExitOK, res.Code)
	w := watched.Wait(t, time.Minute)
	require.Equal(t, cmd.ExitOK, w.Code, "the watch ends once the run is finished")

	states := watchedStates(t, w.Stdout)
	moving := false
	for _, app := range apps {
		seen := states[app]
		require.NotEmpty(t, seen, app)
		assert.Equal(t, "done", seen[len(seen)-1], "%s ends done: %v", app, seen)
		for i := 1; i < len(seen); i++ {
			assert.Less(t, stateOrder(seen[i-1]), stateOrder(seen[i]), "%s: states in order: %v", app, seen)
		}
		if slices.Contains(seen, "held") || slices.Contains(seen, "staging") {
			moving = true
		}
	}
	// The first workload may be under way before the watch starts; the last
	// one waits for two others.
	assert.Equal(t, "waiting", states[apps[2]][0], "the last workload waits for its turn: %v", states[apps[2]])
	assert.True(t, moving, "a move under way is shown from its binding's ledger: %v", states)
	assert.Contains(t, w.Stderr, "workloadrebalancer "+name+": 3 workloads (3 done); waiting for nothing: the run is finished\n")
	// The final table is get NAME's.
	final := w.Stdout[strings.LastIndex(w.Stdout, "WORKLOAD"):]
	assert.Regexp(t, `^WORKLOAD\s+RESULT\s+REASON\s+IN-SPEC\n`, final)
	for _, app := range apps {
		assert.Contains(t, fixtures.TableLine(t, final, "deployment.apps/"+app), "Successful")
	}
}

// TestAbortThenResume aborts a recorded waved run from a second process
// once its first workload is recorded: the run stops starting workloads,
// says who aborted it and exits 3; the record says so (and `get` shows
// it); `resume` clears the mark and finishes the run without triggering a
// finished workload again.
func TestAbortThenResume(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name = "steer-abort", "steer-abort"
	apps := names("app", 4)
	failedOverApps(ctx, t, c, ns, apps)
	rt.DeleteRebalancerAfter(t, c, name)

	p := rt.StartBinary(t, cp, append([]string{"-n", ns, "--name", name, "--max-in-flight", "1", "--pause", "5s"}, deployArgs(apps)...)...)
	rt.WaitRebalancer(ctx, t, c, name, 2*time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool {
		return rb != nil && len(rb.Status.ObservedWorkloads) > 0 && rb.Status.ObservedWorkloads[0].Result == appsv1alpha1.RebalanceSuccessful
	})
	aborted := rt.Rebalance(t, cp, "abort", name)
	require.Equal(t, cmd.ExitOK, aborted.Code)
	assert.Equal(t, "workloadrebalancer.apps.karmada.io/"+name+" aborted\n", aborted.Stdout)
	again := rt.Rebalance(t, cp, "abort", name)
	require.Equal(t, cmd.ExitOK, again.Code)
	assert.Contains(t, again.Stderr, "was already aborted by ")

	res := p.Wait(t, 2*time.Minute)
	require.Equal(t, cmd.ExitPending, res.Code)
	assert.Contains(t, res.Stderr, "workloadrebalancer "+name+" was aborted by ")
	assert.Contains(t, res.Stderr, "stopped: aborted by ")
	assert.Contains(t, res.Stderr, "`kubectl rebalance resume "+name+"` continues with them")

	rb := rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rb)
	mark, ok := record.Aborted(rb)
	require.True(t, ok)
	assert.NotEmpty(t, mark.By, "who aborted it")
	assert.NotEqual(t, "0", rb.Annotations[record.UnstartedAnnotation], "workloads were left unstarted")
	require.Less(t, len(rb.Spec.Workloads), len(apps))
	shown := rt.Rebalance(t, cp, "get", name)
	assert.Contains(t, shown.Stderr, "; aborted by "+mark.By)

	before := map[string]metav1.Time{}
	for _, w := range rb.Status.ObservedWorkloads {
		if w.Result == appsv1alpha1.RebalanceSuccessful {
			if b := rt.Binding(ctx, t, c, ns, w.Workload.Name+"-deployment"); b.Spec.RescheduleTriggeredAt != nil && b.Annotations["kubectl-rebalance.io/handover"] == "" {
				before[w.Workload.Name] = *b.Spec.RescheduleTriggeredAt
			}
		}
	}
	resumed := rt.Rebalance(t, cp, "resume", name)
	require.Equal(t, cmd.ExitOK, resumed.Code)
	assert.Contains(t, resumed.Stderr, "the abort by "+mark.String()+" is cleared\n")
	assert.Contains(t, resumed.Stderr, "workloadrebalancer.apps.karmada.io/"+name+" unchanged\n")
	rb = rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rb)
	_, still := record.Aborted(rb)
	assert.False(t, still, "resume clears the abort mark")
	assert.Len(t, rb.Spec.Workloads, len(apps))
	assert.Equal(t, "0", rb.Annotations[record.UnstartedAnnotation])
	for _, o := range rb.Status.ObservedWorkloads {
		assert.Equal(t, appsv1alpha1.RebalanceSuccessful, o.Result, o.Workload.Name)
	}
	for app, at := range before {
		b := rt.Binding(ctx, t, c, ns, app+"-deployment")
		assert.True(t, b.Spec.RescheduleTriggeredAt.Equal(&at), "%s triggered again by resume (%s, then %s)", app, at, b.Spec.RescheduleTriggeredAt)
	}
}

// TestResumeAfterKill kills a recorded waved run with SIGKILL once two
// bindings hold their trigger, and finishes it with `resume NAME` alone
// (no arguments: the record keeps the workloads and the pacing): every
// workload is done, those finished before the kill are not triggered again.
func TestResumeAfterKill(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name = "steer-kill", "steer-kill"
	apps := names("app", 5)
	failedOverApps(ctx, t, c, ns, apps)
	rt.DeleteRebalancerAfter(t, c, name)

	p := rt.StartBinary(t, cp, append([]string{"-n", ns, "--name", name, "--max-in-flight", "1", "--pause", "3s", "--ttl", "600"}, deployArgs(apps)...)...)
	rt.WaitRebalancer(ctx, t, c, name, 2*time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool {
		return rb != nil && len(triggered(ctx, t, c, ns, apps)) >= 2
	})
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGKILL))
	_ = p.Wait(t, time.Minute)

	rb := rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rb)
	require.Less(t, len(rb.Spec.Workloads), len(apps), "killed before every workload was listed")
	assert.Nil(t, rb.Spec.TTLSecondsAfterFinished, "a growing record holds its ttl back")
	before := map[string]metav1.Time{}
	for _, o := range rb.Status.ObservedWorkloads {
		b := rt.Binding(ctx, t, c, ns, o.Workload.Name+"-deployment")
		if o.Result == appsv1alpha1.RebalanceSuccessful && b.Spec.RescheduleTriggeredAt != nil && b.Annotations["kubectl-rebalance.io/handover"] == "" {
			before[o.Workload.Name] = *b.Spec.RescheduleTriggeredAt
		}
	}

	resumed := rt.Rebalance(t, cp, "resume", name, "--run-timeout", "4m", "--wait-ttl=false")
	require.Equal(t, cmd.ExitOK, resumed.Code)
	assert.Contains(t, resumed.Stderr, "workloadrebalancer.apps.karmada.io/"+name+" unchanged\n")
	rb = rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rb)
	assert.Len(t, rb.Spec.Workloads, len(apps))
	require.NotNil(t, rb.Spec.TTLSecondsAfterFinished, "the ttl of the first run is set once every workload is listed")
	assert.Equal(t, int32(600), *rb.Spec.TTLSecondsAfterFinished)
	assert.NotNil(t, rb.Status.FinishTime)
	for _, o := range rb.Status.ObservedWorkloads {
		assert.Equal(t, appsv1alpha1.RebalanceSuccessful, o.Result, o.Workload.Name)
	}
	for _, app := range apps {
		b := rt.Binding(ctx, t, c, ns, app+"-deployment")
		require.NotNil(t, b.Spec.RescheduleTriggeredAt, app)
		assert.Empty(t, b.Annotations["kubectl-rebalance.io/handover"], "%s left held", app)
		if at, ok := before[app]; ok {
			assert.True(t, b.Spec.RescheduleTriggeredAt.Equal(&at), "%s triggered again by resume (%s, then %s)", app, at, b.Spec.RescheduleTriggeredAt)
		}
	}
}
