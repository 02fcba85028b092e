package failback

import (
	"os"
	"syscall"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// resultOf is the result a record holds for the Deployment ns/name, and
// whether the record lists it at all.
func resultOf(rb *appsv1alpha1.WorkloadRebalancer, ns, name string) (appsv1alpha1.RebalanceResult, bool) {
	for _, o := range rb.Status.ObservedWorkloads {
		if o.Workload == rt.Deploy(ns, name) {
			return o.Result, true
		}
	}
	return "", false
}

// triggered waits until the failback record of member1 says the trigger of
// the Deployment ns/name is written, and returns the record.
func triggered(t *testing.T, c *fixtures.Clients, ns, name string) *appsv1alpha1.WorkloadRebalancer {
	t.Helper()
	return waitRecord(fixtures.TestContext(t), t, c, "member1", 3*time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool {
		r, _ := resultOf(rb, ns, name)
		return r == appsv1alpha1.RebalanceSuccessful
	})
}

// TestFailbackInterrupted stops the daemon, the built binary, in the middle
// of a failback's waves (one workload at a time; a-stuck and c-stuck never
// get ready, and their 10m progress deadline is far away): SIGTERM while
// a-stuck is in flight, then SIGINT to the daemon that resumes the record,
// while c-stuck is. Each time the daemon starts no further workload, exits
// 0 long before the deadline, and says what it left: its log, a
// FailbackStopped event on the Cluster and the record, whose pending
// workloads were never triggered.
func TestFailbackInterrupted(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "failback-interrupt"
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	workloads(ctx, t, c, ns, "a-stuck", "b-open", "c-stuck", "d-open")
	triggers := watchTriggers(t, c, ns)
	binary := rt.Binary(t)
	// The one-write failback (--max-unavailable=100%): these tests stop the
	// daemon while a triggered workload waits for replicas that never get
	// ready; moving make-before-break, that workload would never be
	// released at all (its staged replicas never ready).
	flags := []string{"-n", ns, "--stabilization-window", window.String(), "--max-in-flight", "1", "--progress-deadline", "10m", "--max-unavailable=100%"}

	first := startProcess(t, cp, binary, "interrupt-1", flags...)
	first.waitLog(t, "acting on recoveries", time.Minute)
	fixtures.Failover(ctx, t, c, ns, "a-stuck-deployment", "b-open-deployment", "c-stuck-deployment", "d-open-deployment")
	breakPods(ctx, t, c, ns, "a-stuck", "c-stuck")
	recovered := recoverMember1(ctx, t, c)

	// SIGTERM while a-stuck waits for its replicas.
	rec := triggered(t, c, ns, "a-stuck")
	first.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, first.wait(t, 2*time.Minute), "SIGTERM ends the daemon without waiting for the progress deadline")
	stopped := first.lastLogged(t, "failback stopped")
	assert.Equal(t, failback.ResultStopped, stopped["result"])
	assert.EqualValues(t, 0, stopped["done"])
	assert.EqualValues(t, 0, stopped["failed"])
	assert.EqualValues(t, 4, stopped["pending"], "a-stuck was cut short in flight, the three others never started")
	assert.Equal(t, "the daemon is stopping", stopped["aborted"])
	first.lastLogged(t, "released the lease")
	first.lastLogged(t, "stopped")
	event := waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonStopped, recovered)
	assert.Equal(t, corev1.EventTypeWarning, event.Type)
	assert.Contains(t, event.Message, "stopped: the daemon is stopping; 0 workload(s) done, 0 failed, 4 pending in workloadrebalancer "+rec.Name)

	// The record lists a workload once it started (docs/waves.md); the
	// four the failback set out to move are in its annotation.
	rec = rt.Rebalancer(ctx, t, c, rec.Name)
	require.NotNil(t, rec)
	assert.Equal(t, []appsv1alpha1.ObservedWorkload{
		rt.Observed(rt.Deploy(ns, "a-stuck"), appsv1alpha1.RebalanceSuccessful, ""),
	}, rec.Status.ObservedWorkloads)
	planned, ok := failback.Planned(rec)
	require.True(t, ok, "the record lists the failback's workloads: %v", rec.Annotations)
	assert.ElementsMatch(t, []rebalance.Workload{rt.Deploy(ns, "a-stuck"), rt.Deploy(ns, "b-open"), rt.Deploy(ns, "c-stuck"), rt.Deploy(ns, "d-open")}, planned)
	// The status of what it lists may be complete (Karmada's rules); the
	// ttl comes only once every workload is listed, so nothing sweeps it.
	assert.Nil(t, rec.Spec.TTLSecondsAfterFinished, "the ttl comes once every workload is listed")
	assert.Len(t, triggers.triggers("a-stuck-deployment"), 1)
	for _, name := range []string{"b-open", "c-stuck", "d-open"} {
		assert.Empty(t, triggers.triggers(name+"-deployment"), "%s was never started", name)
	}

	// The next daemon resumes the record; SIGINT while c-stuck is in flight.
	second := startProcess(t, cp, binary, "interrupt-2", flags...)
	rec = triggered(t, c, ns, "c-stuck")
	resumed := second.lastLogged(t, "resuming an unfinished failback")
	assert.Equal(t, rec.Name, resumed["record"])
	second.signal(t, os.Interrupt)
	require.Equal(t, 0, second.wait(t, 2*time.Minute), "SIGINT ends the daemon without waiting for the progress deadline")
	stopped = second.lastLogged(t, "failback stopped")
	assert.Equal(t, failback.ResultStopped, stopped["result"])
	assert.EqualValues(t, 1, stopped["done"], "b-open")
	assert.EqualValues(t, 0, stopped["failed"])
	assert.EqualValues(t, 2, stopped["pending"], "c-stuck cut short in flight, d-open never started")
	assert.EqualValues(t, 1, stopped["triggeredBefore"], "a-stuck, triggered by the first daemon")
	second.lastLogged(t, "released the lease")

	rec = rt.Rebalancer(ctx, t, c, rec.Name)
	require.NotNil(t, rec)
	assert.Equal(t, []appsv1alpha1.ObservedWorkload{
		rt.Observed(rt.Deploy(ns, "a-stuck"), appsv1alpha1.RebalanceSuccessful, ""),
		rt.Observed(rt.Deploy(ns, "b-open"), appsv1alpha1.RebalanceSuccessful, ""),
		rt.Observed(rt.Deploy(ns, "c-stuck"), appsv1alpha1.RebalanceSuccessful, ""),
	}, rec.Status.ObservedWorkloads, "d-open never started: the record does not list it")
	for _, name := range []string{"a-stuck", "b-open", "c-stuck"} {
		assert.Len(t, triggers.triggers(name+"-deployment"), 1, "%s is triggered once", name)
	}
	assert.Empty(t, triggers.triggers("d-open-deployment"))
	assert.Len(t, failbackRecords(ctx, t, c, "member1"), 1, "one record for the recovery")
}

