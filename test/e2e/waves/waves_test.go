package waves

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestWavesNeverMoreThanMaxInFlight rebalances six workloads two at a time
// and follows their bindings meanwhile: never more than two are between
// their trigger and done (rescheduled, replicas ready), and the first done
// comes before the third trigger.
func TestWavesNeverMoreThanMaxInFlight(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "waves-window"
	apps := names("app", 6)
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, apps...)
	tl := watchTimeline(ctx, t, c, ns, true)

	res := rt.Rebalance(t, cp, append([]string{"-n", ns, "--max-in-flight", "2", "-o", "wide"}, deployArgs(apps)...)...)
	require.Equal(t, cmd.ExitOK, res.Code)
	assert.Contains(t, res.Stderr, "about to rebalance 6 workloads (6 deployment.apps) in 1 namespace(s): in waves of at most 2 in flight, each done when rescheduled and ready within 10m0s; Ctrl-C stops starting new ones\n")
	assert.Contains(t, res.Stderr, "6 workloads: 6 successful, 0 failed, 0 pending; 6 rescheduled, 0 ignored\n")
	for _, app := range apps {
		line := fixtures.TableLine(t, res.Stdout, "deployment.apps/"+app)
		assert.Contains(t, line, "replicas ready: member", app)
	}

	tl.WaitDone(ctx, t, len(apps))
	peak, beforeFirstDone := tl.Peak()
	assert.LessOrEqual(t, peak, 2, "at most --max-in-flight between trigger and done")
	assert.GreaterOrEqual(t, peak, 1)
	assert.LessOrEqual(t, beforeFirstDone, 2, "the third trigger waited for a workload to be done")
}

// TestWavesReadinessGate rebalances a workload whose pods never get ready in
// any member (an image that cannot be pulled, as far as Karmada and its
// estimators can tell: the pods are placed and stay Pending) before one
// that can, one at a time: the first is rescheduled but never ready, so it fails at its
// progress deadline (DeadlineExceeded, NotReady) and only then does the
// second start. With --wait-ready=false, rescheduled is enough.
func TestWavesReadinessGate(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "waves-ready"
	fixtures.TestNamespace(ctx, t, c, ns)
	gated := fixtures.Deployment(ns, "gated", 2)
	// Not a nodeSelector that matches no node: the members' estimators
	// would tell karmada-scheduler there is no room, and it would not
	// schedule the workload at all.
	gated.Spec.Template.Annotations = map[string]string{harness.NeverReadyAnnotation: "true"}
	_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, gated, metav1.CreateOptions{})
	require.NoError(t, err)
	rt.Deployments(ctx, t, c, ns, "open")
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, "gated", "apps/v1", "Deployment", []string{"gated"}, []string{"member1", "member2"}), metav1.CreateOptions{})
	require.NoError(t, err)
	fixtures.WaitScheduled(ctx, t, c, ns, "gated-deployment")

	res := rt.Rebalance(t, cp, "-n", ns, "deploy/open", "deploy/gated", "--max-in-flight", "1", "--progress-deadline", "15s", "-o", "wide")
	require.Equal(t, cmd.ExitFailed, res.Code)
	gatedRow := fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "deployment.apps/gated"))
	assert.Equal(t, []string{"Successful", "DeadlineExceeded"}, gatedRow[1:3])
	assert.Contains(t, gatedRow, "NotReady")
	openRow := fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "deployment.apps/open"))
	assert.Equal(t, []string{"Successful", "Scheduled"}, openRow[1:3])
	assert.Contains(t, res.Stderr, "2 workloads: 2 successful, 0 failed, 0 pending; 1 rescheduled, 0 ignored, 1 past the progress deadline\n")

	// CRD order: gated before open; open started only once gated's
	// deadline had passed.
	g := rt.Binding(ctx, t, c, ns, "gated-deployment")
	o := rt.Binding(ctx, t, c, ns, "open-deployment")
	require.NotNil(t, g.Spec.RescheduleTriggeredAt)
	require.NotNil(t, o.Spec.RescheduleTriggeredAt)
	assert.False(t, o.Spec.RescheduleTriggeredAt.Time.Before(g.Spec.RescheduleTriggeredAt.Add(14*time.Second)),
		"open triggered at %s, gated at %s", o.Spec.RescheduleTriggeredAt, g.Spec.RescheduleTriggeredAt)

	time.Sleep(1100 * time.Millisecond)
	scheduledOnly := rt.Rebalance(t, cp, "-n", ns, "deploy/gated", "--max-in-flight", "1", "--progress-deadline", "15s", "--wait-ready=false")
	require.Equal(t, cmd.ExitOK, scheduledOnly.Code)
	assert.Contains(t, scheduledOnly.Stderr, "1 workload: 1 successful, 0 failed, 0 pending; 1 rescheduled, 0 ignored\n")
}

