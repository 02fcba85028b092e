package wavestest

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// FailoverWorkloads is how many workloads FailoverAndRecovery moves back,
// FailoverInFlight how many at a time.
const FailoverWorkloads, FailoverInFlight = 6, 2

// FailoverReadyAfter is how long workload i's pods take to become ready
// once started: 10s to 20s.
func FailoverReadyAfter(i int) time.Duration {
	return time.Duration(10+2*i) * time.Second
}

// FailoverAndRecovery is issue 27's scenario: six Deployments over member1
// and member2 whose pods become ready 10-20 s after they start, member1
// fails (NoExecute taint) until Karmada has moved them all to member2 and
// finished evicting, member1 recovers, and a recorded waved run (two in
// flight) moves them back. It checks that
//   - at most two workloads were between trigger and done at any moment of
//     a watch of their bindings, and the third started only after one was done;
//   - the waves gate on readiness: each workload from the third on was
//     triggered, by the server's clock, at least the ready-after delay after
//     enough earlier ones (their new pods on member1 cannot be ready sooner);
//   - every trigger but the first workload's was written by the run (not by
//     karmada-controller-manager), after the record's creationTimestamp, and
//     answered by the scheduler with member1 back in the placement;
//   - the record's final status: every workload listed and Successful,
//     finishTime set, nothing unstarted, no failure, the ttl set.
//
// controllerOn says whether Karmada's workloadRebalancer controller runs:
// with it off, no trigger at all may be Karmada's.
func FailoverAndRecovery(t *testing.T, cp *harness.ControlPlane, ns string, controllerOn bool) {
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	fixtures.TestNamespace(ctx, t, c, ns)
	apps := make([]string, FailoverWorkloads)
	readyAfter := map[string]time.Duration{}
	for i := range apps {
		apps[i] = fmt.Sprintf("app-%d", i)
		readyAfter[apps[i]+"-deployment"] = FailoverReadyAfter(i)
		d := fixtures.Deployment(ns, apps[i], 3)
		d.Spec.Template.Annotations = map[string]string{harness.ReadyAfterAnnotation: FailoverReadyAfter(i).String()}
		_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, "failover", "apps/v1", "Deployment", apps, []string{"member1", "member2"}), metav1.CreateOptions{})
	require.NoError(t, err)
	bindings := make([]string, len(apps))
	for i, app := range apps {
		bindings[i] = app + "-deployment"
		_, err := c.WaitForPlacement(ctx, ns, bindings[i], 2*time.Minute, fixtures.TutorialSplits...)
		require.NoError(t, err)
	}
	fixtures.Failover(ctx, t, c, ns, bindings...)
	require.NoError(t, c.SetClusterTaint(ctx, "member1", false))

	name := ns
	rt.DeleteRebalancerAfter(t, c, name)
	tl := WatchTimeline(ctx, t, c, ns, true)
	args := []string{"-n", ns, "--name", name, "--max-in-flight", fmt.Sprint(FailoverInFlight), "--ttl", "3600", "--wait-ttl=false", "-o", "wide"}
	for _, app := range apps {
		args = append(args, "deploy/"+app)
	}
	res := rt.Rebalance(t, cp, args...)
	require.Equal(t, cmd.ExitOK, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, fmt.Sprintf("%d workloads: %d successful, 0 failed, 0 pending; %d rescheduled, 0 ignored\n", len(apps), len(apps), len(apps)))

	tl.WaitDone(ctx, t, len(apps))
	for _, m := range tl.Events() {
		t.Logf("watch: %s %s done=%v", m.Seen.Format("15:04:05.000"), m.Binding, m.Done)
	}
	peak, beforeFirstDone := tl.Peak()
	assert.LessOrEqual(t, peak, FailoverInFlight, "at most --max-in-flight between trigger and done")
	assert.LessOrEqual(t, beforeFirstDone, FailoverInFlight, "the third trigger waited for a workload to be done")

	rec := rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rec, "the record is kept (ttl 3600)")
	type start struct {
		binding string
		at      time.Time
	}
	var starts []start
	byController := 0
	for _, b := range bindings {
		rb := rt.Binding(ctx, t, c, ns, b)
		require.NotNil(t, rb.Spec.RescheduleTriggeredAt, b)
		require.NotNil(t, rb.Status.LastScheduledTime, b)
		at := rb.Spec.RescheduleTriggeredAt.Time
		starts = append(starts, start{b, at})
		var managers []string
		for _, mf := range rb.ManagedFields {
			if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), "rescheduleTriggeredAt") {
				managers = append(managers, mf.Manager)
				if strings.Contains(mf.Manager, "controller-manager") {
					byController++
					// The record is created with its first workload only;
					// Karmada's controller may trigger that one, no other.
					require.NotEmpty(t, rec.Spec.Workloads)
					assert.Equal(t, rec.Spec.Workloads[0].Name+"-deployment", b, "a trigger by karmada-controller-manager on a workload the record did not start with")
				}
			}
		}
		t.Logf("%s: trigger %s (record created %s), last scheduled %s, placement %s, trigger owned by %v",
			b, at.Format(time.RFC3339), rec.CreationTimestamp.Format(time.RFC3339), rb.Status.LastScheduledTime.Format(time.RFC3339),
			fixtures.Placement(rb.Spec.Clusters), managers)
		assert.Len(t, managers, 1, "%s: one writer of the trigger", b)
		assert.False(t, rb.Status.LastScheduledTime.Before(rb.Spec.RescheduleTriggeredAt), "%s: the scheduler answered the trigger", b)
		assert.Contains(t, fixtures.Placement(rb.Spec.Clusters), "member1:", "%s: moved back to the recovered member1", b)
	}
	sort.SliceStable(starts, func(i, j int) bool { return starts[i].at.Before(starts[j].at) })
	for k, s := range starts {
		if k < FailoverInFlight {
			// The first wave starts with the record, in its creation second.
			continue
		}
		// Every later workload was triggered by the run when a slot freed,
		// never at the record's creation.
		assert.True(t, s.at.After(rec.CreationTimestamp.Time), "%s triggered at %s, not after the record's creation (%s)", s.binding, s.at, rec.CreationTimestamp)
		// The k-th start needs k-FailoverInFlight+1 earlier workloads done,
		// each no sooner than its trigger plus its pods' ready-after (a
		// trigger is stored to the second: one second of slack).
		ready := 0
		for _, e := range starts[:k] {
			if !e.at.Add(readyAfter[e.binding] - time.Second).After(s.at) {
				ready++
			}
		}
		assert.GreaterOrEqual(t, ready, k-FailoverInFlight+1,
			"%s started at %s before enough earlier workloads could be ready: the waves did not wait for readiness", s.binding, s.at)
	}
	if controllerOn {
		assert.LessOrEqual(t, byController, 1, "Karmada's controller triggered workloads of the waves (only the record's first may be its)")
	} else {
		assert.Zero(t, byController, "no controller runs, yet karmada-controller-manager wrote a trigger")
	}

	assert.Len(t, rec.Spec.Workloads, len(apps), "every workload listed")
	require.Len(t, rec.Status.ObservedWorkloads, len(apps))
	for _, o := range rec.Status.ObservedWorkloads {
		assert.Equal(t, appsv1alpha1.RebalanceSuccessful, o.Result, o.Workload.Name)
	}
	assert.NotNil(t, rec.Status.FinishTime, "finished")
	assert.Equal(t, rec.Generation, rec.Status.ObservedGeneration)
	assert.Equal(t, "0", rec.Annotations[record.UnstartedAnnotation], "every workload started")
	assert.Zero(t, record.FailuresSpent(rec), "no failure counted")
	require.NotNil(t, rec.Spec.TTLSecondsAfterFinished, "the ttl is set once every workload is listed")
	assert.EqualValues(t, 3600, *rec.Spec.TTLSecondsAfterFinished)
}
