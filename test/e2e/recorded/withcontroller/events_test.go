package withcontroller

import (
	"strings"
	"testing"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/kubectl/pkg/describe"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestRecordedRunEvents records a waved run of two workloads and one
// without a binding: by the time the command has exited, its
// WorkloadRebalancer carries the run's history as Events (started, each
// workload rescheduled or failed, finished), from kubectl-rebalance, and
// `kubectl describe workloadrebalancer NAME` shows them.
func TestRecordedRunEvents(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	ns := "rec-events-" + utilrand.String(5)
	name := ns
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, "web", "api")
	rt.DeleteRebalancerAfter(t, c, name)

	res := rt.Rebalance(t, cp, "deploy/web", "deploy/api", "deploy/ghost", "-n", ns, "--name", name, "--max-in-flight", "1")
	require.Equal(t, cmd.ExitFailed, res.Code, "ghost has no binding")
	assert.NotContains(t, res.Stderr, "were not recorded")
	rb := rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rb)

	// Read at once: the command flushed them before it exited. A
	// WorkloadRebalancer is cluster-scoped: its events are in default.
	list, err := c.Kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "WorkloadRebalancer", "involvedObject.name": name, "involvedObject.uid": string(rb.UID),
	}.String()})
	require.NoError(t, err)
	byReason := map[string][]corev1.Event{}
	var reasons []string
	for _, e := range list.Items {
		assert.Equal(t, "kubectl-rebalance", e.Source.Component, e.Reason)
		assert.Equal(t, appsv1alpha1.SchemeGroupVersion.String(), e.InvolvedObject.APIVersion)
		byReason[e.Reason] = append(byReason[e.Reason], e)
		reasons = append(reasons, e.Reason+": "+e.Message)
	}
	t.Logf("events of workloadrebalancer %s:\n%s", name, strings.Join(reasons, "\n"))
	require.Len(t, byReason[run.ReasonStarted], 1)
	assert.Equal(t, "Rebalancing 3 workloads, in waves of at most 1 in flight", byReason[run.ReasonStarted][0].Message)
	rescheduled := byReason[run.ReasonRescheduled]
	require.Len(t, rescheduled, 2, "web and api")
	for _, e := range rescheduled {
		assert.Equal(t, corev1.EventTypeNormal, e.Type)
		assert.Regexp(t, `^Deployment `+ns+`/(web|api) rescheduled: \{.*\} -> \{.*\}`, e.Message)
	}
	require.Len(t, byReason[run.ReasonFailed], 1)
	failed := byReason[run.ReasonFailed][0]
	assert.Equal(t, corev1.EventTypeWarning, failed.Type)
	assert.Contains(t, failed.Message, "Deployment "+ns+"/ghost failed: ReferencedBindingNotFound")
	require.Len(t, byReason[run.ReasonFinished], 1)
	finished := byReason[run.ReasonFinished][0]
	assert.Equal(t, corev1.EventTypeWarning, finished.Type, "one workload failed")
	assert.Equal(t, "Finished: 3 workloads: 2 successful, 1 failed, 0 pending; 2 rescheduled, 0 ignored", finished.Message)
	assert.Empty(t, byReason[run.ReasonInterrupted])
	first, last := byReason[run.ReasonStarted][0], finished
	assert.False(t, last.FirstTimestamp.Before(&first.FirstTimestamp), "started before it finished")

	// What kubectl describe prints.
	mapping := &meta.RESTMapping{
		Resource:         schema.GroupVersionResource{Group: "apps.karmada.io", Version: "v1alpha1", Resource: "workloadrebalancers"},
		GroupVersionKind: appsv1alpha1.SchemeGroupVersion.WithKind("WorkloadRebalancer"),
		Scope:            meta.RESTScopeRoot,
	}
	describer, ok := describe.GenericDescriberFor(mapping, cp.Karmada)
	require.True(t, ok)
	out, err := describer.Describe("", name, describe.DescriberSettings{ShowEvents: true, ChunkSize: 500})
	require.NoError(t, err)
	t.Logf("kubectl describe workloadrebalancer %s:\n%s", name, out)
	for _, want := range []string{"Events:", run.ReasonStarted, run.ReasonRescheduled, run.ReasonFailed, run.ReasonFinished, "kubectl-rebalance"} {
		assert.Contains(t, out, want)
	}
}
