package failback

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestFailbackKeepsReplicasReady is the seed tutorial's failover and
// recovery with pods that get ready 15 s after they start, the daemon
// failing the workload back on its own: a watch on the member Deployments
// sees the ready replicas summed over member1 and member2 never fall below
// the 3 that ran before the failback (the one-write failback,
// --max-unavailable=100%, falls to 2 while member1's new pod starts). The
// log and the record say the move was made before break.
func TestFailbackKeepsReplicasReady(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name, binding = "failback-mbb", "app", "app-deployment"
	seedSlowToStart(ctx, t, c, ns, name, binding)

	d := startDaemon(t, cp, "-n", ns, "--stabilization-window", window.String(), "--ttl", "600", "--leader-elect-identity", "mbb")
	d.waitLog(t, "acting on recoveries", time.Minute)
	members, w := failOverAllReady(ctx, t, cp, c, ns, name, binding)

	recovered := recoverMember1(ctx, t, c)
	rb, err := c.WaitForPlacement(ctx, ns, binding, 3*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err, "the workload is back on member1 without any command")
	waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonFinished, recovered)
	waitMembers(ctx, t, members, ns, name, rb.Spec.Clusters, 3)
	w.Close()
	lo, hi := w.Range()
	took := time.Since(recovered)
	t.Logf("FIGURES failback %s: ready replicas between %d and %d; %s from the recovery until 3 ready on %s (window %s)",
		fixtures.Placement(rb.Spec.Clusters), lo, hi, took.Round(time.Second), fixtures.Placement(rb.Spec.Clusters), window)

	logs := d.text()
	assert.Contains(t, logs, "moving make-before-break (--max-surge 100%, --max-unavailable 0)")
	assert.Contains(t, logs, "made before break: staged ")
	// Never below the 3 ready before the move (issue 29); the log says
	// whether the scheduler decided against the prediction ("predicted {").
	assert.GreaterOrEqual(t, lo, int32(3), "the failback lost a ready replica; daemon logs:\n%s", logs)
	assert.Greater(t, hi, int32(3), "member1's replica ran next to member2's three before member2 stopped one")

	rb, err = c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, rb.Spec.SchedulingSuspended(), "the binding is not left suspended")
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	recs := failbackRecords(ctx, t, c, "member1")
	require.Len(t, recs, 1)
	moves := failback.ReadMoves(recs[0].Annotations)
	assert.Equal(t, 1, moves.MadeBeforeBreak, "the record says how the workload moved: %s", recs[0].Annotations[failback.MovesAnnotation])
	assert.Contains(t, moves.Workloads["Deployment/"+ns+"/"+name], "made before break: staged ")
	assert.Equal(t, []appsv1alpha1.ObservedWorkload{{Workload: recs[0].Spec.Workloads[0], Result: appsv1alpha1.RebalanceSuccessful}}, recs[0].Status.ObservedWorkloads)
}

// seedSlowToStart creates the seed tutorial's workload in namespace ns,
// its pods ready 15 s after they start, and waits until it runs the
// tutorial's split; failback records of member1 are deleted before and
// after the test.
func seedSlowToStart(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name, binding string) {
	t.Helper()
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	readyWorkloads(ctx, t, c, ns, "15s", true, name)
	_, err := c.WaitForPlacement(ctx, ns, binding, 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
}

// failOverAllReady fails member1 over and waits until Karmada's failover
// finished evicting, member2's three replicas ready: the failback starts
// from 3 ready. It returns the clients of member1 and member2 and a watch
// of the ready replicas summed over them, started then.
func failOverAllReady(ctx context.Context, t *testing.T, cp *harness.ControlPlane, c *fixtures.Clients, ns, name, binding string) (map[string]kubernetes.Interface, *fixtures.ReadyWatch) {
	t.Helper()
	fixtures.Failover(ctx, t, c, ns, binding)
	members := map[string]kubernetes.Interface{}
	for _, m := range []string{"member1", "member2"} {
		members[m] = fixtures.TestClients(t, cp.Member(m).Config).Kube
	}
	waitMembers(ctx, t, members, ns, name, []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 3}}, 3)
	w := fixtures.WatchReady(t, members, ns, name)
	require.Equal(t, int32(3), w.Now(), "all ready before the failback")
	return members, w
}

// waitMembers waits until the members ask for the placement's replicas of
// Deployment ns/name and run ready exactly ready of them.
func waitMembers(ctx context.Context, t *testing.T, members map[string]kubernetes.Interface, ns, name string, placement []workv1alpha2.TargetCluster, ready int32) {
	t.Helper()
	want := map[string]int32{}
	for _, tc := range placement {
		want[tc.Name] = tc.Replicas
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var sum int32
		last = ""
		for m, kube := range members {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			var asked, n int32
			switch {
			case err == nil:
				asked, n = *d.Spec.Replicas, d.Status.ReadyReplicas
			case !apierrors.IsNotFound(err):
				return false, nil
			}
			if asked != want[m] {
				last = fmt.Sprintf("%s asks %d, the placement %d", m, asked, want[m])
				return false, nil
			}
			sum += n
		}
		last = fmt.Sprintf("%d ready, want %d", sum, ready)
		return sum == ready, nil
	})
	require.NoError(t, err, last)
}
