package noestimator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// caseLabel selects the dedicated nodes of one test: its pods carry a
// nodeSelector on it, so only nodes the test creates can run them.
const caseLabel = "deschedule-e2e/case"

// waitTimeout bounds every wait on Karmada or a member cluster. Two cores run
// the whole control plane and several tests at once.
const waitTimeout = 3 * time.Minute

// env is one test's namespace on the shared control plane.
type env struct {
	t   *testing.T
	cp  *harness.ControlPlane
	c   *fixtures.Clients
	ns  string
	ctx context.Context

	mu      sync.Mutex
	members map[string]kubernetes.Interface
}

// newEnv creates namespace ns in Karmada, which propagates it to every
// member, and deletes it when the test ends.
func newEnv(t *testing.T, ns string) *env {
	t.Helper()
	cp := harness.Require(t)
	c, err := fixtures.NewClients(cp.Karmada)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, cp: cp, c: c, ns: ns, ctx: ctx, members: map[string]kubernetes.Interface{}}
	fixtures.TestNamespace(ctx, t, c, ns)
	return e
}

// member returns an admin client of a member cluster.
func (e *env) member(name string) kubernetes.Interface {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.members[name]; ok {
		return c
	}
	m := e.cp.Member(name)
	require.NotNil(e.t, m, "member %s", name)
	c, err := kubernetes.NewForConfig(m.Config)
	require.NoError(e.t, err)
	e.members[name] = c
	return c
}

// workload is a Deployment whose pods need 1 CPU on a node of this test.
func (e *env) workload(name string, replicas int32) *appsv1.Deployment {
	d := fixtures.Deployment(e.ns, name, replicas)
	spec := &d.Spec.Template.Spec
	spec.NodeSelector = map[string]string{caseLabel: e.ns}
	spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	return d
}

// createDeployment creates d in Karmada.
func (e *env) createDeployment(d *appsv1.Deployment) {
	e.t.Helper()
	_, err := e.c.Kube.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

// updateDeployment changes the Deployment name in Karmada, retrying on conflicts.
func (e *env) updateDeployment(name string, mutate func(*appsv1.Deployment)) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := e.c.Kube.AppsV1().Deployments(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mutate(d)
		_, err = e.c.Kube.AppsV1().Deployments(e.ns).Update(ctx, d, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	require.NoError(e.t, err)
}

// aggregated places every replica in as few of clusters as possible.
func aggregated(clusters ...string) policyv1alpha1.Placement {
	return policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated,
		},
	}
}

// dynamicWeight divides replicas by the clusters' available replicas.
func dynamicWeight(clusters ...string) policyv1alpha1.Placement {
	p := aggregated(clusters...)
	p.ReplicaScheduling.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceWeighted
	p.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}
	return p
}

