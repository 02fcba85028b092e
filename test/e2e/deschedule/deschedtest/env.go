// Package deschedtest holds what the e2e tests of `kubectl rebalance
// deschedule` share, with and without scheduler-estimators: a test's view of
// one namespace on the harness's control plane, member clients, pod counts by
// readiness, polling, and running the command in process.
package deschedtest

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

// WaitTimeout bounds every wait on Karmada or a member cluster: two cores
// run the whole control plane and several tests at once, and on the default
// environment (v1.18 with its manifest's AllAlpha gates, PriorityBasedScheduling
// among them) a binding whose first scheduling attempt failed - a member that
// looked full for a moment while a parallel test filled it - waits among the
// unschedulable bindings for up to 5 minutes (flushed every 30 s) before
// karmada-scheduler tries it again.
const WaitTimeout = 6 * time.Minute

// Env is one test's namespace on the shared control plane.
type Env struct {
	T   *testing.T
	CP  *harness.ControlPlane
	C   *fixtures.Clients
	NS  string
	Ctx context.Context

	mu      sync.Mutex
	members map[string]kubernetes.Interface
}

// New returns the view of namespace ns for t, with a context that ends with
// the test (or after 15 minutes). It does not create the namespace.
func New(t *testing.T, cp *harness.ControlPlane, ns string) *Env {
	t.Helper()
	c, err := fixtures.NewClients(cp.Karmada)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	return &Env{T: t, CP: cp, C: c, NS: ns, Ctx: ctx, members: map[string]kubernetes.Interface{}}
}

// Member returns an admin client of a member cluster.
func (e *Env) Member(name string) kubernetes.Interface {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.members[name]; ok {
		return c
	}
	m := e.CP.Member(name)
	require.NotNil(e.T, m, "member %s", name)
	c, err := kubernetes.NewForConfig(m.Config)
	require.NoError(e.T, err)
	e.members[name] = c
	return c
}

// CreateDeployment creates d in Karmada.
func (e *Env) CreateDeployment(d *appsv1.Deployment) {
	e.T.Helper()
	_, err := e.C.Kube.AppsV1().Deployments(e.NS).Create(e.Ctx, d, metav1.CreateOptions{})
	require.NoError(e.T, err)
}

// Binding reads the binding of Deployment name.
func (e *Env) Binding(name string) *workv1alpha2.ResourceBinding {
	e.T.Helper()
	rb, err := e.C.Karmada.WorkV1alpha2().ResourceBindings(e.NS).Get(e.Ctx, name+"-deployment", metav1.GetOptions{})
	require.NoError(e.T, err)
	return rb
}

// Aggregated places every replica in as few of clusters as possible.
func Aggregated(clusters ...string) policyv1alpha1.Placement {
	return policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated,
		},
	}
}

// DynamicWeight divides replicas over clusters by their available replicas.
func DynamicWeight(clusters ...string) policyv1alpha1.Placement {
	p := Aggregated(clusters...)
	p.ReplicaScheduling.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceWeighted
	p.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}
	return p
}

// PodCounts are the pods of a workload in a member cluster, not being
// deleted: ready ones, ones the member's kube-scheduler reports
// Unschedulable, and all of them.
type PodCounts struct{ Ready, Unschedulable, Total int }

// Pods counts the pods labelled app=name in member.
func (e *Env) Pods(member, name string) PodCounts {
	e.T.Helper()
	list, err := e.Member(member).CoreV1().Pods(e.NS).List(e.Ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(e.T, err)
	var c PodCounts
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		c.Total++
		for _, cond := range pod.Status.Conditions {
			switch {
			case cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue:
				c.Ready++
			case cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable:
				c.Unschedulable++
			}
		}
	}
	return c
}

// WaitPods waits until the pods of name in member are exactly want.
func (e *Env) WaitPods(member, name string, want PodCounts) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("pods of %s in %s", name, member), func() (bool, string) {
		got := e.Pods(member, name)
		return got == want, fmt.Sprintf("%+v, want %+v", got, want)
	})
}

// Eventually polls check until it holds, failing the test with its last
// description after WaitTimeout.
func (e *Env) Eventually(what string, check func() (bool, string)) {
	e.T.Helper()
	var last string
	err := wait.PollUntilContextTimeout(e.Ctx, 500*time.Millisecond, WaitTimeout, true, func(context.Context) (bool, error) {
		ok, desc := check()
		last = desc
		return ok, nil
	})
	require.NoError(e.T, err, "waiting for %s: last seen %s", what, last)
}

// Run runs `kubectl rebalance deschedule ARGS...` in this process against
// the control plane, as the binary's main does.
func (e *Env) Run(args ...string) (code int, stdout, stderr string) {
	return e.RunContext(e.Ctx, args...)
}

// RunContext is Run until ctx ends, for daemons a test stops.
func (e *Env) RunContext(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	e.T.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	root := cmd.NewCmdRebalance(streams)
	root.SetArgs(append([]string{"deschedule", "--kubeconfig", e.CP.Kubeconfig}, args...))
	root.SetContext(ctx)
	code = cmd.Execute(root, streams)
	e.T.Logf("kubectl rebalance deschedule %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// RunJSON runs a pass with -o json in this namespace and decodes it.
func (e *Env) RunJSON(args ...string) (int, *deschedule.PassReport) {
	e.T.Helper()
	code, stdout, _ := e.Run(append([]string{"-n", e.NS, "-o", "json"}, args...)...)
	report := &deschedule.PassReport{}
	require.NoError(e.T, json.Unmarshal([]byte(stdout), report), stdout)
	return code, report
}
