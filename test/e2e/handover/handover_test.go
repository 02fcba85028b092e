package handover

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// readyAfter is how long the tests' pods take to become ready.
const readyAfter = 15 * time.Second

var twoMembers = []string{"member1", "member2"}

// workload is a Deployment with pods ready readyAfter after start,
// propagated over members by the seed's policy (dynamic weights), changed
// by edit when given.
func workload(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string, replicas int32, members []string, edit func(*policyv1alpha1.PropagationPolicy)) {
	t.Helper()
	d := fixtures.Deployment(ns, name, replicas)
	d.Spec.Template.Annotations = map[string]string{harness.ReadyAfterAnnotation: readyAfter.String()}
	_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	policy := fixtures.DynamicWeightPolicy(ns, "policy-"+name, "apps/v1", "Deployment", []string{name}, members)
	if edit != nil {
		edit(policy)
	}
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	fixtures.WaitScheduled(ctx, t, c, ns, name+"-deployment")
}

// seedWorkload is the seed tutorial's Deployment: 3 replicas over member1
// and member2.
func seedWorkload(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string) {
	t.Helper()
	workload(ctx, t, c, ns, name, 3, twoMembers, nil)
	_, err := c.WaitForPlacement(ctx, ns, name+"-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
}

// failedOver runs the seed's failover and recovery: member1 tainted until
// Karmada moved everything off it, finished evicting and the replicas are
// ready elsewhere, then untainted.
func failedOver(ctx context.Context, t *testing.T, cp *harness.ControlPlane, c *fixtures.Clients, ns, name string, replicas int32, members []string) {
	t.Helper()
	require.NoError(t, c.SetClusterTaint(ctx, "member1", true))
	t.Cleanup(func() { _ = c.SetClusterTaint(context.Background(), "member1", false) })
	var rb *workv1alpha2.ResourceBinding
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, name+"-deployment", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		rb = got
		off := !slices.ContainsFunc(got.Spec.Clusters, func(tc workv1alpha2.TargetCluster) bool { return tc.Name == "member1" })
		return off && len(got.Spec.GracefulEvictionTasks) == 0, nil
	})
	require.NoError(t, err, "karmada never moved %s off member1: %+v", name, rb)
	require.NoError(t, c.SetClusterTaint(ctx, "member1", false))
	waitReadySum(ctx, t, cp, ns, name, replicas, members)
}