// createPolicy propagates the named Deployments with placement.
func (e *env) createPolicy(name string, placement policyv1alpha1.Placement, deployments ...string) {
	e.t.Helper()
	selectors := make([]policyv1alpha1.ResourceSelector, 0, len(deployments))
	for _, d := range deployments {
		selectors = append(selectors, policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: d})
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec:       policyv1alpha1.PropagationSpec{ResourceSelectors: selectors, Placement: placement},
	}
	_, err := e.c.Karmada.PolicyV1alpha1().PropagationPolicies(e.ns).Create(e.ctx, policy, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

// node adds a kwok node with cpu CPUs and this test's label to a member,
// and removes it when the test ends.
func (e *env) node(member string, cpu int) {
	e.t.Helper()
	client := e.member(member)
	name := fmt.Sprintf("%s-%s-%d", e.ns, member, time.Now().UnixNano()%100000)
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
				caseLabel: e.ns, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	_, err := client.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// binding reads the binding of Deployment name.
func (e *env) binding(name string) *workv1alpha2.ResourceBinding {
	e.t.Helper()
	rb, err := e.c.Karmada.WorkV1alpha2().ResourceBindings(e.ns).Get(e.ctx, name+"-deployment", metav1.GetOptions{})
	require.NoError(e.t, err)
	return rb
}

// waitPlacement waits until Deployment name is placed as one of want.
func (e *env) waitPlacement(name string, want ...string) *workv1alpha2.ResourceBinding {
	e.t.Helper()
	rb, err := e.c.WaitForPlacement(e.ctx, e.ns, name+"-deployment", waitTimeout, want...)
	require.NoError(e.t, err)
	return rb
}

// waitScheduled waits until Deployment name has a scheduling result with
// every replica placed, and returns its binding.
func (e *env) waitScheduled(name string) *workv1alpha2.ResourceBinding {
	e.t.Helper()
	var rb *workv1alpha2.ResourceBinding
	e.eventually(fmt.Sprintf("binding of %s scheduled", name), func() (bool, string) {
		got, err := e.c.Karmada.WorkV1alpha2().ResourceBindings(e.ns).Get(e.ctx, name+"-deployment", metav1.GetOptions{})
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

// podCounts are the pods of a Deployment in a member cluster, not being
// deleted: ready ones, ones the member's kube-scheduler reports
// Unschedulable, and all of them.
type podCounts struct{ ready, unschedulable, total int }

// pods counts the pods of Deployment name in member.
func (e *env) pods(member, name string) podCounts {
	e.t.Helper()
	list, err := e.member(member).CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{"app": name}).String(),
	})
	require.NoError(e.t, err)
	var c podCounts
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		c.total++
		for _, cond := range pod.Status.Conditions {
			switch {
			case cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue:
				c.ready++
			case cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable:
				c.unschedulable++
			}
		}
	}
	return c
}

// waitPods waits until the pods of Deployment name in member are exactly want.
func (e *env) waitPods(member, name string, want podCounts) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("pods of %s in %s", name, member), func() (bool, string) {
		got := e.pods(member, name)
		return got == want, fmt.Sprintf("%+v, want %+v", got, want)
	})
}

// waitReady waits until the binding of Deployment name reports want ready
// replicas for cluster; nil waits for an unknown (absent) count.
func (e *env) waitReady(name, cluster string, want *int32) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("ready replicas of %s in %s", name, cluster), func() (bool, string) {
		rb, err := e.c.Karmada.WorkV1alpha2().ResourceBindings(e.ns).Get(e.ctx, name+"-deployment", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready, ok := deschedule.ReadyReplicas(rb)[cluster]
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

// eventually polls check until it holds, failing the test with its last
// description after waitTimeout.
func (e *env) eventually(what string, check func() (bool, string)) {
	e.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(e.ctx, 500*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		ok, desc := check()
		last = desc
		return ok, nil
	})
	require.NoError(e.t, err, "waiting for %s: last seen %s", what, last)
}

// run runs `kubectl rebalance deschedule ARGS...` in this process against
// the control plane, as the binary's main does.
func (e *env) run(args ...string) (code int, stdout, stderr string) {
	return e.runContext(e.ctx, args...)
}

func (e *env) runContext(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	root := cmd.NewCmdRebalance(streams)
	root.SetArgs(append([]string{"deschedule", "--kubeconfig", e.cp.Kubeconfig}, args...))
	root.SetContext(ctx)
	code = cmd.Execute(root, streams)
	e.t.Logf("kubectl rebalance deschedule %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// runJSON runs a pass with -o json in this namespace and decodes it.
func (e *env) runJSON(args ...string) (int, *deschedule.PassReport) {
	e.t.Helper()
	code, stdout, _ := e.run(append([]string{"-n", e.ns, "-o", "json"}, args...)...)
	report := &deschedule.PassReport{}
	require.NoError(e.t, json.Unmarshal([]byte(stdout), report), stdout)
	return code, report
}

// events lists this tool's events about an object of this namespace.
func (e *env) events(kind, name string) []corev1.Event {
	e.t.Helper()
	list, err := e.c.Kube.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "source": deschedule.EventComponent}.String(),
	})
	require.NoError(e.t, err)
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