// TestFailbackResumeAfterKill kills the daemon (SIGKILL, as a crash or an
// OOM kill does) while the first of three workloads is in flight, and starts
// a new one: it waits for the dead daemon's Lease, takes over, resumes the
// same record with the two workloads not yet triggered, and triggers none
// of the three twice.
func TestFailbackResumeAfterKill(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "failback-resume"
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	workloads(ctx, t, c, ns, "a-stuck", "b-open", "c-open")
	triggers := watchTriggers(t, c, ns)
	binary := rt.Binary(t)
	// The one-write failback (--max-unavailable=100%): these tests stop the
	// daemon while a triggered workload waits for replicas that never get
	// ready; moving make-before-break, that workload would never be
	// released at all (its staged replicas never ready).
	flags := []string{"-n", ns, "--stabilization-window", window.String(), "--max-in-flight", "1", "--progress-deadline", "10m", "--max-unavailable=100%"}

	first := startProcess(t, cp, binary, "resume-1", flags...)
	first.waitLog(t, "acting on recoveries", time.Minute)
	fixtures.Failover(ctx, t, c, ns, "a-stuck-deployment", "b-open-deployment", "c-open-deployment")
	breakPods(ctx, t, c, ns, "a-stuck")
	recovered := recoverMember1(ctx, t, c)

	rec := triggered(t, c, ns, "a-stuck")
	first.signal(t, syscall.SIGKILL)
	first.wait(t, time.Minute)
	assert.Empty(t, first.logged("failback stopped"), "a killed daemon says nothing more")
	require.Len(t, triggers.triggers("a-stuck-deployment"), 1)
	before := triggers.triggers("a-stuck-deployment")[0]

	second := startProcess(t, cp, binary, "resume-2", append(flags, "--metrics-bind-address", "127.0.0.1:0")...)
	// Finished: every workload listed (the ttl is set then) and recorded.
	rec = rt.WaitRebalancer(ctx, t, c, rec.Name, 3*time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool {
		return rb != nil && rb.Status.FinishTime != nil && rb.Spec.TTLSecondsAfterFinished != nil
	})
	resumed := second.lastLogged(t, "resuming an unfinished failback")
	assert.Equal(t, rec.Name, resumed["record"])
	assert.Equal(t, []appsv1alpha1.ObservedWorkload{
		rt.Observed(rt.Deploy(ns, "a-stuck"), appsv1alpha1.RebalanceSuccessful, ""),
		rt.Observed(rt.Deploy(ns, "b-open"), appsv1alpha1.RebalanceSuccessful, ""),
		rt.Observed(rt.Deploy(ns, "c-open"), appsv1alpha1.RebalanceSuccessful, ""),
	}, rec.Status.ObservedWorkloads)
	for _, name := range []string{"b-open", "c-open"} {
		_, err := c.WaitForPlacement(ctx, ns, name+"-deployment", 2*time.Minute, fixtures.TutorialSplits...)
		require.NoError(t, err, "%s is back on member1", name)
	}
	finished := waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonFinished, recovered)
	assert.Equal(t, corev1.EventTypeNormal, finished.Type)
	assert.Contains(t, finished.Message, "2 workload(s) rebalanced (1 more triggered before this failback was resumed), recorded as workloadrebalancer "+rec.Name)
	done := second.lastLogged(t, "failback finished")
	assert.Equal(t, failback.ResultSucceeded, done["result"])
	assert.EqualValues(t, 2, done["done"], "b-open and c-open")
	assert.EqualValues(t, 1, done["triggeredBefore"], "a-stuck, by the killed daemon")

	assert.Equal(t, []metav1.Time{before}, triggers.triggers("a-stuck-deployment"), "a-stuck is not triggered again")
	for _, name := range []string{"b-open", "c-open"} {
		assert.Len(t, triggers.triggers(name+"-deployment"), 1, "%s is triggered once", name)
	}
	assert.Len(t, failbackRecords(ctx, t, c, "member1"), 1, "one record for the recovery")
	metrics := scrape(t, "http://"+second.lastLogged(t, "serving metrics")["address"].(string)+"/metrics")
	assert.Contains(t, metrics, `kubectl_rebalance_failback_failbacks_total{cluster="member1",result="succeeded"} 1`)
	assert.Contains(t, metrics, `kubectl_rebalance_failback_workloads_failed_back_total{cluster="member1"} 2`)
}
