package failback

import (
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestFailbackSeedStory is the seed tutorial's failover and recovery with
// the daemon running and no other command: member1 is tainted NoExecute and
// the replicas go to member2; the taint is removed; after the stabilization
// window the workload is back on both clusters, recorded as a
// WorkloadRebalancer with the ttl, with events on the Cluster and the
// binding and the metrics counting it.
func TestFailbackSeedStory(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "failback-seed"
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	rt.Deployments(ctx, t, c, ns, "app")
	_, err := c.WaitForPlacement(ctx, ns, "app-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)

	d := startDaemon(t, cp, "-n", ns, "--stabilization-window", window.String(), "--max-in-flight", "2", "--ttl", "600",
		"--leader-elect-identity", "seed", "--metrics-bind-address", "127.0.0.1:0")
	d.waitLog(t, "acting on recoveries", time.Minute)
	metricsURL := "http://" + regexp.MustCompile(`msg="serving metrics".* address=(\S+)`).FindStringSubmatch(d.text())[1] + "/metrics"

	fixtures.Failover(ctx, t, c, ns, "app-deployment")
	assert.Empty(t, failbackRecords(ctx, t, c, "member1"), "no failback while member1 is tainted")
	recovered := recoverMember1(ctx, t, c)

	// The record gets its ttl once every workload of the failback is listed.
	rec := waitRecord(ctx, t, c, "member1", 3*time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool { return rb.Spec.TTLSecondsAfterFinished != nil })
	assert.False(t, rec.CreationTimestamp.Time.Before(recovered.Add(window-time.Second)),
		"the failback waited for the window: recovered at %s, record created at %s", recovered, rec.CreationTimestamp)
	assert.Equal(t, []appsv1alpha1.ObjectReference{rt.Deploy(ns, "app")}, rec.Spec.Workloads)
	require.NotNil(t, rec.Spec.TTLSecondsAfterFinished)
	assert.Equal(t, int32(600), *rec.Spec.TTLSecondsAfterFinished)
	assert.Equal(t, failback.ManagedBy, rec.Labels[failback.LabelManagedBy])
	assert.Equal(t, failback.RecordName("member1", rec.Labels[failback.LabelRecovery]), rec.Name)

	rb, err := c.WaitForPlacement(ctx, ns, "app-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err, "the workload is back on member1 without any command")
	require.NotNil(t, rb.Spec.RescheduleTriggeredAt)
	finished := waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonFinished, recovered)
	assert.Equal(t, corev1.EventTypeNormal, finished.Type)
	assert.Contains(t, finished.Message, "1 workload(s) rebalanced, recorded as workloadrebalancer "+rec.Name)
	waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonWindowStarted, recovered)
	waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonStarted, recovered)
	triggered := waitEvent(ctx, t, c, ns, "ResourceBinding", "app-deployment", failback.ReasonTriggered, recovered)
	assert.Contains(t, triggered.Message, "because cluster member1 recovered (workloadrebalancer "+rec.Name+"); placement {member2:3} -> ")

	rec = rt.WaitRebalancer(ctx, t, c, rec.Name, time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool { return rb.Status.FinishTime != nil })
	assert.Equal(t, []appsv1alpha1.ObservedWorkload{rt.Observed(rt.Deploy(ns, "app"), appsv1alpha1.RebalanceSuccessful, "")}, rec.Status.ObservedWorkloads)

	metrics := scrape(t, metricsURL)
	// A daemon started less than a window after member1 became Ready counts
	// that as a recovery too (with nothing to move).
	assert.Regexp(t, `kubectl_rebalance_failback_recoveries_total\{cluster="member1"\} [1-9]`, metrics)
	assert.Contains(t, metrics, `kubectl_rebalance_failback_failbacks_total{cluster="member1",result="succeeded"} 1`)
	assert.Contains(t, metrics, `kubectl_rebalance_failback_workloads_failed_back_total{cluster="member1"} 1`)
	assert.Contains(t, metrics, `kubectl_rebalance_failback_leader 1`)
}

// TestFailbackFlappingCluster recovers member1, fails it again inside the
// window and recovers it once more: the flap resets the window (an event
// says so), nothing is triggered while it flaps, and exactly one failback
// comes, a full window after the last recovery.
func TestFailbackFlappingCluster(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "failback-flap"
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	readyWorkloads(ctx, t, c, ns, "5s", true, "flappy")

	d := startDaemon(t, cp, "-n", ns, "--stabilization-window", window.String(), "--leader-elect-identity", "flap")
	d.waitLog(t, "acting on recoveries", time.Minute)
	fixtures.Failover(ctx, t, c, ns, "flappy-deployment")

	first := recoverMember1(ctx, t, c)
	d.waitLog(t, "cluster recovered", time.Minute)
	time.Sleep(window / 3)
	require.NoError(t, c.SetClusterTaint(ctx, "member1", true))
	reset := waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonWindowReset, first)
	assert.Equal(t, corev1.EventTypeWarning, reset.Type)
	assert.Contains(t, reset.Message, "failed again during its stabilization window")
	time.Sleep(2 * time.Second)
	assert.Empty(t, failbackRecords(ctx, t, c, "member1"), "nothing triggered while member1 flaps")
	rb := rt.Binding(ctx, t, c, ns, "flappy-deployment")
	assert.Nil(t, rb.Spec.RescheduleTriggeredAt)

	last := recoverMember1(ctx, t, c)
	rec := waitRecord(ctx, t, c, "member1", 3*time.Minute, func(*appsv1alpha1.WorkloadRebalancer) bool { return true })
	assert.False(t, rec.CreationTimestamp.Time.Before(last.Add(window-time.Second)),
		"the window started over at the last recovery (%s); the record was created at %s", last, rec.CreationTimestamp)
	_, err := c.WaitForPlacement(ctx, ns, "flappy-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
	waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonFinished, last)
	assert.Len(t, failbackRecords(ctx, t, c, "member1"), 1, "one failback for the recovery")
}

