package failback

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// pullSplits are the placements Karmada gives 3 replicas divided over
// member2 and member3 by available replicas.
var pullSplits = []string{"{member2:2, member3:1}", "{member2:1, member3:2}"}

// failoverMember3 taints member3 NoExecute, as the seed tutorial does with
// member1, and waits until Karmada moved binding to member2 and finished
// evicting it. The taint goes when the test ends.
func failoverMember3(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, binding string) {
	t.Helper()
	require.NoError(t, c.SetClusterTaint(ctx, "member3", true))
	t.Cleanup(func() { _ = c.SetClusterTaint(context.Background(), "member3", false) })
	_, err := c.WaitForPlacement(ctx, ns, binding, 2*time.Minute, "{member2:3}")
	require.NoError(t, err)
	var tasks []workv1alpha2.GracefulEvictionTask
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		tasks = rb.Spec.GracefulEvictionTasks
		return len(tasks) == 0, nil
	})
	require.NoError(t, err, "karmada never finished evicting %s/%s from member3: %+v", ns, binding, tasks)
}

// TestFailbackPullMember fails member3 over, the Pull member of the default
// environment (registered by karmada-agent; the Karmada cluster proxy does
// not reach it): Karmada evicts "pulled" to member2, and member3 recovers.
// Two daemons follow the recovery. One is given a member kubeconfig without
// a context for member3: its prediction cannot size member3, so its failback
// leaves "pulled" where it is and says which member it could not read and
// what fixes it. The other reads member3 through its context in the
// kubeconfig (the harness's has one per member, as local-up-karmada's
// members.config) and brings "pulled" back to member3, where its pods get
// ready again.
func TestFailbackPullMember(t *testing.T) {
	cp := harness.Require(t)
	require.True(t, cp.Member("member3").Pull, "member3 is the Pull member of the default environment")
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, binding = "failback-pull", "pulled-deployment"
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member3")
	t.Cleanup(func() { deleteRecords(t, c, "member3") })
	d := fixtures.Deployment(ns, "pulled", 3)
	d.Spec.Template.Annotations = map[string]string{harness.ReadyAfterAnnotation: "5s"}
	_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, "policy-pulled", "apps/v1", "Deployment", []string{"pulled"}, []string{"member2", "member3"}), metav1.CreateOptions{})
	require.NoError(t, err)
	fixtures.WaitScheduled(ctx, t, c, ns, binding)
	_, err = c.WaitForPlacement(ctx, ns, binding, 2*time.Minute, pullSplits...)
	require.NoError(t, err)

	raw, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	require.NoError(t, err)
	require.Contains(t, raw.Contexts, "member3", "the harness's kubeconfig has a context per member")
	delete(raw.Contexts, "member3")
	noMember3 := filepath.Join(t.TempDir(), "members.config")
	require.NoError(t, clientcmd.WriteToFile(*raw, noMember3))

	// Each daemon holds a Lease of its own: both act on the recovery.
	blind := startDaemon(t, cp, "-n", ns, "--member-kubeconfig", noMember3, "--stabilization-window", window.String(),
		"--leader-elect-resource-name", "failback-pull-blind", "--leader-elect-identity", "pull-blind")
	const laterWindow = 3 * window
	reading := startDaemon(t, cp, "-n", ns, "--stabilization-window", laterWindow.String(),
		"--leader-elect-resource-name", "failback-pull-reading", "--leader-elect-identity", "pull-reading")
	blind.waitLog(t, "acting on recoveries", time.Minute)
	reading.waitLog(t, "acting on recoveries", time.Minute)
	failoverMember3(ctx, t, c, ns, binding)
	require.NoError(t, c.SetClusterTaint(ctx, "member3", false))
	recovered := time.Now()

	// The blind daemon's failback: pulled is displaced, but member3's free
	// capacity cannot be read.
	blind.waitLog(t, "displaced=1 stillEvicting=0", window+time.Minute)
	blind.waitLog(t, `msg="failback finished" component=kubectl-rebalance-failback cluster=member3`, time.Minute)
	time.Sleep(3 * time.Second)
	assert.Empty(t, failbackRecords(ctx, t, c, "member3"), "nothing moves on a prediction that cannot size member3")
	rb := recordtest.Binding(ctx, t, c, ns, binding)
	assert.Nil(t, rb.Spec.RescheduleTriggeredAt)
	assert.Equal(t, "{member2:3}", fixtures.Placement(rb.Spec.Clusters))
	assert.Contains(t, blind.text(), "member cluster member3")
	assert.Contains(t, blind.text(), "member3 is a Pull cluster, which the Karmada cluster proxy does not reach: give a kubeconfig with a context named member3 (--member-kubeconfig FILE")
	require.True(t, time.Now().Before(recovered.Add(laterWindow)), "the reading daemon's window is not over yet")

	// The reading daemon's failback brings pulled back to member3.
	rec := waitRecord(ctx, t, c, "member3", 3*time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool { return rb.Status.FinishTime != nil })
	assert.False(t, rec.CreationTimestamp.Time.Before(recovered.Add(laterWindow-time.Second)), "the reading daemon's failback: created %s", rec.CreationTimestamp)
	assert.Equal(t, []appsv1alpha1.ObjectReference{recordtest.Deploy(ns, "pulled")}, rec.Spec.Workloads)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, rec.Status.ObservedWorkloads[0].Result)
	back, err := c.WaitForPlacement(ctx, ns, binding, 2*time.Minute, pullSplits...)
	require.NoError(t, err, "pulled is back on member3; logs:\n%s", reading.text())
	var onMember3 int32
	for _, tc := range back.Spec.Clusters {
		if tc.Name == "member3" {
			onMember3 = tc.Replicas
		}
	}
	member3, err := kubernetes.NewForConfig(cp.Member("member3").Config)
	require.NoError(t, err)
	require.NoError(t, fixtures.WaitForMemberReady(ctx, member3, ns, "pulled", onMember3, 2*time.Minute), "pulled's pods on member3 get ready")
	reading.waitLog(t, "cluster=member3 record="+rec.Name+" result=succeeded workloads=1 done=1", 2*time.Minute)
	assert.NotContains(t, reading.text(), "member3 is a Pull cluster, which the Karmada cluster proxy does not reach")
}
