package deschedule

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// namespacedEnv is a test's own namespace on the shared control plane,
// propagated to every member and deleted when the test ends. The seed's
// example needs karmada-scheduler-estimator, as its prerequisites say:
// without it karmada-scheduler still counts member1's cordoned nodes and
// puts the replica straight back.
func namespacedEnv(t *testing.T, ns string) *env {
	t.Helper()
	cp := harness.Require(t)
	if !estimatorRunning(cp) {
		t.Skip("the seed's example needs karmada-scheduler-estimator, which this control plane does not run")
	}
	e := &env{deschedtest.New(t, cp, ns)}
	fixtures.TestNamespace(e.Ctx, t, e.C, ns)
	return e
}

// estimatorRunning reports whether the harness runs karmada-scheduler-estimator
// for the members. The field is read by name so that these tests build
// against harnesses with and without estimators.
func estimatorRunning(cp *harness.ControlPlane) bool {
	if len(cp.Members) == 0 {
		return false
	}
	port := reflect.ValueOf(cp.Members[0]).Elem().FieldByName("EstimatorPort")
	return port.IsValid() && port.CanInt() && port.Int() > 0
}

// statefulSet is the seed example's workload as a StatefulSet: nginx pods
// of 2 CPUs each, labelled app=NAME.
func statefulSet(ns, name string, replicas int32) *appsv1.StatefulSet {
	d := fixtures.Deployment(ns, name, replicas)
	tpl := d.Spec.Template
	tpl.Spec.Containers[0].Name, tpl.Spec.Containers[0].Image = "nginx", "nginx"
	tpl.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: d.Labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    d.Spec.Selector,
			Template:    tpl,
			// Pods start and stop together, as a Deployment's do.
			PodManagementPolicy: appsv1.ParallelPodManagement,
		},
	}
}

// kindPolicy propagates one workload of kind with placement.
func (e *env) kindPolicy(apiVersion, kind, name string, placement policyv1alpha1.Placement) {
	e.T.Helper()
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: apiVersion, Kind: kind, Name: name}},
			Placement:         placement,
		},
	}
	_, err := e.C.Karmada.PolicyV1alpha1().PropagationPolicies(e.NS).Create(e.Ctx, policy, metav1.CreateOptions{})
	require.NoError(e.T, err)
}

