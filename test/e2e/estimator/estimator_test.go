package estimator

import (
	"context"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/estimate"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestPlanSeedStoryWithEstimators is the seed's failover and recovery on the
// default control plane: plan predicts the fresh division of deployment/app
// (dynamic weights, so it depends on the estimators' answers), -C
// member1 selects it, and karmada-scheduler writes what was predicted.
func TestPlanSeedStoryWithEstimators(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "estimator-seed"
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, "app")
	_, err := c.WaitForPlacement(ctx, ns, "app-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
	fixtures.Failover(ctx, t, c, ns, "app-deployment")
	require.NoError(t, c.SetClusterTaint(ctx, "member1", false))
	waitUntainted(ctx, t, c, "member1")

	plan := report(t, cp, "plan", "deployment/app", "-n", ns)
	require.Len(t, plan.Workloads, 1)
	p := plan.Workloads[0]
	require.Equal(t, string(predict.WouldMove), p.Verdict, "%s: %s", p.Reason, p.Message)
	assert.Contains(t, fixtures.TutorialSplits, text(p.Placements.Predicted))

	run := report(t, cp, "deployment/app", "-n", ns, "-C", "member1")
	require.Len(t, run.Workloads, 1, "-C member1 selects the seed workload")
	r := run.Workloads[0]
	require.NotNil(t, r.PredictionMatched, "%s: %s", r.Reason, r.Message)
	assert.True(t, *r.PredictionMatched, "predicted %s (or %s), karmada-scheduler wrote %s",
		text(r.Placements.Predicted), text(r.Placements.Alternative), text(r.Placements.After))
	assert.Contains(t, fixtures.TutorialSplits, text(r.Placements.After))
}

// TestPlanCordonedMemberWithEstimators cordons every node of member2: its
// Cluster summary still counts them (the general estimator would divide over
// both members), but its karmada-scheduler-estimator leaves them out, so
// karmada-scheduler puts a fresh division on member1 alone. The plan, which
// computes the estimator's answer from member2's nodes, says the same.
func TestPlanCordonedMemberWithEstimators(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "estimator-cordon"
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, "web")
	_, err := c.WaitForPlacement(ctx, ns, "web-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)

	member2, err := kubernetes.NewForConfig(cp.Member("member2").Config)
	require.NoError(t, err)
	setCordoned(ctx, t, member2, true)
	t.Cleanup(func() { setCordoned(context.Background(), t, member2, false) })

	plan := report(t, cp, "plan", "deployment/web", "-n", ns)
	require.Len(t, plan.Workloads, 1)
	p := plan.Workloads[0]
	require.Equal(t, string(predict.WouldMove), p.Verdict, "%s: %s", p.Reason, p.Message)
	assert.Equal(t, "{member1:3}", text(p.Placements.Predicted))

	run := report(t, cp, "deployment/web", "-n", ns, "-C", "member1")
	require.Len(t, run.Workloads, 1)
	assert.Equal(t, "{member1:3}", text(run.Workloads[0].Placements.After), "karmada-scheduler left the cordoned member out")
	require.NotNil(t, run.Workloads[0].PredictionMatched)
	assert.True(t, *run.Workloads[0].PredictionMatched)
}

// TestMembersReadThroughContexts reads the members as a Pull member is read,
// through the kubeconfig context named like it, and gets the answers the
// Karmada cluster proxy gives; without such a context the member is
// unreadable and the error says what fixes it.
func TestMembersReadThroughContexts(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	list, err := c.Karmada.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var push, pull []*clusterv1alpha1.Cluster
	for i := range list.Items {
		// member3 is a real Pull member, which only its context reaches;
		// the Push members are read both ways and must agree.
		if list.Items[i].Spec.SyncMode == clusterv1alpha1.Push {
			push = append(push, &list.Items[i])
		}
		asPull := list.Items[i].DeepCopy()
		asPull.Spec.SyncMode = clusterv1alpha1.Pull
		pull = append(pull, asPull)
	}
	kubeconfig, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	require.NoError(t, err)

	byProxy, failed := estimate.Reader{Karmada: cp.Karmada}.Read(ctx, push)
	require.Empty(t, failed)
	byContext, failed := estimate.Reader{Karmada: cp.Karmada, Kubeconfig: kubeconfig}.Read(ctx, pull)
	require.Empty(t, failed)
	req := &workv1alpha2.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
	for _, cl := range push {
		want, err := byProxy[cl.Name].MaxAvailableReplicas(ctx, req)
		require.NoError(t, err)
		got, err := byContext[cl.Name].MaxAvailableReplicas(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, want, got, cl.Name)
		assert.Positive(t, got, cl.Name)
	}
	require.Len(t, push, 2, "member1 and member2 are Push members")
	require.Contains(t, byContext, "member3")
	got, err := byContext["member3"].MaxAvailableReplicas(ctx, req)
	require.NoError(t, err)
	assert.Positive(t, got, "the Pull member3 read through its context")

	_, failed = estimate.Reader{Karmada: cp.Karmada}.Read(ctx, pull[:1])
	require.Len(t, failed, 1)
	assert.ErrorContains(t, failed[pull[0].Name], pull[0].Name+" is a Pull cluster, which the Karmada cluster proxy does not reach: give a kubeconfig with a context named "+pull[0].Name+" (--member-kubeconfig FILE")
}

// TestFailbackSeedStoryWithEstimators is the seed tutorial on the default
// control plane with the failback daemon running and no other command: after
// the failover and the recovery, the workload is back on member1 once the
// 5 s window passed.
func TestFailbackSeedStoryWithEstimators(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "estimator-failback"
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, "foo")
	_, err := c.WaitForPlacement(ctx, ns, "foo-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
	logs := startFailback(t, cp, "-n", ns, "--stabilization-window", "5s", "--ttl", "600", "--leader-elect-identity", "estimator-seed")

	fixtures.Failover(ctx, t, c, ns, "foo-deployment")
	require.NoError(t, c.SetClusterTaint(ctx, "member1", false))

	_, err = c.WaitForPlacement(ctx, ns, "foo-deployment", 3*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err, "foo is back on member1 without any command; daemon logs:\n%s", logs.Text())
	var rec *appsv1alpha1.WorkloadRebalancer
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().List(ctx, metav1.ListOptions{
			LabelSelector: failback.LabelManagedBy + "=" + failback.ManagedBy + "," + failback.LabelCluster + "=member1"})
		if err != nil || len(list.Items) == 0 {
			return false, nil
		}
		rec = &list.Items[len(list.Items)-1]
		return rec.Status.FinishTime != nil, nil
	})
	require.NoError(t, err, "a finished failback record; daemon logs:\n%s", logs.Text())
	assert.Equal(t, []appsv1alpha1.ObjectReference{rt.Deploy(ns, "foo")}, rec.Spec.Workloads)
	_ = c.Karmada.AppsV1alpha1().WorkloadRebalancers().Delete(context.Background(), rec.Name, metav1.DeleteOptions{})
}

// waitUntainted waits until Karmada's Cluster shows no taint of the tests.
func waitUntainted(ctx context.Context, t *testing.T, c *fixtures.Clients, cluster string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cl, err := c.Karmada.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, taint := range cl.Spec.Taints {
			if taint.Key == fixtures.RebalanceTaintKey {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err)
}

// setCordoned cordons (or uncordons) every node of a member.
func setCordoned(ctx context.Context, t *testing.T, kube kubernetes.Interface, cordoned bool) {
	t.Helper()
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	patch := []byte(`{"spec":{"unschedulable":false}}`)
	if cordoned {
		patch = []byte(`{"spec":{"unschedulable":true}}`)
	}
	for _, n := range nodes.Items {
		_, err := kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	}
}
