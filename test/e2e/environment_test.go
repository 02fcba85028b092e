package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestDefaultEnvironment checks that the harness's default control plane has
// the shape of local-up-karmada, which is what our users run: member1 and
// member2 Push, member3 Pull (registered by karmada-agent, not reachable
// through the cluster proxy), an estimator for every member,
// karmada-descheduler, and karmada-controller-manager with its default
// controllers - the workloadRebalancer one included, shown by what it does
// to a new WorkloadRebalancer.
func TestDefaultEnvironment(t *testing.T) {
	cp := harness.Require(t)
	ctx := fixtures.TestContext(t)
	c := fixtures.TestClients(t, cp.Karmada)

	modes := map[string]clusterv1alpha1.ClusterSyncMode{}
	for _, m := range cp.Members {
		cluster, err := c.Karmada.ClusterV1alpha1().Clusters().Get(ctx, m.Name, metav1.GetOptions{})
		require.NoError(t, err)
		modes[m.Name] = cluster.Spec.SyncMode
		assert.True(t, meta.IsStatusConditionTrue(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady), "%s is Ready", m.Name)
		assert.Positive(t, m.EstimatorPort, "%s has its karmada-scheduler-estimator", m.Name)
	}
	assert.Equal(t, map[string]clusterv1alpha1.ClusterSyncMode{
		"member1": clusterv1alpha1.Push, "member2": clusterv1alpha1.Push, "member3": clusterv1alpha1.Pull,
	}, modes)

	// The control plane reaches Push members through the cluster proxy, and
	// not member3, as in local-up-karmada.
	proxy := func(cluster string) error {
		return c.Kube.CoreV1().RESTClient().Get().
			AbsPath("/apis/cluster.karmada.io/v1alpha1/clusters", cluster, "proxy/api/v1/namespaces/default").
			Do(ctx).Error()
	}
	require.NoError(t, proxy("member1"))
	require.Error(t, proxy("member3"), "the cluster proxy must not serve the Pull member")

	// karmada-descheduler runs, as local-up-karmada deploys it: it holds
	// its lease.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		lease, err := c.Kube.CoordinationV1().Leases("karmada-system").Get(ctx, "karmada-descheduler", metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})
	require.NoError(t, err, "karmada-descheduler holds no lease in karmada-system")

	// Karmada's workloadRebalancer controller runs: it answers a
	// WorkloadRebalancer nobody else touches.
	const ns = "env-default"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "env", nil, []string{"member1", "member2"}, "env")
	name := "env-default-" + fmt.Sprint(time.Now().UnixNano())
	wr := &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "env"},
		}},
	}
	_, err = c.Karmada.AppsV1alpha1().WorkloadRebalancers().Create(ctx, wr, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Karmada.AppsV1alpha1().WorkloadRebalancers().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(got.Status.ObservedWorkloads) == 1 && got.Status.ObservedWorkloads[0].Result == appsv1alpha1.RebalanceSuccessful, nil
	})
	require.NoError(t, err, "karmada-controller-manager's workloadRebalancer controller never answered workloadrebalancer %s", name)
}

// TestPullMemberRunsWorkloads propagates a Deployment to member3 alone: its
// karmada-agent applies the Work there and reports the status back, so the
// binding shows the member's ready replicas.
func TestPullMemberRunsWorkloads(t *testing.T) {
	cp := harness.Require(t)
	ctx := fixtures.TestContext(t)
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "env-pull", "pulled"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, name, nil, []string{"member3"}, name)
	require.NoError(t, fixtures.WaitForMemberReady(ctx, memberClient(t, cp, "member3"), ns, name, 3, 2*time.Minute))
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, name+"-deployment", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range rb.Status.AggregatedStatus {
			if s.ClusterName == "member3" && s.Applied && s.Status != nil {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "karmada-agent never reported the status of %s/%s from member3", ns, name)
}

// TestReadyAfterAnnotation: a pod whose template carries
// harness.kubectl-rebalance.io/ready-after runs at once and turns Ready only
// that long after it started, as a container with a slow readiness probe.
func TestReadyAfterAnnotation(t *testing.T) {
	cp := harness.Require(t)
	ctx := fixtures.TestContext(t)
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name, after = "env-ready-after", "slow", 8 * time.Second
	fixtures.TestNamespace(ctx, t, c, ns)
	d := fixtures.Deployment(ns, name, 1)
	d.Spec.Template.Annotations = map[string]string{harness.ReadyAfterAnnotation: after.String()}
	_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, name, "apps/v1", "Deployment", []string{name}, []string{"member1"}), metav1.CreateOptions{})
	require.NoError(t, err)

	member := memberClient(t, cp, "member1")
	var running *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := member.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		if p := pods.Items[0]; p.Status.Phase == corev1.PodRunning {
			running = &p
		}
		return running != nil, nil
	})
	require.NoError(t, err, "the pod never ran in member1")
	assert.False(t, podReady(running), "a ready-after pod is not Ready when it starts running")

	require.NoError(t, fixtures.WaitForMemberReady(ctx, member, ns, name, 1, 2*time.Minute))
	pod, err := member.CoreV1().Pods(ns).Get(ctx, running.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, podReady(pod))
	require.NotNil(t, pod.Status.StartTime)
	var readyAt time.Time
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			readyAt = cond.LastTransitionTime.Time
		}
	}
	// Both times are the member's, at one-second precision.
	assert.GreaterOrEqual(t, readyAt.Sub(pod.Status.StartTime.Time), after-time.Second,
		"started %s, ready %s", pod.Status.StartTime, readyAt)
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