// TestFailbackFailureBudget fails back two workloads one at a time with
// --max-failures 1. After the failover, a-gated gets a template whose pods
// never get ready (kwok leaves them Pending, as a bad image would); its old
// pods on member2 keep running. Its failback stages replicas on member1
// that never get ready: it fails at its progress deadline (the move undone,
// a-gated left on member2), the budget is spent and the waves stop. b-open is never
// triggered and stays pending in the record, which is marked as stopped by
// the budget and is not resumed by a restarted daemon; the log, the metrics
// and the events on the Cluster and the binding say so.
func TestFailbackFailureBudget(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "failback-budget"
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	workloads(ctx, t, c, ns, "a-gated", "b-open")

	d := startDaemon(t, cp, "-n", ns, "--stabilization-window", window.String(), "--leader-elect-identity", "budget",
		"--max-in-flight", "1", "--max-failures", "1", "--progress-deadline", "15s", "--metrics-bind-address", "127.0.0.1:0")
	d.waitLog(t, "acting on recoveries", time.Minute)
	metricsURL := "http://" + regexp.MustCompile(`msg="serving metrics".* address=(\S+)`).FindStringSubmatch(d.text())[1] + "/metrics"
	fixtures.Failover(ctx, t, c, ns, "a-gated-deployment", "b-open-deployment")
	breakPods(ctx, t, c, ns, "a-gated")
	recovered := recoverMember1(ctx, t, c)

	finished := waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonFinished, recovered)
	assert.Equal(t, corev1.EventTypeWarning, finished.Type)
	assert.Contains(t, finished.Message, "0 workload(s) done, 1 failed")
	failed := waitEvent(ctx, t, c, ns, "ResourceBinding", "a-gated-deployment", failback.ReasonFailed, recovered)
	assert.Equal(t, corev1.EventTypeWarning, failed.Type)
	// The failback moves make-before-break (issue 29): a-gated's staged
	// replicas on member1 never get ready, so at its progress deadline the
	// move is undone before its release and a-gated stays on member2, where
	// its pods run.
	assert.Contains(t, failed.Message, "the gained replicas were not ready before the deadline")
	gated := rt.Binding(ctx, t, c, ns, "a-gated-deployment")
	assert.Equal(t, "{member2:3}", fixtures.Placement(gated.Spec.Clusters), "a-gated's move was undone")
	assert.False(t, gated.Spec.SchedulingSuspended(), "not left suspended")

	records := failbackRecords(ctx, t, c, "member1")
	require.Len(t, records, 1)
	rec := records[0]
	assert.Equal(t, failback.StoppedFailureBudget, rec.Annotations[failback.AnnotationStopped])
	// The record lists the workloads started; b-open, never started, is
	// counted in its unstarted annotation.
	assert.Equal(t, []appsv1alpha1.ObservedWorkload{
		rt.Observed(rt.Deploy(ns, "a-gated"), appsv1alpha1.RebalanceSuccessful, ""),
	}, rec.Status.ObservedWorkloads)
	assert.Equal(t, "1", rec.Annotations[record.UnstartedAnnotation])
	// Stopped for good, it gets the daemon's ttl (--ttl, 86400 by default)
	// when it is marked, before the Finished event, with the status of
	// that spec: it is swept then.
	if assert.NotNil(t, rec.Spec.TTLSecondsAfterFinished, "the record of a failback stopped by its budget gets its ttl") {
		assert.EqualValues(t, 86400, *rec.Spec.TTLSecondsAfterFinished)
	}
	assert.NotNil(t, rec.Status.FinishTime)
	assert.Equal(t, rec.Generation, rec.Status.ObservedGeneration, "the status of the spec with the ttl")
	assert.Nil(t, rt.Binding(ctx, t, c, ns, "b-open-deployment").Spec.RescheduleTriggeredAt, "the budget stopped the waves before b-open")
	assert.Contains(t, d.text(), "failback finished with failures")
	metrics := scrape(t, metricsURL)
	assert.Contains(t, metrics, `kubectl_rebalance_failback_failbacks_total{cluster="member1",result="failed"} 1`)
	assert.Contains(t, metrics, `kubectl_rebalance_failback_workload_failures_total{cluster="member1"} 1`)
	assert.NotContains(t, metrics, `kubectl_rebalance_failback_workloads_failed_back_total{cluster="member1"} 1`)

	// A restart does not resume a failback its budget stopped.
	assert.Equal(t, cmd.ExitOK, d.stop(t))
	again := startDaemon(t, cp, "-n", ns, "--stabilization-window", window.String(), "--leader-elect-identity", "budget-2")
	again.waitLog(t, "acting on recoveries", time.Minute)
	time.Sleep(3 * time.Second)
	assert.NotContains(t, again.text(), "resuming an unfinished failback")
	assert.Nil(t, rt.Binding(ctx, t, c, ns, "b-open-deployment").Spec.RescheduleTriggeredAt)
	after := rt.Rebalancer(ctx, t, c, rec.Name)
	require.NotNil(t, after)
	assert.Equal(t, rec.Status.ObservedWorkloads, after.Status.ObservedWorkloads, "b-open stays pending")
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}
