package handover

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/handover/batchtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// assertRecorded checks the run's WorkloadRebalancer: it lists every
// workload, each Successful, and each binding's trigger is the move's
// release, written after the record's creation (Karmada's controller, which
// triggers at the creationTimestamp, did not decide the move).
func assertRecorded(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, record string, names []string) {
	t.Helper()
	wr, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Get(ctx, record, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Len(t, wr.Spec.Workloads, len(names), "the record lists every workload")
	results := map[string]appsv1alpha1.RebalanceResult{}
	for _, o := range wr.Status.ObservedWorkloads {
		results[o.Workload.Name] = o.Result
	}
	for _, n := range names {
		assert.Equal(t, appsv1alpha1.RebalanceSuccessful, results[n], "%s in the record's status", n)
		rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, n+"-deployment", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, rb.Spec.RescheduleTriggeredAt)
		assert.True(t, rb.Spec.RescheduleTriggeredAt.After(wr.CreationTimestamp.Time), "%s: trigger %s is the release's, after the record's creation %s",
			n, rb.Spec.RescheduleTriggeredAt, wr.CreationTimestamp)
	}
}

// TestRecordedRebalanceBackKeepsReplicasReady is the seed's rebalance back
// recorded as a WorkloadRebalancer (--name) with Karmada's
// workloadRebalancer controller on: the record's first workload is held
// before the record exists, so the controller's trigger at the
// creationTimestamp moves nothing, and the move stays make-before-break; the
// same recorded run with --max-unavailable=100% moves in one write and
// loses ready replicas.
func TestRecordedRebalanceBackKeepsReplicasReady(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-recorded", "app"
	fixtures.TestNamespace(ctx, t, c, ns)
	seedWorkload(ctx, t, c, ns, name)

	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)
	mbb := moveBack(ctx, t, cp, c, ns, name, 3, twoMembers, "--name", "handover-recorded-mbb")
	assert.GreaterOrEqual(t, mbb.min, int32(3), "make-before-break kept every replica ready in a recorded run")
	assert.Contains(t, mbb.out, "made before break")
	assertRecorded(ctx, t, c, ns, "handover-recorded-mbb", []string{name})

	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)
	one := moveBack(ctx, t, cp, c, ns, name, 3, twoMembers, "--name", "handover-recorded-one", "--max-unavailable=100%")
	assert.Less(t, one.min, int32(3), "the one-write recorded move loses ready replicas while the new ones start")
}

// TestRecordedWavesKeepReplicasReady moves six one-replica workloads back
// to member1 in a waved, recorded run (--max-in-flight 2 --name): the record
// grows as the moves release, and no workload is ever without a ready
// replica.
func TestRecordedWavesKeepReplicasReady(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns = "handover-recorded-waves"
	names := batchtest.Fleet(ctx, t, cp, c, ns, 6, readyAfter)

	const record = "handover-recorded-waves"
	batchtest.FailedOver(ctx, t, cp, c, ns, names)
	mbb := batchtest.Move(ctx, t, cp, c, ns, names, "--max-in-flight", "2", "--timeout", "10m", "--name", record)
	assert.Equal(t, 0, mbb.Run.Code, mbb.Run.Stderr)
	assert.Positive(t, mbb.OnMember1, "the fresh reschedules bring replicas back to member1")
	assert.Zero(t, mbb.Suspended, "no binding left suspended")
	for _, n := range mbb.Dipped {
		assert.Failf(t, "a workload lost its ready replica", "%s: %s", n, mbb.Rows[n])
	}
	assertRecorded(ctx, t, c, ns, record, names)
}

// TestRecordedAllAtOnceHoldsOnlyWhatStarts: a recorded run all at once
// that lists more workloads than it starts together (--kube-api-burst 2,
// six workloads) holds a binding only when its move starts: a watch of the
// bindings never sees more than the moves in flight suspended (all six
// were held before the record existed before), the record grows to list
// every workload, and no workload is ever without a ready replica.
func TestRecordedAllAtOnceHoldsOnlyWhatStarts(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, record = "handover-recorded-burst", "handover-recorded-burst"
	names := batchtest.Fleet(ctx, t, cp, c, ns, 6, readyAfter)
	batchtest.FailedOver(ctx, t, cp, c, ns, names)

	var peak atomic.Int32
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			if list, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).List(watchCtx, metav1.ListOptions{}); err == nil {
				var n int32
				for _, rb := range list.Items {
					if rb.Spec.SchedulingSuspended() {
						n++
					}
				}
				if n > peak.Load() {
					peak.Store(n)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	m := batchtest.Move(ctx, t, cp, c, ns, names, "--name", record, "--kube-api-burst", "2", "--timeout", "10m")
	stopWatch()
	<-watched
	require.Equal(t, 0, m.Run.Code, m.Run.Stderr)
	t.Logf("FIGURES recorded all at once, 6 workloads, --kube-api-burst 2: at most %d bindings suspended at once", peak.Load())
	assert.LessOrEqual(t, peak.Load(), int32(3), "a binding is held only when its move starts (two at a time), not all before the record")
	assert.Zero(t, m.Suspended, "no binding left suspended")
	for _, n := range m.Dipped {
		assert.Failf(t, "a workload lost its ready replica", "%s: %s", n, m.Rows[n])
	}
	assertRecorded(ctx, t, c, ns, record, names)
	wr, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Get(ctx, record, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Greater(t, wr.Generation, int64(1), "the record grew as the moves released")
}
