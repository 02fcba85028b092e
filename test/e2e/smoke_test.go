package e2e

import (
	"context"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestControlPlaneSmoke walks Karmada's WorkloadRebalancer tutorial with raw
// API calls, proving the chain every other test relies on: the detector makes
// a binding, the scheduler places it, members run real pods, a NoExecute
// taint evicts, and a reschedule trigger divides over both clusters again.
func TestControlPlaneSmoke(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := fixtures.NewClients(cp.Karmada)
	require.NoError(t, err)

	const ns, name = "smoke", "smoke"
	fixtures.TestNamespace(ctx, t, c, ns)
	_, err = c.Kube.AppsV1().Deployments(ns).Create(ctx, fixtures.Deployment(ns, name, 3), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, name, "apps/v1", "Deployment", []string{name}, []string{"member1", "member2"}), metav1.CreateOptions{})
	require.NoError(t, err)

	rb, err := c.WaitForPlacement(ctx, ns, name+"-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
	member1 := memberClient(t, cp, "member1")
	member2 := memberClient(t, cp, "member2")
	require.NoError(t, fixtures.WaitForMemberReady(ctx, member1, ns, name, replicasIn(rb, "member1"), 2*time.Minute))
	require.NoError(t, fixtures.WaitForMemberReady(ctx, member2, ns, name, replicasIn(rb, "member2"), 2*time.Minute))

	require.NoError(t, c.SetClusterTaint(ctx, "member1", true))
	_, err = c.WaitForPlacement(ctx, ns, name+"-deployment", 2*time.Minute, "{member2:3}")
	require.NoError(t, err)
	require.NoError(t, fixtures.WaitForMemberReady(ctx, member2, ns, name, 3, 2*time.Minute))

	require.NoError(t, c.SetClusterTaint(ctx, "member1", false))
	// Recovery alone changes nothing: that is the problem the plugin solves.
	time.Sleep(5 * time.Second)
	rb, err = c.WaitForPlacement(ctx, ns, name+"-deployment", 10*time.Second, "{member2:3}")
	require.NoError(t, err)

	// A trigger strictly after the last schedule: wait for the next second.
	require.NotNil(t, rb.Status.LastScheduledTime)
	trigger := metav1.NewTime(rb.Status.LastScheduledTime.Add(time.Second))
	for time.Now().Before(trigger.Time) {
		time.Sleep(100 * time.Millisecond)
	}
	rb.Spec.RescheduleTriggeredAt = &trigger
	_, err = c.Karmada.WorkV1alpha2().ResourceBindings(ns).Update(ctx, rb, metav1.UpdateOptions{})
	require.NoError(t, err)
	// A fresh schedule divides over both clusters again. Which one gets two
	// depends on the available replicas at that moment (member1's evicted
	// pods may still count), not necessarily as the first time.
	rb, err = c.WaitForPlacement(ctx, ns, name+"-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
	require.NoError(t, fixtures.WaitForMemberReady(ctx, member1, ns, name, replicasIn(rb, "member1"), 2*time.Minute))
}

func replicasIn(rb *workv1alpha2.ResourceBinding, cluster string) int32 {
	for _, c := range rb.Spec.Clusters {
		if c.Name == cluster {
			return c.Replicas
		}
	}
	return 0
}

func memberClient(t *testing.T, cp *harness.ControlPlane, name string) kubernetes.Interface {
	t.Helper()
	m := cp.Member(name)
	require.NotNil(t, m, "member %s", name)
	client, err := kubernetes.NewForConfig(m.Config)
	require.NoError(t, err)
	return client
}