// TestWavesFailureBudget rebalances three workloads whose clusters no
// longer match their policy (a real NoClusterFit) before two that are
// fine, one at a time, with --max-failures 2: after the second failure no
// workload is started, the rest stay pending without a trigger, the command
// says why it stopped and exits 2.
func TestWavesFailureBudget(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, label = "waves-budget", "rebalance.test/waves-budget"
	fixtures.TestNamespace(ctx, t, c, ns)
	for _, cluster := range []string{"member1", "member2"} {
		setClusterLabel(ctx, t, c, cluster, label, "yes")
		t.Cleanup(func() { setClusterLabel(context.Background(), t, c, cluster, label, "") })
	}
	misfits := names("a-misfit", 3)
	for _, n := range misfits {
		_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, fixtures.Deployment(ns, n, 2), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	policy := fixtures.DynamicWeightPolicy(ns, "misfit", "apps/v1", "Deployment", misfits, nil)
	policy.Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}}}
	_, err := c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	fits := names("b-fit", 2)
	rt.Deployments(ctx, t, c, ns, fits...)
	for _, n := range misfits {
		fixtures.WaitScheduled(ctx, t, c, ns, n+"-deployment")
	}
	// No cluster fits the misfits' policy any more; only a fresh schedule
	// applies the affinity again.
	for _, cluster := range []string{"member1", "member2"} {
		setClusterLabel(ctx, t, c, cluster, label, "")
	}
	time.Sleep(2 * time.Second)

	all := append(append([]string{}, fits...), misfits...)
	res := rt.Rebalance(t, cp, append([]string{"-n", ns, "--max-in-flight", "1", "--max-failures", "2", "-o", "wide"}, deployArgs(all)...)...)
	require.Equal(t, cmd.ExitFailed, res.Code)
	for i, n := range misfits {
		row := fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "deployment.apps/"+n))
		if i < 2 {
			assert.Equal(t, []string{"Successful", "SchedulingFailed"}, row[1:3], n)
			assert.Contains(t, row, "NoClusterFit", n)
			continue
		}
		assert.Equal(t, []string{"Pending", "<none>"}, row[1:3], n)
	}
	for _, n := range fits {
		assert.Contains(t, fixtures.TableLine(t, res.Stdout, "deployment.apps/"+n), "not started: the failure budget (--max-failures) was used up")
	}
	assert.Contains(t, res.Stderr, "stopped: 2 workload(s) failed, which reached --max-failures 2; no further workload was started; none was in flight then, 3 not started (pending)")

	for _, n := range append([]string{misfits[2]}, fits...) {
		assert.Nil(t, rt.Binding(ctx, t, c, ns, n+"-deployment").Spec.RescheduleTriggeredAt, "%s not triggered", n)
	}
	for _, n := range misfits[:2] {
		b := rt.Binding(ctx, t, c, ns, n+"-deployment")
		assert.True(t, meta.IsStatusConditionFalse(b.Status.Conditions, workv1alpha2.Scheduled), n)
	}
}

// TestWavesSIGINTThenResume interrupts a recorded waved run of the built
// binary with SIGINT and runs the same command again.
func TestWavesSIGINTThenResume(t *testing.T) {
	interruptThenResume(t, "waves-sigint", os.Interrupt)
}

// TestWavesKillThenResume kills a recorded waved run of the built binary
// with SIGKILL (kill -9: no chance to write anything more) and runs the same
// command again.
func TestWavesKillThenResume(t *testing.T) {
	interruptThenResume(t, "waves-kill", syscall.SIGKILL)
}

