package noestimator

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// caseLabel selects the dedicated nodes of one test: its pods carry a
// nodeSelector on it, so only nodes the test creates can run them.
const caseLabel = "deschedule-e2e/case"

// env is one test's namespace on the shared control plane; what it can do
// is shared with the tests that run with scheduler-estimators.
type env struct{ *deschedtest.Env }

type podCounts = deschedtest.PodCounts

// newEnv creates namespace ns in Karmada, which propagates it to every
// member, and deletes it when the test ends.
func newEnv(t *testing.T, ns string) *env {
	t.Helper()
	cp := harness.Require(t)
	e := &env{deschedtest.New(t, cp, ns)}
	fixtures.TestNamespace(e.Ctx, t, e.C, ns)
	return e
}

// workload is a Deployment whose pods need 1 CPU on a node of this test.
func (e *env) workload(name string, replicas int32) *appsv1.Deployment {
	d := fixtures.Deployment(e.NS, name, replicas)
	spec := &d.Spec.Template.Spec
	spec.NodeSelector = map[string]string{caseLabel: e.NS}
	spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	return d
}

// updateDeployment changes the Deployment name in Karmada, retrying on conflicts.
func (e *env) updateDeployment(name string, mutate func(*appsv1.Deployment)) {
	e.T.Helper()
	err := wait.PollUntilContextTimeout(e.Ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := e.C.Kube.AppsV1().Deployments(e.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mutate(d)
		_, err = e.C.Kube.AppsV1().Deployments(e.NS).Update(ctx, d, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	require.NoError(e.T, err)
}

// createPolicy propagates the named Deployments with placement.
func (e *env) createPolicy(name string, placement policyv1alpha1.Placement, deployments ...string) {
	e.T.Helper()
	selectors := make([]policyv1alpha1.ResourceSelector, 0, len(deployments))
	for _, d := range deployments {
		selectors = append(selectors, policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: d})
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name},
		Spec:       policyv1alpha1.PropagationSpec{ResourceSelectors: selectors, Placement: placement},
	}
	_, err := e.C.Karmada.PolicyV1alpha1().PropagationPolicies(e.NS).Create(e.Ctx, policy, metav1.CreateOptions{})
	require.NoError(e.T, err)
}

// node adds a kwok node with cpu CPUs and this test's label to a member,
// and removes it when the test ends.
func (e *env) node(member string, cpu int) {
	e.T.Helper()
	client := e.Member(member)
	name := fmt.Sprintf("%s-%s-%d", e.NS, member, time.Now().UnixNano()%100000)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(cpu), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		// As many pod slots as CPUs: the node adds what it runs, no more,
		// to Karmada's estimate of the member.
		corev1.ResourcePods: *resource.NewQuantity(int64(cpu), resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				caseLabel: e.NS, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	_, err := client.CoreV1().Nodes().Create(e.Ctx, node, metav1.CreateOptions{})
	require.NoError(e.T, err)
	e.T.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// waitPlacement waits until Deployment name is placed as one of want.
func (e *env) waitPlacement(name string, want ...string) *workv1alpha2.ResourceBinding {
	e.T.Helper()
	rb, err := e.C.WaitForPlacement(e.Ctx, e.NS, name+"-deployment", deschedtest.WaitTimeout, want...)
	require.NoError(e.T, err)
	return rb
}

// waitScheduled waits until Deployment name has a scheduling result with
// every replica placed, and returns its binding.
func (e *env) waitScheduled(name string) *workv1alpha2.ResourceBinding {
	e.T.Helper()
	var rb *workv1alpha2.ResourceBinding
	e.Eventually(fmt.Sprintf("binding of %s scheduled", name), func() (bool, string) {
		got, err := e.C.Karmada.WorkV1alpha2().ResourceBindings(e.NS).Get(e.Ctx, name+"-deployment", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		rb = got
		var sum int32
		for _, tc := range got.Spec.Clusters {
			sum += tc.Replicas
		}
		return sum > 0 && sum == got.Spec.Replicas, fixtures.Placement(got.Spec.Clusters)
	})
	return rb
}

// waitReady waits until the binding of Deployment name reports want ready
// replicas for cluster; nil waits for an unknown (absent) count.
func (e *env) waitReady(name, cluster string, want *int32) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("ready replicas of %s in %s", name, cluster), func() (bool, string) {
		rb, err := e.C.Karmada.WorkV1alpha2().ResourceBindings(e.NS).Get(e.Ctx, name+"-deployment", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready, ok := rebalance.ReadyReplicas(rb.Spec, rb.Status)[cluster]
		hasStatus := slices.ContainsFunc(rb.Status.AggregatedStatus, func(s workv1alpha2.AggregatedStatusItem) bool {
			return s.ClusterName == cluster && s.Status != nil
		})
		if want == nil {
			// Unknown, but only once the cluster has reported a status:
			// a missing readyReplicas, not a missing report.
			return !ok && hasStatus, fmt.Sprintf("ready=%d known=%t reported=%t", ready, ok, hasStatus)
		}
		return ok && ready == *want, fmt.Sprintf("ready=%d known=%t", ready, ok)
	})
}

// events lists this tool's events about an object of this namespace.
func (e *env) events(kind, name string) []corev1.Event {
	e.T.Helper()
	list, err := e.C.Kube.CoreV1().Events(e.NS).List(e.Ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "source": deschedule.EventComponent}.String(),
	})
	require.NoError(e.T, err)
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) })
	return list.Items
}

// clusterOf returns the report row of cluster in a binding report.
func clusterOf(t *testing.T, b deschedule.BindingReport, cluster string) deschedule.ClusterReport {
	t.Helper()
	for _, c := range b.Clusters {
		if c.Cluster == cluster {
			return c
		}
	}
	t.Fatalf("binding %s has no cluster %s: %+v", b.Name, cluster, b.Clusters)
	return deschedule.ClusterReport{}
}

// bindingOf returns the report of the binding of Deployment name.
func bindingOf(t *testing.T, r *deschedule.PassReport, name string) deschedule.BindingReport {
	t.Helper()
	for _, b := range r.Bindings {
		if b.Name == name+"-deployment" {
			return b
		}
	}
	t.Fatalf("pass has no binding for %s: %+v", name, r.Bindings)
	return deschedule.BindingReport{}
}

func int32p(v int32) *int32 { return &v }
