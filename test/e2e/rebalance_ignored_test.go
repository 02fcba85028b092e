package e2e

import (
	"context"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestRebalanceIgnoredTriggers covers the bindings the scheduler silently
// passes over, which the WorkloadRebalancer reports as Successful: the
// command writes the trigger as the controller would, says why nothing will
// happen, and does not wait for it.
func TestRebalanceIgnoredTriggers(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "rb-ignored"
	fixtures.TestNamespace(ctx, t, c, ns)

	// Scheduling suspended on a scheduled binding.
	deployWithPolicy(ctx, t, c, ns, "paused", nil, []string{"member1", "member2"}, "paused")
	_, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Patch(ctx, "paused-deployment", types.MergePatchType,
		[]byte(`{"spec":{"suspension":{"scheduling":true}}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	// Handed to another scheduler.
	foreign := fixtures.DynamicWeightPolicy(ns, "foreign", "apps/v1", "Deployment", []string{"foreign"}, []string{"member1"})
	foreign.Spec.SchedulerName = "other-scheduler"
	createWithPolicy(ctx, t, c, ns, "foreign", foreign)

	// Never scheduled: the only cluster allowed does not exist.
	createWithPolicy(ctx, t, c, ns, "nofit", fixtures.DynamicWeightPolicy(ns, "nofit", "apps/v1", "Deployment", []string{"nofit"}, []string{"member9"}))

	// A dependency-only binding: a ConfigMap the Deployment mounts, carried
	// along by propagateDeps without a policy of its own.
	_, err = c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deps"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	withDeps := fixtures.Deployment(ns, "withdeps", 1)
	withDeps.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "deps", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "deps"}}}}}
	_, err = c.Kube.AppsV1().Deployments(ns).Create(ctx, withDeps, metav1.CreateOptions{})
	require.NoError(t, err)
	depsPolicy := duplicatedPolicy(ns, "withdeps", []string{"member1"}, policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "withdeps"})
	depsPolicy.Spec.PropagateDeps = true
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, depsPolicy, metav1.CreateOptions{})
	require.NoError(t, err)
	waitBindingExists(ctx, t, c, ns, "deps-configmap")

	// Let the scheduler see the suspension, the foreign name and the misfit.
	time.Sleep(2 * time.Second)

	// Karmada v1.12 has no spec.suspension.scheduling (added in v1.13): its
	// apiserver drops the field, so that binding is not suspended and the
	// trigger reschedules it.
	suspends := cp.Versions.KarmadaMinor() >= 13
	if !suspends {
		paused, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, "paused-deployment", metav1.GetOptions{})
		require.NoError(t, err)
		require.True(t, paused.Spec.Suspension == nil || paused.Spec.Suspension.Scheduling == nil,
			"Karmada %s kept spec.suspension.scheduling", cp.Versions.Karmada)
	}

	start := time.Now()
	res := rebalanceCmd(t, cp, "deploy/paused", "deploy/foreign", "deploy/nofit", "configmap/deps", "-n", ns, "-o", "wide")
	assert.Less(t, time.Since(start), 30*time.Second, "nothing to wait for")
	require.Equal(t, cmd.ExitFailed, res.code)
	ignored := map[string]string{
		"deployment.apps/paused":  rebalance.ReasonSchedulingSuspended,
		"deployment.apps/foreign": rebalance.ReasonForeignScheduler,
		"deployment.apps/nofit":   rebalance.ReasonNotScheduledYet,
		"configmap/deps":          rebalance.ReasonNoPolicy,
	}
	if suspends {
		assert.Equal(t, "4 workloads: 4 successful, 0 failed, 0 pending; 0 rescheduled, 4 ignored\n", res.stderr)
	} else {
		assert.Equal(t, "4 workloads: 4 successful, 0 failed, 0 pending; 1 rescheduled, 3 ignored\n", res.stderr)
		delete(ignored, "deployment.apps/paused")
		row := tableRow(t, res.stdout, "deployment.apps/paused")
		assert.Equal(t, []string{"Successful", "Scheduled"}, row[1:3])
	}
	for workload, reason := range ignored {
		row := tableRow(t, res.stdout, workload)
		assert.Equal(t, []string{"Successful", "Ignored"}, row[1:3], workload)
		assert.Equal(t, reason, row[7], workload)
	}

	// The trigger is in place, as the controller would have left it: it
	// takes effect if the binding is resumed.
	paused, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, "paused-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, paused.Spec.RescheduleTriggeredAt)
}

// createWithPolicy creates a Deployment and its policy without waiting for
// a schedule that may never come.
func createWithPolicy(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string, policy *policyv1alpha1.PropagationPolicy) {
	t.Helper()
	_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, fixtures.Deployment(ns, name, 3), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	waitBindingExists(ctx, t, c, ns, name+"-deployment")
}

// waitBindingExists waits until Karmada has made a binding.
func waitBindingExists(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}), "binding %s/%s never appeared", ns, name)
}
