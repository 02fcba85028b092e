package failback

import (
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestFailbackSlowFlapCooldown: member1 fails, recovers and its failback
// moves "slowflap" back. Then it flaps slowly, twice: down until Karmada has
// evicted the workload again, up longer than the window. Each of those
// failures comes within --cooldown of the failback, so the recoveries are
// held for the cooldown: no second failback, the workload is triggered once.
func TestFailbackSlowFlapCooldown(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "failback-slowflap"
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	readyWorkloads(ctx, t, c, ns, "5s", true, "slowflap")
	triggers := watchTriggers(t, c, ns)

	d := startDaemon(t, cp, "-n", ns, "--stabilization-window", window.String(), "--cooldown", "5m", "--leader-elect-identity", "slowflap")
	d.waitLog(t, "acting on recoveries", time.Minute)
	fixtures.Failover(ctx, t, c, ns, "slowflap-deployment")
	recovered := recoverMember1(ctx, t, c)
	rec := waitRecord(ctx, t, c, "member1", 3*time.Minute, func(*appsv1alpha1.WorkloadRebalancer) bool { return true })
	assert.Equal(t, []appsv1alpha1.ObjectReference{recordtest.Deploy(ns, "slowflap")}, rec.Spec.Workloads)
	_, err := c.WaitForPlacement(ctx, ns, "slowflap-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
	waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonFinished, recovered)
	require.Len(t, triggers.triggers("slowflap-deployment"), 1)

	var last time.Time
	for cycle := 0; cycle < 2; cycle++ {
		fixtures.Failover(ctx, t, c, ns, "slowflap-deployment")
		last = recoverMember1(ctx, t, c)
		time.Sleep(window + 10*time.Second)
	}
	assert.Len(t, failbackRecords(ctx, t, c, "member1"), 1, "one failback in the cooldown")
	assert.Len(t, triggers.triggers("slowflap-deployment"), 1, "slowflap moved back once")
	assert.Equal(t, "{member2:3}", fixtures.Placement(recordtest.Binding(ctx, t, c, ns, "slowflap-deployment").Spec.Clusters))
	assert.Contains(t, d.text(), "held=true")
	started := waitEvent(ctx, t, c, metav1.NamespaceDefault, "Cluster", "member1", failback.ReasonWindowStarted, last)
	assert.Contains(t, started.Message, "--cooldown")
}
