package batchtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// Fleet creates n one-replica Deployments w00.. in ns whose pods become
// ready readyAfter after they start, divided by the seed's policy (dynamic
// weights) over TwoMembers, and waits until each is scheduled and ready.
func Fleet(ctx context.Context, t testing.TB, cp *harness.ControlPlane, c *fixtures.Clients, ns string, n int, readyAfter time.Duration) []string {
	t.Helper()
	fixtures.TestNamespace(ctx, t, c, ns)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("w%02d", i)
		d := fixtures.Deployment(ns, names[i], 1)
		d.Spec.Template.Annotations = map[string]string{harness.ReadyAfterAnnotation: readyAfter.String()}
		_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, "policy-"+ns, "apps/v1", "Deployment", names, TwoMembers), metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range names {
		fixtures.WaitScheduled(ctx, t, c, ns, name+"-deployment")
	}
	WaitFleetReady(ctx, t, cp, ns, names, 1, TwoMembers)
	return names
}

// FailedOver fails member1 (NoExecute taint) until Karmada placed every
// workload of names on member2 and finished evicting, recovers it, and
// waits until every workload runs its replica ready again.
func FailedOver(ctx context.Context, t testing.TB, cp *harness.ControlPlane, c *fixtures.Clients, ns string, names []string) {
	t.Helper()
	require.NoError(t, c.SetClusterTaint(ctx, "member1", true))
	t.Cleanup(func() { _ = c.SetClusterTaint(context.Background(), "member1", false) })
	for _, n := range names {
		_, err := c.WaitForPlacement(ctx, ns, n+"-deployment", 3*time.Minute, "{member2:1}")
		require.NoError(t, err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, rb := range list.Items {
			if len(rb.Spec.GracefulEvictionTasks) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err)
	require.NoError(t, c.SetClusterTaint(ctx, "member1", false))
	WaitFleetReady(ctx, t, cp, ns, names, 1, TwoMembers)
}

// Moved is what one command moving the fleet did.
type Moved struct {
	Run fixtures.PluginRun
	// Took is from the command's start until every workload ran its
	// replica ready again on the placement it was left with (start-up of
	// the new pods included, whatever the command waited for).
	Took time.Duration
	// OnMember1 counts the workloads placed on member1 afterwards;
	// Suspended those whose binding is left suspended, Ledgers those that
	// still carry a move's ledger.
	OnMember1, Suspended, Ledgers int
	// Dipped names the workloads that had no ready replica at some moment.
	Dipped []string
	// Rows holds each workload's line of the command's wide table.
	Rows map[string]string
	// Requests counts the command's API requests by verb (through a
	// counting proxy).
	Requests map[string]int
}

// Move runs `kubectl rebalance deployments --all -n ns -o wide` with args
// through a counting proxy (whose kubeconfig reaches the Pull member as the
// harness's does) while a FleetWatch follows every workload, and waits
// until each runs its replica ready on its new placement.
func Move(ctx context.Context, t testing.TB, cp *harness.ControlPlane, c *fixtures.Clients, ns string, names []string, args ...string) Moved {
	t.Helper()
	proxy, err := cp.StartCountingProxyWithPullMembers()
	require.NoError(t, err)
	defer proxy.Close()
	w := WatchFleet(t, cp, TwoMembers, ns)
	start := time.Now()
	run := fixtures.RunPlugin(t, proxy.Kubeconfig, append([]string{"deployments", "--all", "-n", ns, "-o", "wide"}, args...)...)
	m := Moved{Run: run, Requests: proxy.Counter.Counts(), Rows: map[string]string{}}
	WaitFleetReady(ctx, t, cp, ns, names, 1, TwoMembers)
	m.Took = time.Since(start)
	w.Close()

	list, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, rb := range list.Items {
		if fixtures.Placement(rb.Spec.Clusters) == "{member1:1}" {
			m.OnMember1++
		}
		if rb.Spec.SchedulingSuspended() {
			m.Suspended++
		}
		if _, ok := rb.Annotations[handover.LedgerAnnotation]; ok {
			m.Ledgers++
		}
	}
	for _, n := range names {
		if w.Min(n) < 1 {
			m.Dipped = append(m.Dipped, n)
		}
	}
	for _, line := range strings.Split(run.Stdout, "\n") {
		for _, n := range names {
			if strings.HasPrefix(line, "deployment.apps/"+n+" ") {
				m.Rows[n] = line
			}
		}
	}
	t.Logf("FIGURES batch of %d %v: exit %d, %d moved to member1, %d without a ready replica at some moment, %d left suspended; %s until all ready (command %s); requests %v",
		len(names), args, run.Code, m.OnMember1, len(m.Dipped), m.Suspended, m.Took.Round(time.Second), run.Took.Round(time.Second), m.Requests)
	return m
}

// Mismatched counts the rows that say karmada-scheduler chose other than
// predicted.
func (m Moved) Mismatched() int {
	n := 0
	for _, line := range m.Rows {
		if strings.Contains(line, ", predicted {") {
			n++
		}
	}
	return n
}
