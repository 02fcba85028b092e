package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestControlPlaneSmoke walks Karmada's WorkloadRebalancer tutorial with raw
// API calls, proving the chain every other test relies on: the detector makes
// a binding, the scheduler places it, members run real pods, a NoExecute
// taint evicts, and a reschedule trigger brings replicas back.
func TestControlPlaneSmoke(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := fixtures.NewClients(cp.Karmada)
	require.NoError(t, err)

	const ns, name = "default", "smoke"
	_, err = c.Kube.AppsV1().Deployments(ns).Create(ctx, fixtures.Deployment(ns, name, 3), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, name, "apps/v1", "Deployment", []string{name}, []string{"member1", "member2"}), metav1.CreateOptions{})
	require.NoError(t, err)

	_, err = c.WaitForPlacement(ctx, ns, name+"-deployment", "{member1:2, member2:1}", 2*time.Minute)
	require.NoError(t, err)
	member1 := memberClient(t, cp, "member1")
	member2 := memberClient(t, cp, "member2")
	require.NoError(t, fixtures.WaitForMemberReady(ctx, member1, ns, name, 2, 2*time.Minute))
	require.NoError(t, fixtures.WaitForMemberReady(ctx, member2, ns, name, 1, 2*time.Minute))

	require.NoError(t, c.SetClusterTaint(ctx, "member1", true))
	_, err = c.WaitForPlacement(ctx, ns, name+"-deployment", "{member2:3}", 2*time.Minute)
	require.NoError(t, err)
	require.NoError(t, fixtures.WaitForMemberReady(ctx, member2, ns, name, 3, 2*time.Minute))

	require.NoError(t, c.SetClusterTaint(ctx, "member1", false))
	// Recovery alone changes nothing: that is the problem the plugin solves.
	time.Sleep(5 * time.Second)
	rb, err := c.WaitForPlacement(ctx, ns, name+"-deployment", "{member2:3}", 10*time.Second)
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
	_, err = c.WaitForPlacement(ctx, ns, name+"-deployment", "{member1:2, member2:1}", 2*time.Minute)
	require.NoError(t, err)
	require.NoError(t, fixtures.WaitForMemberReady(ctx, member1, ns, name, 2, 2*time.Minute))
}

func memberClient(t *testing.T, cp *harness.ControlPlane, name string) kubernetes.Interface {
	t.Helper()
	m := cp.Member(name)
	require.NotNil(t, m, "member %s", name)
	client, err := kubernetes.NewForConfig(m.Config)
	require.NoError(t, err)
	return client
}