// waitReadySum waits until the members run exactly want ready replicas of
// the Deployment and no more are asked for.
func waitReadySum(ctx context.Context, t *testing.T, cp *harness.ControlPlane, ns, name string, want int32, members []string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var ready, asked int32
		last = ""
		for _, m := range members {
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

// moved is one move back to member1, as a watch saw it.
type moved struct {
	min, max int32
	took     time.Duration
	after    string
	stderr   string
	// out is what the command printed.
	out string
}

// waitMembersAsked waits until every member's Deployment asks for the
// replicas placement gives that member.
func waitMembersAsked(ctx context.Context, t *testing.T, cp *harness.ControlPlane, ns, name string, placement []workv1alpha2.TargetCluster, members []string) {
	t.Helper()
	want := map[string]int32{}
	for _, tc := range placement {
		want[tc.Name] = tc.Replicas
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = ""
		for _, m := range members {
			d, err := fixtures.TestClients(t, cp.Member(m).Config).Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			var asked int32
			switch {
			case err == nil:
				asked = *d.Spec.Replicas
			case !apierrors.IsNotFound(err):
				return false, nil
			}
			if asked != want[m] {
				last = fmt.Sprintf("%s asks %d, the placement %d", m, asked, want[m])
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, last)
}

// moveBack rebalances the workload with args while a watch on the member
// Deployments records the fewest ready replicas summed over members; it
// waits until the scheduler put replicas on member1 again and the members
// settled at replicas ready.
func moveBack(ctx context.Context, t *testing.T, cp *harness.ControlPlane, c *fixtures.Clients, ns, name string, replicas int32, members []string, args ...string) moved {
	t.Helper()
	w := watchReady(t, cp, members, ns, name)
	require.Equal(t, replicas, w.Now(), "all ready before the move")
	rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, name+"-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	before := fixtures.Placement(rb.Spec.Clusters)
	start := time.Now()
	run := fixtures.RunPlugin(t, cp.Kubeconfig, append([]string{"deployment/" + name, "-n", ns, "-o", "wide"}, args...)...)
	require.Equal(t, 0, run.Code, run.Stderr)
	rb, err = c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, name+"-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, before, fixtures.Placement(rb.Spec.Clusters), "the fresh reschedule moves replicas")
	// A command that returns at once (a one-write move) leaves the members
	// still running the old placement: wait until they were told the new
	// one, so that the watch sees what it costs.
	waitMembersAsked(ctx, t, cp, ns, name, rb.Spec.Clusters, members)
	waitReadySum(ctx, t, cp, ns, name, replicas, members)
	m := moved{took: time.Since(start), stderr: run.Stderr, out: run.Stdout}
	w.Close()
	m.min, m.max = w.Range()
	rb, err = c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, name+"-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	m.after = fixtures.Placement(rb.Spec.Clusters)
	t.Logf("FIGURES %s %v: ready replicas between %d and %d; %s until %d ready on %s (command %s)",
		name, args, m.min, m.max, m.took.Round(time.Second), replicas, m.after, run.Took.Round(time.Second))
	assert.False(t, rb.Spec.SchedulingSuspended(), "the binding is not left suspended")
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	return m
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

	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)
	mbb := moveBack(ctx, t, cp, c, ns, name, 3, twoMembers)
	assert.Contains(t, fixtures.TutorialSplits, mbb.after)
	if cp.Versions.KarmadaMinor() < 13 {
		// Karmada v1.12 has no spec.suspension.scheduling: the move is the
		// one-write move of earlier versions, and the user is told so.
		assert.Contains(t, mbb.stderr, "warning: Karmada v1.12 has no spec.suspension.scheduling on bindings")
		assert.Less(t, mbb.min, int32(3), "v1.12 moves in one write")
		return
	}
	assert.NotContains(t, mbb.stderr, "no spec.suspension.scheduling")
	// The move settles on the scheduler's choice before the release
	// (docs/make-before-break.md): no dip, and the scheduler as predicted.
	assert.GreaterOrEqual(t, mbb.min, int32(3), "make-before-break kept every replica ready")
	assert.Contains(t, mbb.out, "as predicted", "the scheduler chose the placement the move settled on")

	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)
	one := moveBack(ctx, t, cp, c, ns, name, 3, twoMembers, "--max-unavailable=100%")
	assert.Less(t, one.min, int32(3), "the one-write move loses ready replicas while the new ones start")
}

// TestAggregatedMovesWholeKeepsReplicasReady moves an Aggregated workload
// whole: the nodes of the member that runs it are cordoned (maintenance), so
// the estimators leave it no room and a fresh reschedule puts all three
// replicas on the other member; they start and become ready there before
// the first member stops any (a one-write move drops to none ready).
func TestAggregatedMovesWholeKeepsReplicasReady(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-aggregated", "whole"
	fixtures.TestNamespace(ctx, t, c, ns)
	workload(ctx, t, c, ns, name, 3, twoMembers, func(p *policyv1alpha1.PropagationPolicy) {
		p.Spec.Placement.ReplicaScheduling = &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated,
		}
	})
	rb, err := c.WaitForPlacement(ctx, ns, name+"-deployment", 2*time.Minute, "{member1:3}", "{member2:3}")
	require.NoError(t, err)
	from, to := "member1", "{member2:3}"
	if rb.Spec.Clusters[0].Name == "member2" {
		from, to = "member2", "{member1:3}"
	}
	waitReadySum(ctx, t, cp, ns, name, 3, twoMembers)
	setCordoned(ctx, t, cp, from, true)
	t.Cleanup(func() { setCordoned(context.Background(), t, cp, from, false) })

	m := moveBack(ctx, t, cp, c, ns, name, 3, twoMembers)
	assert.Equal(t, to, m.after, "moved whole")
	assert.GreaterOrEqual(t, m.min, int32(3), "make-before-break kept every replica ready")

	// And back in one write: every replica stops before any new one is ready.
	other := map[string]string{"member1": "member2", "member2": "member1"}[from]
	setCordoned(ctx, t, cp, from, false)
	setCordoned(ctx, t, cp, other, true)
	t.Cleanup(func() { setCordoned(context.Background(), t, cp, other, false) })
	one := moveBack(ctx, t, cp, c, ns, name, 3, twoMembers, "--max-unavailable=100%")
	assert.Equal(t, "{"+from+":3}", one.after, "moved whole")
	assert.Less(t, one.min, int32(3), "the one-write move loses ready replicas")
}

// setCordoned cordons (or uncordons) every node of a member.
func setCordoned(ctx context.Context, t *testing.T, cp *harness.ControlPlane, member string, cordoned bool) {
	t.Helper()
	kube := fixtures.TestClients(t, cp.Member(member).Config).Kube
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range nodes.Items {
		n := &nodes.Items[i]
		n.Spec.Unschedulable = cordoned
		_, err := kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

// TestWeightedThreeMembersKeepsReplicasReady spreads 6 replicas over three
// members by dynamic weights (member3 is the Pull member) and moves them
// back to member1 after its failover.
func TestWeightedThreeMembersKeepsReplicasReady(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-weighted", "three"
	members := []string{"member1", "member2", "member3"}
	fixtures.TestNamespace(ctx, t, c, ns)
	workload(ctx, t, c, ns, name, 6, members, nil)
	waitReadySum(ctx, t, cp, ns, name, 6, members)
	failedOver(ctx, t, cp, c, ns, name, 6, members)
	m := moveBack(ctx, t, cp, c, ns, name, 6, members)
	assert.GreaterOrEqual(t, m.min, int32(6), "make-before-break kept every replica ready")

	failedOver(ctx, t, cp, c, ns, name, 6, members)
	one := moveBack(ctx, t, cp, c, ns, name, 6, members, "--max-unavailable=100%")
	assert.Less(t, one.min, int32(6), "the one-write move loses ready replicas")
}
