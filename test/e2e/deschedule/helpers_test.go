package deschedule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// waitTimeout bounds every wait on Karmada or a member cluster.
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

// createDeployment creates d in Karmada.
func (e *env) createDeployment(d *appsv1.Deployment) {
	e.t.Helper()
	_, err := e.c.Kube.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

// dynamicWeight divides replicas over clusters by their available replicas.
func dynamicWeight(clusters ...string) policyv1alpha1.Placement {
	return policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas},
		},
	}
}

// binding reads the binding of Deployment name.
func (e *env) binding(name string) *workv1alpha2.ResourceBinding {
	e.t.Helper()
	rb, err := e.c.Karmada.WorkV1alpha2().ResourceBindings(e.ns).Get(e.ctx, name+"-deployment", metav1.GetOptions{})
	require.NoError(e.t, err)
	return rb
}

// podCounts are the pods of a workload in a member cluster, not being
// deleted: ready ones, ones the member's kube-scheduler reports
// Unschedulable, and all of them.
type podCounts struct{ ready, unschedulable, total int }

// pods counts the pods labelled app=name in member.
func (e *env) pods(member, name string) podCounts {
	e.t.Helper()
	list, err := e.member(member).CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
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

// waitPods waits until the pods of name in member are exactly want.
func (e *env) waitPods(member, name string, want podCounts) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("pods of %s in %s", name, member), func() (bool, string) {
		got := e.pods(member, name)
		return got == want, fmt.Sprintf("%+v, want %+v", got, want)
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
	e.t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	root := cmd.NewCmdRebalance(streams)
	root.SetArgs(append([]string{"deschedule", "--kubeconfig", e.cp.Kubeconfig}, args...))
	root.SetContext(e.ctx)
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
