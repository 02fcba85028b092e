package noestimator

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubectl/pkg/describe"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
)

// fillerPods is the number of pod slots of a member's base node: that many
// pending pods make Karmada's general estimator see no room in the member.
const fillerPods = 60

// filler makes Karmada see member as full, until the returned func removes
// it: a Deployment of pending pods in the member itself, which Karmada counts
// as allocating.
func (e *env) filler(member string) (remove func()) {
	e.T.Helper()
	client := e.Member(member)
	d := fixtures.Deployment("default", "filler-"+e.NS, fillerPods)
	d.Spec.Template.Spec.NodeSelector = map[string]string{caseLabel: "nowhere"}
	_, err := client.AppsV1().Deployments("default").Create(e.Ctx, d, metav1.CreateOptions{})
	require.NoError(e.T, err)
	e.waitFull(member, true)
	removed := false
	remove = func() {
		if removed {
			return
		}
		removed = true
		background := metav1.DeletePropagationBackground
		require.NoError(e.T, client.AppsV1().Deployments("default").Delete(context.Background(), d.Name, metav1.DeleteOptions{PropagationPolicy: &background}))
		e.waitFull(member, false)
	}
	e.T.Cleanup(remove)
	return remove
}

// waitFull waits until Karmada's view of member has no free pod slot, or
// has the filler's slots back.
func (e *env) waitFull(member string, full bool) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("Karmada seeing %s full=%t", member, full), func() (bool, string) {
		c, err := e.C.Karmada.ClusterV1alpha1().Clusters().Get(e.Ctx, member, metav1.GetOptions{})
		if err != nil || c.Status.ResourceSummary == nil {
			return false, fmt.Sprint(err)
		}
		s := c.Status.ResourceSummary
		free := s.Allocatable.Pods().Value() - s.Allocated.Pods().Value() - s.Allocating.Pods().Value()
		if full {
			return free <= 0, fmt.Sprintf("%d free pod slots", free)
		}
		return s.Allocating.Pods().Value() < fillerPods, fmt.Sprintf("%d allocating pods", s.Allocating.Pods().Value())
	})
}

