package handover

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// readyAfter is how long the tests' pods take to become ready.
const readyAfter = 15 * time.Second

// seedWorkload is the seed tutorial's Deployment (3 replicas, dynamic
// weights over member1 and member2) with pods ready readyAfter after start.
func seedWorkload(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string) {
	t.Helper()
	d := fixtures.Deployment(ns, name, 3)
	d.Spec.Template.Annotations = map[string]string{harness.ReadyAfterAnnotation: readyAfter.String()}
	_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, "policy-"+name, "apps/v1", "Deployment", []string{name}, []string{"member1", "member2"}), metav1.CreateOptions{})
	require.NoError(t, err)
	fixtures.WaitScheduled(ctx, t, c, ns, name+"-deployment")
	_, err = c.WaitForPlacement(ctx, ns, name+"-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
}

// failedOver runs the seed's failover and recovery: member1 tainted until
// Karmada moved everything to member2 and the 3 replicas are ready there,
// then untainted.
func failedOver(ctx context.Context, t *testing.T, cp *harness.ControlPlane, c *fixtures.Clients, ns, name string) {
	t.Helper()
	fixtures.Failover(ctx, t, c, ns, name+"-deployment")
	require.NoError(t, c.SetClusterTaint(ctx, "member1", false))
	waitReadySum(ctx, t, cp, ns, name, 3)
}

// waitReadySum waits until the members run exactly want ready replicas of
// the Deployment and no more are asked for.
func waitReadySum(ctx context.Context, t *testing.T, cp *harness.ControlPlane, ns, name string, want int32) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var ready, asked int32
		last = ""
		for _, m := range []string{"member1", "member2"} {
			kube := fixtures.TestClients(t, cp.Member(m).Config).Kube
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last += fmt.Sprintf("%s: %v; ", m, err)
				continue
			}
			ready += d.Status.ReadyReplicas
			asked += *d.Spec.Replicas
			last += fmt.Sprintf("%s %d/%d (%d pods); ", m, d.Status.ReadyReplicas, *d.Spec.Replicas, d.Status.Replicas)
		}
		return ready == want && asked == want, nil
	})
	require.NoError(t, err, "members: %s", last)
}

// move rebalances the workload back with args while a watch records the
// fewest ready replicas, and returns that minimum and how long it took
// until the members settled at 3 ready.
func move(ctx context.Context, t *testing.T, cp *harness.ControlPlane, c *fixtures.Clients, ns, name string, args ...string) (int32, time.Duration) {
	t.Helper()
	w := watchReady(t, cp, []string{"member1", "member2"}, ns, name)
	require.Equal(t, int32(3), w.Now(), "3 ready before the move")
	start := time.Now()
	run := fixtures.RunPlugin(t, cp.Kubeconfig, append([]string{"deployment/" + name, "-n", ns, "-o", "wide"}, args...)...)
	require.Equal(t, 0, run.Code, run.Stderr)
	_, err := c.WaitForPlacement(ctx, ns, name+"-deployment", time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
	waitReadySum(ctx, t, cp, ns, name, 3)
	took := time.Since(start)
	w.close()
	lo, hi := w.Range()
	t.Logf("move %v: ready replicas between %d and %d; %s until 3 ready on the new placement (command %s)", args, lo, hi, took.Round(time.Second), run.Took.Round(time.Second))
	rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, name+"-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, rb.Spec.SchedulingSuspended(), "the binding is not left suspended")
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	return lo, took
}

// TestSeedRebalanceBackKeepsReplicasReady is the seed tutorial's
// rebalance back after the failover and recovery: by default the replicas
// member1 gains are ready before member2 loses any, so the ready count never
// drops below 3; with --max-unavailable=100% (the one-write move) it does.
func TestSeedRebalanceBackKeepsReplicasReady(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-seed", "app"
	fixtures.TestNamespace(ctx, t, c, ns)
	seedWorkload(ctx, t, c, ns, name)

	failedOver(ctx, t, cp, c, ns, name)
	lo, took := move(ctx, t, cp, c, ns, name)
	assert.GreaterOrEqual(t, lo, int32(3), "make-before-break kept every replica ready")

	failedOver(ctx, t, cp, c, ns, name)
	loOne, tookOne := move(ctx, t, cp, c, ns, name, "--max-unavailable=100%")
	assert.Less(t, loOne, int32(3), "the one-write move loses ready replicas while the new ones start")
	t.Logf("FIGURES seed rebalance back: make-before-break min ready %d in %s; one write min ready %d in %s", lo, took.Round(time.Second), loOne, tookOne.Round(time.Second))
}
