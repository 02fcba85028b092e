package deschedule

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// seedEnv is the example of Karmada's descheduler guide, in the default
// namespace as the guide has it; the test removes what it created.
func seedEnv(t *testing.T) *env {
	t.Helper()
	cp := harness.Require(t)
	require.True(t, cp.Members[0].EstimatorPort > 0, "the descheduler example needs karmada-scheduler-estimator, as its prerequisites say")
	return &env{deschedtest.New(t, cp, metav1.NamespaceDefault)}
}

// createSeedExample creates the guide's PropagationPolicy and Deployment:
// nginx, 3 replicas of 2 CPUs each, divided over member1..3 by available
// replicas.
func (e *env) createSeedExample() {
	e.T.Helper()
	e.createSeedExampleReadyAfter("")
}

// createSeedExampleReadyAfter is createSeedExample whose pods get ready
// readyAfter after they start (at once when empty).
func (e *env) createSeedExampleReadyAfter(readyAfter string) {
	e.T.Helper()
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "nginx-propagation"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement:         deschedtest.DynamicWeight("member1", "member2", "member3"),
		},
	}
	_, err := e.C.Karmada.PolicyV1alpha1().PropagationPolicies(e.NS).Create(e.Ctx, policy, metav1.CreateOptions{})
	require.NoError(e.T, err)
	d := fixtures.Deployment(e.NS, "nginx", 3)
	d.Spec.Template.Spec.Containers[0].Name = "nginx"
	d.Spec.Template.Spec.Containers[0].Image = "nginx"
	d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	if readyAfter != "" {
		d.Spec.Template.Annotations = map[string]string{harness.ReadyAfterAnnotation: readyAfter}
	}
	e.CreateDeployment(d)
	e.T.Cleanup(func() {
		ctx := context.Background()
		_ = e.C.Kube.AppsV1().Deployments(e.NS).Delete(ctx, "nginx", metav1.DeleteOptions{})
		_ = e.C.Karmada.PolicyV1alpha1().PropagationPolicies(e.NS).Delete(ctx, "nginx-propagation", metav1.DeleteOptions{})
	})
}

// cordonAll marks every node of member unschedulable, as `kubectl cordon`
// does, and undoes it when the test ends.
func (e *env) cordonAll(member string) {
	e.T.Helper()
	client := e.Member(member)
	nodes, err := client.CoreV1().Nodes().List(e.Ctx, metav1.ListOptions{})
	require.NoError(e.T, err)
	require.NotEmpty(e.T, nodes.Items)
	patch := func(unschedulable bool) []byte {
		return fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
	}
	for _, n := range nodes.Items {
		_, err := client.CoreV1().Nodes().Patch(e.Ctx, n.Name, types.StrategicMergePatchType, patch(true), metav1.PatchOptions{})
		require.NoError(e.T, err)
		e.T.Cleanup(func() {
			_, _ = client.CoreV1().Nodes().Patch(context.Background(), n.Name, types.StrategicMergePatchType, patch(false), metav1.PatchOptions{})
		})
	}
}

// deletePods deletes the pods of Deployment name in member.
func (e *env) deletePods(member, name string) {
	e.T.Helper()
	client := e.Member(member)
	pods, err := client.CoreV1().Pods(e.NS).List(e.Ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(e.T, err)
	for _, p := range pods.Items {
		err := client.CoreV1().Pods(e.NS).Delete(e.Ctx, p.Name, metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			require.NoError(e.T, err)
		}
	}
}

// settledPlacement waits until karmada-scheduler has answered the binding's
// latest spec with a success, and returns its placement.
func (e *env) settledPlacement(name string) map[string]int32 {
	e.T.Helper()
	var placement map[string]int32
	e.Eventually("binding of "+name+" scheduled for its latest spec", func() (bool, string) {
		rb, err := e.C.Karmada.WorkV1alpha2().ResourceBindings(e.NS).Get(e.Ctx, name+"-deployment", metav1.GetOptions{})
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
			meta.IsStatusConditionTrue(rb.Status.Conditions, "Scheduled") && sum == rb.Spec.Replicas
		return done, fmt.Sprintf("%s generation %d observed %d", fixtures.Placement(rb.Spec.Clusters), rb.Generation, rb.Status.SchedulerObservedGeneration)
	})
	return placement
}

// TestDescheduleSeedExample is the example of Karmada's descheduler guide,
// step by step, on a control plane set up as the guide's prerequisites say
// (karmada-scheduler-estimator for every member, karmada-scheduler with
// --enable-scheduler-estimator): cordon every node of member1, delete the
// nginx pod there, and one pass moves the replica that cannot run to another
// member - for good.
func TestDescheduleSeedExample(t *testing.T) {
	// Not parallel: cordoning member1 must not disturb the other tests.
	e := seedEnv(t)
	e.createSeedExample()

	// "It is possible for these 3 replicas to be evenly divided into 3 member
	// clusters": the example needs one in member1.
	before := e.settledPlacement("nginx")
	t.Logf("nginx placed %v", before)
	require.GreaterOrEqual(t, before["member1"], int32(1), "the example starts with a replica in member1")
	for member, n := range before {
		e.WaitPods(member, "nginx", podCounts{Ready: int(n), Total: int(n)})
	}

	// Taint all nodes in member1 and evict the replica.
	e.cordonAll("member1")
	e.deletePods("member1", "nginx")

	// A new pod cannot be scheduled by member1's kube-scheduler.
	want := int(before["member1"])
	e.WaitPods("member1", "nginx", podCounts{Unschedulable: want, Total: want})
	// Karmada reflects the member's status: no ready replica there.
	e.bindingReadyUnknown("nginx-deployment", "member1")
	// Past the one-second threshold the command is given.
	time.Sleep(2 * time.Second)

	code, stdout, stderr := e.Run("--unschedulable-threshold", "1s")
	require.Equal(t, cmd.ExitOK, code, stderr)
	assert.Regexp(t, fmt.Sprintf(`nginx-deployment\s+member1\s+%d\s+<unknown>\s+%d\s+0\s+evict`, want, want), stdout)
	assert.Contains(t, stderr, fmt.Sprintf("descheduled 1 binding(s) moving %d replica(s)", want))

	// The replica is scheduled to other available clusters, and stays there:
	// the estimator tells the scheduler member1 has no room.
	after := e.settledPlacement("nginx")
	t.Logf("nginx placed %v after the pass", after)
	assert.NotContains(t, after, "member1")
	assert.Equal(t, int32(3), after["member2"]+after["member3"])
	e.WaitPods("member1", "nginx", podCounts{})
	for member, n := range after {
		e.WaitPods(member, "nginx", podCounts{Ready: int(n), Total: int(n)})
	}

	// A later pass finds nothing to do: nothing bounced back.
	code, report := e.RunJSON("--unschedulable-threshold", "1s")
	require.Equal(t, cmd.ExitOK, code)
	assert.Zero(t, report.Summary.EvictedReplicas)
	for _, b := range report.Bindings {
		assert.NotEqual(t, deschedule.OutcomeBouncedBack, b.Outcome, "%s", b.Name)
	}
	rb := e.Binding("nginx")
	assert.Equal(t, after, maps.Collect(func(yield func(string, int32) bool) {
		for _, tc := range rb.Spec.Clusters {
			if tc.Replicas > 0 && !yield(tc.Name, tc.Replicas) {
				return
			}
		}
	}))
	var record map[string]any
	require.NoError(t, json.Unmarshal([]byte(rb.Annotations[deschedule.EvictionsAnnotation]), &record))
	assert.Contains(t, record, "member1", "the eviction is recorded on the binding")
}