// interruptThenResume stops a recorded run with --max-in-flight 2 once three
// bindings hold their trigger, right after a trigger write landed and before
// its answer reached the run, checks the WorkloadRebalancer's status (the
// ledger: no entry is Successful whose binding has no trigger; after kill -9
// the last second of triggers may not be recorded yet), runs the same
// command again and checks that it finishes every workload while each
// binding's trigger was written exactly once over both runs (PATCH requests
// counted by a proxy in front of the Karmada apiserver).
func interruptThenResume(t *testing.T, ns string, sig os.Signal) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	name := ns
	apps := names("app", 10)
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, apps...)
	rt.DeleteRebalancerAfter(t, c, name)
	// A pause of 3s per slot keeps the run going long enough to be stopped
	// in the middle: 10 workloads two at a time take at least 12s.
	args := append([]string{"-n", ns, "--name", name, "--max-in-flight", "2", "--pause", "3s"}, deployArgs(apps)...)

	first, err := cp.StartCountingProxy()
	require.NoError(t, err)
	defer first.Close()
	// The run is stopped at its hardest moment: a trigger write has just
	// landed and its answer is still on the way (held back 300ms), once
	// three bindings hold a trigger. The ledger must still be exact.
	signalled, started := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var p *rt.Process
	first.OnAnswer(func(resp *http.Response) {
		r := resp.Request
		if r.Method != http.MethodPatch || !strings.Contains(r.URL.Path, "/namespaces/"+ns+"/resourcebindings/") || resp.StatusCode != http.StatusOK {
			return
		}
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		n := 0
		for _, b := range list.Items {
			if b.Spec.RescheduleTriggeredAt != nil {
				n++
			}
		}
		if n < 3 {
			return
		}
		once.Do(func() {
			<-started
			_ = p.Cmd.Process.Signal(sig)
			close(signalled)
			time.Sleep(300 * time.Millisecond)
		})
	})
	p = rt.StartBinary(t, cp, append(args, "--kubeconfig", first.Kubeconfig)...)
	close(started)
	select {
	case <-signalled:
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "no wave went by", "stderr so far:\n%s", p.Stderr())
	}
	res := p.Wait(t, time.Minute)

	written := triggered(ctx, t, c, ns, apps)
	require.Less(t, len(written), len(apps), "stopped before the last trigger")
	firstTriggers := map[string]metav1.Time{}
	for app := range written {
		firstTriggers[app] = *rt.Binding(ctx, t, c, ns, app+"-deployment").Spec.RescheduleTriggeredAt
	}
	rb := rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rb, "the record is left in place")
	// Its status may be complete for what it lists; what it does not list
	// yet is counted in an annotation (not written after kill -9).
	assert.NotEqual(t, "0", rb.Annotations[record.UnstartedAnnotation], "not finished")
	// The record grows as the waves start workloads: it lists those
	// started, never one without its trigger (else Karmada's controller
	// would trigger it at the creationTimestamp); after kill -9 the last
	// second of starts may be missing.
	for _, w := range rb.Spec.Workloads {
		assert.True(t, written[w.Name], "%s listed before its trigger was written", w.Name)
	}
	if sig == os.Interrupt {
		require.Len(t, rb.Status.ObservedWorkloads, len(written), "the status is written when the run stops")
	}
	recorded := 0
	for _, o := range rb.Status.ObservedWorkloads {
		if o.Result == appsv1alpha1.RebalanceSuccessful {
			recorded++
			assert.True(t, written[o.Workload.Name], "%s recorded Successful only once its trigger is written", o.Workload.Name)
		}
	}
	if sig == os.Interrupt {
		require.Equal(t, cmd.ExitPending, res.Code)
		assert.Contains(t, res.Stderr, "stopped: interrupted; no further workload was started; ")
		assert.Contains(t, res.Stderr, "workloadrebalancer "+name+" records which workloads were triggered, and none is triggered twice")
		assert.Equal(t, len(written), recorded, "every trigger written is recorded when the run stops")
	}

	second, err := cp.StartCountingProxy()
	require.NoError(t, err)
	defer second.Close()
	later := rt.Rebalance(t, cp, append(args, "--kubeconfig", second.Kubeconfig)...)
	require.Equal(t, cmd.ExitOK, later.Code)
	assert.Contains(t, later.Stderr, "workloadrebalancer.apps.karmada.io/"+name+" unchanged\n")
	rb = rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rb)
	assert.NotNil(t, rb.Status.FinishTime, "finished")
	assert.Equal(t, "0", rb.Annotations[record.UnstartedAnnotation], "every workload started")
	assert.Len(t, rb.Spec.Workloads, len(apps))
	for _, o := range rb.Status.ObservedWorkloads {
		assert.Equal(t, appsv1alpha1.RebalanceSuccessful, o.Result, o.Workload.Name)
	}
	for _, app := range apps {
		b := rt.Binding(ctx, t, c, ns, app+"-deployment")
		require.NotNil(t, b.Spec.RescheduleTriggeredAt, app)
		require.NotNil(t, b.Status.LastScheduledTime, app)
		// Each at the server's time when it started: never before the
		// record, and answered by the scheduler.
		assert.False(t, b.Spec.RescheduleTriggeredAt.Before(&rb.CreationTimestamp), "%s triggered at %s, before the record (%s)", app, b.Spec.RescheduleTriggeredAt, rb.CreationTimestamp)
		assert.False(t, b.Status.LastScheduledTime.Before(b.Spec.RescheduleTriggeredAt), "%s: trigger %s not answered (last scheduled %s)", app, b.Spec.RescheduleTriggeredAt, b.Status.LastScheduledTime)
	}
	// The record's own PATCHes (its spec grows) do not count.
	patches := first.Requests.Count("PATCH /apis/work.karmada.io/") + second.Requests.Count("PATCH /apis/work.karmada.io/")
	t.Logf("requests: first run %s, second run %s", first.Counter, second.Counter)
	// The record's first workload may have been triggered by Karmada's
	// workloadRebalancer controller, before the run's own write, which then
	// found it in place.
	byController := 0
	for _, app := range apps {
		b := rt.Binding(ctx, t, c, ns, app+"-deployment")
		path := "PATCH /apis/work.karmada.io/v1alpha2/namespaces/" + ns + "/resourcebindings/" + app + "-deployment"
		var managers []string
		for _, mf := range b.ManagedFields {
			if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), "rescheduleTriggeredAt") {
				managers = append(managers, mf.Manager+"/"+string(mf.Operation))
				if strings.Contains(mf.Manager, "controller-manager") {
					byController++
				}
			}
		}
		sent := first.Requests.Count(path) + second.Requests.Count(path)
		t.Logf("%s: trigger %s, last scheduled %s, PATCHes %d, trigger owned by %v", app, b.Spec.RescheduleTriggeredAt, b.Status.LastScheduledTime, sent, managers)
		// One trigger per binding: one writer owns it, and a trigger the
		// first run left is the one still there (the run may also have sent
		// a write the interrupt cut short, or lost the race for the record's
		// first workload to Karmada's controller: PATCHes are attempts).
		assert.Len(t, managers, 1, "%s: one writer of the trigger", app)
		if at, ok := firstTriggers[app]; ok {
			assert.True(t, b.Spec.RescheduleTriggeredAt.Equal(&at), "%s: triggered again by the resumed run (%s, then %s)", app, at, b.Spec.RescheduleTriggeredAt)
		}
	}
	assert.LessOrEqual(t, byController, 1, "Karmada's controller triggered workloads of the waves")
	assert.GreaterOrEqual(t, patches+byController, len(apps), "every binding triggered")
}