// TestDescheduleMovesReplicasElsewhere is the descheduler's whole story on
// the real control plane: Karmada places 4 replicas in member1 while member2
// looks full; member1 can only run one of them; a pass gives the other three
// back; the real karmada-scheduler puts them in member2, which now has room,
// and they run there. The pass is recorded in events that kubectl describe
// shows on the Deployment and on its binding.
//
// It is not parallel: the fillers change what Karmada sees of member1 and
// member2 for every workload.
func TestDescheduleMovesReplicasElsewhere(t *testing.T) {
	e := newEnv(t, "scale")

	// Karmada must put everything in member1 first.
	member2Free := e.filler("member2")
	e.CreateDeployment(e.workload("web", 4))
	e.createPolicy("web", deschedtest.DynamicWeight("member1", "member2"), "web")
	e.waitPlacement("web", "{member1:4}")

	// member1 has room for one pod of the workload only.
	e.node("member1", 1)
	e.WaitPods("member1", "web", podCounts{Ready: 1, Unschedulable: 3, Total: 4})
	e.waitReady("web", "member1", int32p(1))

	// Now member2 has room and member1 looks full to Karmada.
	e.filler("member1")
	member2Free()
	e.node("member2", 4)

	// The pods have been Unschedulable for a few seconds only: with the
	// default threshold nothing counts yet.
	code, stdout, stderr := e.Run("-n", e.NS)
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, ""+
		"BINDING          CLUSTER   SPEC   READY   UNSCHEDULABLE   NEW   ACTION\n"+
		"web-deployment   member1   4      1       0               4     none\n", stdout)
	assert.Contains(t, stderr, "1 binding(s) listed, 1 candidate(s), descheduled 0 binding(s) moving 0 replica(s) in ")

	before := e.Binding("web")
	code, stdout, stderr = e.Run("-n", e.NS, "--unschedulable-threshold", "1s")
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, ""+
		"BINDING          CLUSTER   SPEC   READY   UNSCHEDULABLE   NEW   ACTION\n"+
		"web-deployment   member1   4      1       3               1     evict\n", stdout)
	assert.Contains(t, stderr, "1 binding(s) listed, 1 candidate(s), descheduled 1 binding(s) moving 3 replica(s) in ")

	// The real scheduler places the three missing replicas in member2, and
	// member1 keeps the one that runs.
	rb := e.waitPlacement("web", "{member1:1, member2:3}")
	assert.Greater(t, rb.Generation, before.Generation)
	e.WaitPods("member2", "web", podCounts{Ready: 3, Total: 3})
	e.WaitPods("member1", "web", podCounts{Ready: 1, Total: 1})
	e.waitReady("web", "member2", int32p(3))

	// kubectl describe shows the events on the Deployment and on the binding.
	// The From column is the source component and host.
	eventLine := `Normal\s+DescheduleBindingSucceed\s+\S+\s+kubectl-rebalance-deschedule(, \S+)?\s+` +
		regexp.QuoteMeta("Binding has been descheduled, 3 replica(s) in cluster(member1), 3 total descheduled replica(s)")
	deployDescriber, ok := describe.DescriberFor(schema.GroupKind{Group: "apps", Kind: "Deployment"}, e.CP.Karmada)
	require.True(t, ok)
	out, err := deployDescriber.Describe(e.NS, "web", describe.DescriberSettings{ShowEvents: true, ChunkSize: 500})
	require.NoError(t, err)
	assert.Regexp(t, eventLine, out)

	bindingMapping := &meta.RESTMapping{
		Resource:         workv1alpha2.SchemeGroupVersion.WithResource("resourcebindings"),
		GroupVersionKind: workv1alpha2.SchemeGroupVersion.WithKind("ResourceBinding"),
		Scope:            meta.RESTScopeNamespace,
	}
	bindingDescriber, ok := describe.GenericDescriberFor(bindingMapping, e.CP.Karmada)
	require.True(t, ok)
	out, err = bindingDescriber.Describe(e.NS, "web-deployment", describe.DescriberSettings{ShowEvents: true, ChunkSize: 500})
	require.NoError(t, err)
	assert.Regexp(t, eventLine, out)

	events := e.events("ResourceBinding", "web-deployment")
	require.Len(t, events, 1)
	assert.Equal(t, rb.UID, events[0].InvolvedObject.UID)
	assert.Equal(t, "work.karmada.io/v1alpha2", events[0].InvolvedObject.APIVersion)
	events = e.events("Deployment", "web")
	require.Len(t, events, 1)
	assert.Equal(t, rb.Spec.Resource.UID, events[0].InvolvedObject.UID)
	assert.Equal(t, corev1.EventTypeNormal, events[0].Type)

	// Everything runs now: the next pass has nothing to do.
	code, stdout, stderr = e.Run("-n", e.NS, "--unschedulable-threshold", "0s")
	require.Equal(t, cmd.ExitOK, code)
	assert.Empty(t, stdout, "every cluster of the binding is ready, so no row is shown")
	assert.Contains(t, stderr, "descheduled 0 binding(s) moving 0 replica(s)")
	code, stdout, _ = e.Run("-n", e.NS, "-o", "wide", "--unschedulable-threshold", "0s")
	require.Equal(t, cmd.ExitOK, code)
	assert.Regexp(t, `web-deployment\s+member1\s+1\s+1\s+<none>\s+1\s+ready\s+unchanged\s+every cluster has all its replicas ready`, stdout)
	assert.Regexp(t, `web-deployment\s+member2\s+3\s+3\s+<none>\s+3\s+ready\s+unchanged\s+every cluster has all its replicas ready`, stdout)
	assert.Equal(t, "{member1:1, member2:3}", fixtures.Placement(e.Binding("web").Spec.Clusters))
}
