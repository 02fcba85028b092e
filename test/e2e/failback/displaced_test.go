package failback

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// readyWorkloads creates Deployments of 3 replicas whose pods get ready
// readyAfter after they start, divided by the tutorial's policy (which
// tolerates the failover's taint for no time at all), and waits until they
// are scheduled. tolerate=false gives them a policy without that
// toleration: created while member1 is tainted, they never go there.
func readyWorkloads(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, readyAfter string, tolerate bool, names ...string) {
	t.Helper()
	for _, name := range names {
		d := fixtures.Deployment(ns, name, 3)
		d.Spec.Template.Annotations = map[string]string{harness.ReadyAfterAnnotation: readyAfter}
		_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	policy := fixtures.DynamicWeightPolicy(ns, "policy-"+names[0], "apps/v1", "Deployment", names, []string{"member1", "member2"})
	if !tolerate {
		policy.Spec.Placement.ClusterTolerations = nil
	}
	_, err := c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range names {
		fixtures.WaitScheduled(ctx, t, c, ns, name+"-deployment")
	}
}

// TestFailbackOnlyDisplaced: member1 fails and Karmada evicts "moved" from
// it; "newcomer" is created while member1 is down and placed on member2
// alone. A fresh reschedule would give both replicas on member1, but only
// "moved" lost replicas there because member1 failed: the failback moves
// it and leaves "newcomer" where it is (not triggered at all).
func TestFailbackOnlyDisplaced(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "failback-displaced"
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	readyWorkloads(ctx, t, c, ns, "5s", true, "moved")

	d := startDaemon(t, cp, "-n", ns, "--stabilization-window", window.String(), "--leader-elect-identity", "displaced")
	d.waitLog(t, "acting on recoveries", time.Minute)
	fixtures.Failover(ctx, t, c, ns, "moved-deployment")
	readyWorkloads(ctx, t, c, ns, "5s", false, "newcomer")
	_, err := c.WaitForPlacement(ctx, ns, "newcomer-deployment", 2*time.Minute, "{member2:3}")
	require.NoError(t, err)

	recovered := recoverMember1(ctx, t, c)
	rec := waitRecord(ctx, t, c, "member1", 3*time.Minute, func(*appsv1alpha1.WorkloadRebalancer) bool { return true })
	assert.Equal(t, []appsv1alpha1.ObjectReference{recordtest.Deploy(ns, "moved")}, rec.Spec.Workloads, "only the workload member1's failure displaced")
	_, err = c.WaitForPlacement(ctx, ns, "moved-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
	waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonFinished, recovered)

	newcomer := recordtest.Binding(ctx, t, c, ns, "newcomer-deployment")
	assert.Nil(t, newcomer.Spec.RescheduleTriggeredAt, "newcomer never ran on member1: not failed back")
	assert.Equal(t, "{member2:3}", fixtures.Placement(newcomer.Spec.Clusters))
	assert.Contains(t, d.text(), `displaced=1`)
}

// TestFailbackEvictionEndsAfterWindow: member1 recovers while Karmada is
// still evicting "slow" from it (its new pods on member2 take 50 s to get
// ready, longer than the window), so the failback finds nothing it can move
// yet; when the eviction ends the daemon fails "slow" back on its own.
func TestFailbackEvictionEndsAfterWindow(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "failback-late"
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	readyWorkloads(ctx, t, c, ns, "50s", true, "slow")
	_, err := c.WaitForPlacement(ctx, ns, "slow-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)

	d := startDaemon(t, cp, "-n", ns, "--stabilization-window", window.String(), "--leader-elect-identity", "late")
	d.waitLog(t, "acting on recoveries", time.Minute)
	require.NoError(t, c.SetClusterTaint(ctx, "member1", true))
	t.Cleanup(func() { _ = c.SetClusterTaint(context.Background(), "member1", false) })
	_, err = c.WaitForPlacement(ctx, ns, "slow-deployment", 2*time.Minute, "{member2:3}")
	require.NoError(t, err)
	rb := recordtest.Binding(ctx, t, c, ns, "slow-deployment")
	require.NotEmpty(t, rb.Spec.GracefulEvictionTasks, "karmada is evicting slow from member1")
	recovered := recoverMember1(ctx, t, c)

	d.waitLog(t, "stillEvicting=1", window+time.Minute)
	assert.Empty(t, failbackRecords(ctx, t, c, "member1"), "nothing could move while karmada was evicting")
	var evictedAt time.Time
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, "slow-deployment", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		evictedAt = time.Now()
		return !hasTask(rb, "member1"), nil
	})
	require.NoError(t, err)
	assert.True(t, evictedAt.After(recovered.Add(window)), "the eviction ended after the window")

	rec := waitRecord(ctx, t, c, "member1", 2*time.Minute, func(*appsv1alpha1.WorkloadRebalancer) bool { return true })
	assert.True(t, strings.HasPrefix(rec.Name, failback.RecordName("member1", rec.Labels[failback.LabelRecovery])+"-"), "a follow-up record: %s", rec.Name)
	assert.Equal(t, []appsv1alpha1.ObjectReference{recordtest.Deploy(ns, "slow")}, rec.Spec.Workloads)
	_, err = c.WaitForPlacement(ctx, ns, "slow-deployment", 3*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err, "slow is back on member1 once its eviction ended; logs:\n%s", d.text())
	assert.Contains(t, d.text(), "failing back workloads whose eviction ended after the failback")
}

func hasTask(rb *workv1alpha2.ResourceBinding, cluster string) bool {
	for _, task := range rb.Spec.GracefulEvictionTasks {
		if task.FromCluster == cluster {
			return true
		}
	}
	return false
}
