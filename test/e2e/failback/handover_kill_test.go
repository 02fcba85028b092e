package failback

import (
	"context"
	"syscall"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestFailbackMoveResumedAfterKill kills the daemon (the built binary,
// SIGKILL: nothing more is written) while its make-before-break failback
// has the binding suspended with member1's replica staged beside member2's
// three, which start 15 s after they are created. The binding stays as the
// killed daemon left it; the daemon started next resumes the record, takes
// the move up from the binding's ledger and finishes it: the workload is
// back on member1, nothing is left suspended, the record is finished, and
// the ready replicas summed over the members never fall below the 3 that
// ran before the failback, across the kill.
func TestFailbackMoveResumedAfterKill(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name, binding = "failback-mbb-kill", "app", "app-deployment"
	seedSlowToStart(ctx, t, c, ns, name, binding)
	binary := rt.Binary(t)
	flags := []string{"-n", ns, "--stabilization-window", window.String(), "--max-in-flight", "1"}

	first := startProcess(t, cp, binary, "mbb-kill-1", flags...)
	first.waitLog(t, "acting on recoveries", time.Minute)
	members, w := failOverAllReady(ctx, t, cp, c, ns, name, binding)

	recoverMember1(ctx, t, c)
	// Staged: suspended, the ledger written, member1 asked for a replica
	// that is not ready yet (15 s).
	var staged *workv1alpha2.ResourceBinding
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		staged = rb
		_, ledger := rb.Annotations[handover.LedgerAnnotation]
		return ledger && rb.Spec.SchedulingSuspended() && replicasOn(rb.Spec.Clusters, "member1") > 0, nil
	})
	require.NoError(t, err, "the failback never staged member1's replica; daemon logs:\n%s", first.text())
	first.signal(t, syscall.SIGKILL)
	first.wait(t, time.Minute)
	t.Logf("killed with the binding staged at %s", fixtures.Placement(staged.Spec.Clusters))

	rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, rb.Spec.SchedulingSuspended(), "the killed daemon could not undo anything")

	second := startProcess(t, cp, binary, "mbb-kill-2", flags...)
	// The record alone says little: Karmada's controller recorded the held
	// workload Successful when it wrote its trigger. The daemon says when
	// its failback is over.
	second.waitLog(t, `"msg":"failback finished"`, 5*time.Minute)
	rec := waitRecord(ctx, t, c, "member1", time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool {
		return rb.Status.FinishTime != nil
	})
	rb, err = c.WaitForPlacement(ctx, ns, binding, time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err, "the workload is back on member1; daemon logs:\n%s", second.text())
	waitMembers(ctx, t, members, ns, name, rb.Spec.Clusters, 3)
	w.Close()
	lo, hi := w.Range()
	t.Logf("FIGURES failback killed mid-move and resumed, %s: ready replicas between %d and %d", fixtures.Placement(rb.Spec.Clusters), lo, hi)

	assert.False(t, rb.Spec.SchedulingSuspended(), "the binding is not left suspended")
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	require.Len(t, rec.Status.ObservedWorkloads, 1)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, rec.Status.ObservedWorkloads[0].Result)
	assert.Len(t, failbackRecords(ctx, t, c, "member1"), 1, "one record for the recovery")
	logs := second.text()
	assert.Contains(t, logs, "resuming an unfinished failback")
	assert.GreaterOrEqual(t, lo, int32(3), "the resumed failback lost a ready replica; daemon logs:\n%s", logs)
	assert.Greater(t, hi, int32(3), "member1's replica ran next to member2's three")
}

// replicasOn is the replicas a placement gives cluster.
func replicasOn(placement []workv1alpha2.TargetCluster, cluster string) int32 {
	for _, tc := range placement {
		if tc.Name == cluster {
			return tc.Replicas
		}
	}
	return 0
}

// TestFailbackMoveRecoveredWhenTheLeaseIsLost takes the failback daemon's
// Lease away (another holder, renewed, for a minute) while its
// make-before-break failback has the binding staged: the daemon stops
// leading within its renew deadline, and the move it was making is
// recovered before it stops working - undone while the staged replica
// starts, or let go with the new placement once it took over - so no
// binding stays suspended and the ready replicas never fall below 3.
func TestFailbackMoveRecoveredWhenTheLeaseIsLost(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name, binding = "failback-mbb-lease", "app", "app-deployment"
	seedSlowToStart(ctx, t, c, ns, name, binding)
	binary := rt.Binary(t)
	leases := c.Kube.CoordinationV1().Leases("karmada-system")
	// Registered first, so run last (once the daemon is stopped): the next
	// test's daemon does not wait out the stolen Lease.
	t.Cleanup(func() { _ = leases.Delete(context.Background(), "kubectl-rebalance-failback", metav1.DeleteOptions{}) })
	daemon := startProcess(t, cp, binary, "mbb-lease", "-n", ns, "--stabilization-window", window.String(), "--max-in-flight", "1")
	daemon.waitLog(t, "acting on recoveries", time.Minute)
	members, w := failOverAllReady(ctx, t, cp, c, ns, name, binding)

	recoverMember1(ctx, t, c)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		_, ledger := rb.Annotations[handover.LedgerAnnotation]
		return ledger && rb.Spec.SchedulingSuspended(), nil
	})
	require.NoError(t, err, "the failback never staged; daemon logs:\n%s", daemon.text())

	// Another holder takes the Lease and keeps it for a minute.
	lease, err := leases.Get(ctx, "kubectl-rebalance-failback", metav1.GetOptions{})
	require.NoError(t, err)
	thief, seconds, now := "thief", int32(60), metav1.NewMicroTime(time.Now())
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime, lease.Spec.AcquireTime = &thief, &seconds, &now, &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	require.NoError(t, err)
	daemon.waitLog(t, "lost the lease, stopped working", time.Minute)

	rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
	require.NoError(t, err)
	t.Logf("after the lost Lease: %s, suspended %v; daemon logs:\n%s", fixtures.Placement(rb.Spec.Clusters), rb.Spec.SchedulingSuspended(), daemon.text())
	assert.False(t, rb.Spec.SchedulingSuspended(), "the daemon recovered its move before it stopped working")
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	waitMembers(ctx, t, members, ns, name, rb.Spec.Clusters, 3)
	w.Close()
	lo, _ := w.Range()
	t.Logf("FIGURES failback whose Lease was lost mid-move, %s: ready replicas never below %d", fixtures.Placement(rb.Spec.Clusters), lo)
	assert.GreaterOrEqual(t, lo, int32(3), "no ready replica was lost")
}
