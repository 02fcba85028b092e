package e2e

import (
	"context"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// commandResult is what a user sees of one run of the command.
type commandResult struct {
	code           int
	stdout, stderr string
}

// rebalanceCmd runs `kubectl rebalance ARGS` in process against the
// control plane's kubeconfig, with a private discovery cache.
func rebalanceCmd(t *testing.T, cp *harness.ControlPlane, args ...string) commandResult {
	t.Helper()
	r := fixtures.RunPlugin(t, cp.Kubeconfig, args...)
	return commandResult{code: r.Code, stdout: r.Stdout, stderr: r.Stderr}
}

// deployWithPolicy creates Deployments with the tutorial's dynamic-weight
// policy over clusters and waits until each is scheduled.
func deployWithPolicy(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, policy string, labels map[string]string, clusters []string, names ...string) {
	t.Helper()
	for _, name := range names {
		d := fixtures.Deployment(ns, name, 3)
		for k, v := range labels {
			d.Labels[k] = v
		}
		_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, policy, "apps/v1", "Deployment", names, clusters), metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range names {
		fixtures.WaitScheduled(ctx, t, c, ns, name+"-deployment")
	}
}

// waitClusterScheduled waits until a cluster-scoped binding has been scheduled.
func waitClusterScheduled(ctx context.Context, t *testing.T, c *fixtures.Clients, name string) *workv1alpha2.ClusterResourceBinding {
	t.Helper()
	var crb *workv1alpha2.ClusterResourceBinding
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.Karmada.WorkV1alpha2().ClusterResourceBindings().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		crb = got
		return got.Status.LastScheduledTime != nil && len(got.Spec.Clusters) > 0 && got.Status.SchedulerObservedGeneration == got.Generation, nil
	})
	require.NoError(t, err, "clusterresourcebinding %s never scheduled", name)
	return crb
}

// duplicatedPolicy propagates the named resources of several kinds to clusters.
func duplicatedPolicy(ns, name string, clusters []string, selectors ...policyv1alpha1.ResourceSelector) *policyv1alpha1.PropagationPolicy {
	return &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: selectors,
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}},
		},
	}
}

// clusterRoleWithPolicy creates a ClusterRole and a ClusterPropagationPolicy
// for it, and waits for its binding to be scheduled.
func clusterRoleWithPolicy(ctx context.Context, t *testing.T, c *fixtures.Clients, name, bindingName string, clusters []string) {
	t.Helper()
	_, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	policyName := strings.ReplaceAll(name, ":", "-")
	_, err = c.Karmada.PolicyV1alpha1().ClusterPropagationPolicies().Create(ctx, &policyv1alpha1.ClusterPropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: name}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		bg := context.Background()
		_ = c.Karmada.PolicyV1alpha1().ClusterPropagationPolicies().Delete(bg, policyName, metav1.DeleteOptions{})
		_ = c.Kube.RbacV1().ClusterRoles().Delete(bg, name, metav1.DeleteOptions{})
	})
	waitClusterScheduled(ctx, t, c, bindingName)
}

// tableRow returns the cells of the table line that has workload as a
// cell, from that cell on: the NAMESPACE column, when present, comes first
// and is empty for cluster-scoped workloads. Placements hold ", " and are
// kept whole.
func tableRow(t *testing.T, table, workload string) []string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		cells := fixtures.SplitCells(line)
		for i, cell := range cells {
			if cell == workload {
				return cells[i:]
			}
		}
	}
	require.Failf(t, "row not found", "no row for %s in:\n%s", workload, table)
	return nil
}

// samePlacement compares "{a:1, b:2}" placements regardless of order.
func samePlacement(want, got string) bool {
	parts := func(p string) []string {
		ps := strings.Split(strings.TrimSuffix(strings.TrimPrefix(p, "{"), "}"), ", ")
		sort.Strings(ps)
		return ps
	}
	return slices.Equal(parts(want), parts(got))
}

// writeFile writes a manifest for -f.
func writeFile(path string, data []byte) error {
	return os.WriteFile(path, data, 0o600)
}