// settledBinding waits until karmada-scheduler has answered the latest spec
// of the binding named binding with a success, and returns its placement.
func (e *env) settledBinding(binding string) map[string]int32 {
	e.T.Helper()
	var placement map[string]int32
	e.Eventually("binding "+binding+" scheduled for its latest spec", func() (bool, string) {
		rb, err := e.C.Karmada.WorkV1alpha2().ResourceBindings(e.NS).Get(e.Ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		placement = map[string]int32{}
		var sum int32
		for _, tc := range rb.Spec.Clusters {
			if tc.Replicas > 0 {
				placement[tc.Name] = tc.Replicas
			}
			sum += tc.Replicas
		}
		done := rb.Status.SchedulerObservedGeneration == rb.Generation &&
			meta.IsStatusConditionTrue(rb.Status.Conditions, "Scheduled") && sum == rb.Spec.Replicas && sum > 0
		return done, fmt.Sprintf("%s generation %d observed %d", fixtures.Placement(rb.Spec.Clusters), rb.Generation, rb.Status.SchedulerObservedGeneration)
	})
	return placement
}

// strandIn is the seed example's set-up for a workload of three replicas
// divided over the members: it waits for them to run, cordons every node of
// member and deletes the pods there, then waits until the controller's
// replacements are unschedulable, the binding's ready count for member is
// unknown, and the pass's one-second threshold has passed. It returns the
// placement it started from and how many replicas are stranded in member.
func (e *env) strandIn(member, binding, name string, waitPods func(member, name string, want podCounts)) (map[string]int32, int) {
	e.T.Helper()
	before := e.settledBinding(binding)
	e.T.Logf("%s placed %v", name, before)
	require.GreaterOrEqual(e.T, before[member], int32(1), "the example starts with a replica in %s", member)
	for m, n := range before {
		waitPods(m, name, podCounts{Ready: int(n), Total: int(n)})
	}

	e.cordonAll(member)
	e.deletePods(member, name)
	want := int(before[member])
	waitPods(member, name, podCounts{Unschedulable: want, Total: want})
	e.bindingReadyUnknown(binding, member)
	time.Sleep(2 * time.Second) // past the one-second threshold of the pass
	return before, want
}

// strandInMember1 is strandIn for member1, where the seed example strands
// its replica; it returns how many replicas are stranded.
func (e *env) strandInMember1(binding, name string, waitPods func(member, name string, want podCounts)) int {
	e.T.Helper()
	_, want := e.strandIn("member1", binding, name, waitPods)
	return want
}

// movedOffMember1 checks the placement after an evicting pass: nothing left
// in member1, the three replicas in member2 and member3, and running there.
func (e *env) movedOffMember1(binding, name string, waitPods func(member, name string, want podCounts)) {
	e.T.Helper()
	after := e.settledBinding(binding)
	e.T.Logf("%s placed %v after the pass", name, after)
	assert.NotContains(e.T, after, "member1")
	assert.Equal(e.T, int32(3), after["member2"]+after["member3"])
	waitPods("member1", name, podCounts{})
	for member, n := range after {
		waitPods(member, name, podCounts{Ready: int(n), Total: int(n)})
	}
}

// bindingReadyUnknown waits until cluster has reported a status for the
// binding without a ready count: nothing ready there.
func (e *env) bindingReadyUnknown(binding, cluster string) {
	e.T.Helper()
	e.Eventually("no ready replicas of "+binding+" in "+cluster, func() (bool, string) {
		rb, err := e.C.Karmada.WorkV1alpha2().ResourceBindings(e.NS).Get(e.Ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range rb.Status.AggregatedStatus {
			if s.ClusterName == cluster && s.Status != nil {
				_, known := rebalance.ReadyReplicas(rb.Spec, rb.Status)[cluster]
				return !known, string(s.Status.Raw)
			}
		}
		return false, "no status from " + cluster
	})
}

// TestDescheduleSeedExampleStatefulSet is the seed's descheduler example
// with a StatefulSet in place of the Deployment: cordon every node of
// member1, delete the pod there, and one pass moves the replica that the
// StatefulSet controller cannot place again to another member, for good.
// The pod is found through its controller (the member's StatefulSet) and
// counted because it is of the StatefulSet's update revision.
func TestDescheduleSeedExampleStatefulSet(t *testing.T) {
	// Not parallel: cordoning member1 must not disturb the other tests.
	e := namespacedEnv(t, "seed-sts")
	const name, binding = "web", "web-statefulset"
	e.kindPolicy("apps/v1", "StatefulSet", name, deschedtest.DynamicWeight("member1", "member2", "member3"))
	_, err := e.C.Kube.AppsV1().StatefulSets(e.NS).Create(e.Ctx, statefulSet(e.NS, name, 3), metav1.CreateOptions{})
	require.NoError(t, err)

	// The StatefulSet controller recreates the pod, which member1 cannot place.
	want := e.strandInMember1(binding, name, e.WaitPods)

	code, stdout, stderr := e.Run("-n", e.NS, "--unschedulable-threshold", "1s")
	require.Equal(t, cmd.ExitOK, code, stderr)
	assert.Regexp(t, fmt.Sprintf(`%s\s+member1\s+%d\s+<unknown>\s+%d\s+0\s+evict`, binding, want, want), stdout)
	assert.Contains(t, stderr, fmt.Sprintf("descheduled 1 binding(s) moving %d replica(s)", want))

	e.movedOffMember1(binding, name, e.WaitPods)

	// A later pass finds nothing to do: nothing bounced back.
	code, report := e.RunJSON("--unschedulable-threshold", "1s")
	require.Equal(t, cmd.ExitOK, code)
	assert.Zero(t, report.Summary.EvictedReplicas)
	for _, b := range report.Bindings {
		assert.NotEqual(t, deschedule.OutcomeBouncedBack, b.Outcome, "%s", b.Name)
	}

	// --kinds leaves StatefulSets out of scope; the opt-out annotation on
	// the template skips the binding, with its reason.
	code, report = e.RunJSON("--kinds", "deployments.apps")
	require.Equal(t, cmd.ExitOK, code)
	assert.Zero(t, report.Summary.Listed)
	sts, err := e.C.Kube.AppsV1().StatefulSets(e.NS).Get(e.Ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	metav1.SetMetaDataAnnotation(&sts.ObjectMeta, deschedule.SkipAnnotation, "true")
	_, err = e.C.Kube.AppsV1().StatefulSets(e.NS).Update(e.Ctx, sts, metav1.UpdateOptions{})
	require.NoError(t, err)
	code, report = e.RunJSON("--kinds", "sts")
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, 1, report.Summary.Listed)
	assert.Empty(t, report.Bindings)
	require.Len(t, report.Skipped, 1)
	assert.Equal(t, deschedule.SkipOptedOut, report.Skipped[0].Code)
	assert.Equal(t, binding, report.Skipped[0].Name)
}

// TestDescheduleStatefulSetKeepsReadyPods: a StatefulSet of three replicas
// runs in one member; its lowest ordinal is recreated on cordoned nodes and
// stays Pending while the two above it are Ready. Lowering the member's
// replicas would delete the highest ordinal, a Ready pod, and leave the
// Pending one where it is: the pass leaves the StatefulSet alone and says
// why, and both Ready pods keep running.
func TestDescheduleStatefulSetKeepsReadyPods(t *testing.T) {
	// Not parallel: cordoning a member must not disturb the other tests.
	e := namespacedEnv(t, "sts-ordinals")
	const name, binding = "db", "db-statefulset"
	e.kindPolicy("apps/v1", "StatefulSet", name, deschedtest.Aggregated("member1", "member2"))
	sts := statefulSet(e.NS, name, 3)
	sts.Spec.Template.Annotations = map[string]string{harness.ReadyAfterAnnotation: "5s"}
	_, err := e.C.Kube.AppsV1().StatefulSets(e.NS).Create(e.Ctx, sts, metav1.CreateOptions{})
	require.NoError(t, err)
	before := e.settledBinding(binding)
	require.Len(t, before, 1, "aggregated in one member: %v", before)
	var member string
	for m := range before {
		member = m
	}
	e.WaitPods(member, name, podCounts{Ready: 3, Total: 3})

	e.cordonAll(member)
	require.NoError(t, e.Member(member).CoreV1().Pods(e.NS).Delete(e.Ctx, name+"-0", metav1.DeleteOptions{}))
	e.WaitPods(member, name, podCounts{Ready: 2, Unschedulable: 1, Total: 3})
	time.Sleep(2 * time.Second) // past the one-second threshold of the pass

	code, report := e.RunJSON("-n", e.NS, "--unschedulable-threshold", "1s")
	require.Equal(t, cmd.ExitOK, code)
	require.Len(t, report.Bindings, 1)
	b := report.Bindings[0]
	assert.Equal(t, deschedule.OutcomeBlocked, b.Outcome)
	assert.Contains(t, b.Message, "highest ordinals")
	assert.Contains(t, b.Message, name+"-0")
	assert.Zero(t, report.Summary.EvictedReplicas)

	time.Sleep(3 * time.Second)
	assert.Equal(t, before, e.settledBinding(binding), "the binding is left as it was")
	for _, ordinal := range []string{"-1", "-2"} {
		pod, err := e.Member(member).CoreV1().Pods(e.NS).Get(e.Ctx, name+ordinal, metav1.GetOptions{})
		require.NoError(t, err, "Ready pod %s%s is kept", name, ordinal)
		assert.Nil(t, pod.DeletionTimestamp)
	}
}
