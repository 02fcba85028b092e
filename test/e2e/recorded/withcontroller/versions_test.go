package withcontroller

import (
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestControllerTTLByRelease shows, without the plugin, the difference that
// makes `--server-side --ttl` delete the record itself on Karmada v1.12:
// Karmada's own controller deletes a finished WorkloadRebalancer when its
// ttl runs out from v1.13 on, and never on v1.12 (karmada#5989).
func TestControllerTTLByRelease(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name = "co-ttl-release", "co-ttl-release"
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, "web")
	rt.DeleteRebalancerAfter(t, c, name)

	_, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Create(ctx, &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1alpha1.WorkloadRebalancerSpec{
			Workloads:               []appsv1alpha1.ObjectReference{rt.Deploy(ns, "web")},
			TTLSecondsAfterFinished: ptr.To[int32](1),
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	if cp.Versions.KarmadaAtLeast(13) {
		rt.WaitRebalancer(ctx, t, c, name, time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool { return rb == nil })
		return
	}
	finished := rt.WaitRebalancer(ctx, t, c, name, time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool {
		return rb != nil && rb.Status.FinishTime != nil
	})
	// Well past the ttl, the finished object is still there: nothing will
	// come back to it.
	time.Sleep(time.Until(finished.Status.FinishTime.Add(10 * time.Second)))
	require.NotNil(t, rt.Rebalancer(ctx, t, c, name), "Karmada %s deleted the finished workloadrebalancer", cp.Versions.Karmada)
}