// triggered returns the workloads whose binding holds a trigger.
func triggered(ctx context.Context, t *testing.T, c *fixtures.Clients, ns string, apps []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, app := range apps {
		if rt.Binding(ctx, t, c, ns, app+"-deployment").Spec.RescheduleTriggeredAt != nil {
			out[app] = true
		}
	}
	return out
}

// TestWavesRescheduledMidRunStillMoved: a workload whose binding is
// scheduled again after a recorded waved run began (its template scaled)
// is still moved when its turn comes: its trigger is written at the
// server's time then, after that schedule, not at the record's
// creationTimestamp, which the scheduler would ignore.
func TestWavesRescheduledMidRunStillMoved(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "waves-midrun"
	apps := names("app", 4)
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, apps...)
	rt.DeleteRebalancerAfter(t, c, ns)

	p := rt.StartBinary(t, cp, append([]string{"-n", ns, "--name", ns, "--max-in-flight", "1", "--pause", "3s", "-o", "wide"}, deployArgs(apps)...)...)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return len(triggered(ctx, t, c, ns, apps)) >= 1, nil
	}), "no workload started; stderr so far:\n%s", p.Stderr())
	rb := rt.Rebalancer(ctx, t, c, ns)
	require.NotNil(t, rb)
	last := apps[len(apps)-1]
	// The last workload is scaled: its binding is scheduled again, after
	// the record was created.
	time.Sleep(1100 * time.Millisecond)
	_, err := c.Kube.AppsV1().Deployments(ns).Patch(ctx, last, types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		b := rt.Binding(ctx, t, c, ns, last+"-deployment")
		return b.Spec.RescheduleTriggeredAt == nil && b.Status.LastScheduledTime != nil && b.Status.LastScheduledTime.After(rb.CreationTimestamp.Time), nil
	}), "the scaled workload was not scheduled again before its turn")
	rescheduled := rt.Binding(ctx, t, c, ns, last+"-deployment").Status.LastScheduledTime

	res := p.Wait(t, 3*time.Minute)
	require.Equal(t, cmd.ExitOK, res.Code, res.Stderr)
	row := fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "deployment.apps/"+last))
	assert.Equal(t, []string{"Successful", "Scheduled"}, row[1:3], res.Stdout)
	b := rt.Binding(ctx, t, c, ns, last+"-deployment")
	require.NotNil(t, b.Spec.RescheduleTriggeredAt)
	assert.True(t, b.Spec.RescheduleTriggeredAt.After(rescheduled.Time), "trigger %s after the schedule of %s", b.Spec.RescheduleTriggeredAt, rescheduled)
	assert.False(t, b.Status.LastScheduledTime.Before(b.Spec.RescheduleTriggeredAt), "the scheduler answered the trigger")
}
