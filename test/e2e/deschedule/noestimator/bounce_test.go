package noestimator

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// bounceEnv is the bounce test's view of the control plane: it runs in the
// default namespace, as the descheduler guide's example does.
type bounceEnv struct{ *deschedtest.Env }

func (e *bounceEnv) binding() *workv1alpha2.ResourceBinding {
	e.T.Helper()
	rb, err := e.C.Karmada.WorkV1alpha2().ResourceBindings("default").Get(e.Ctx, "nginx-deployment", metav1.GetOptions{})
	require.NoError(e.T, err)
	return rb
}

// settled waits until the scheduler answered the binding's latest spec and
// returns the replicas it gave member1.
func (e *bounceEnv) settled() (member1 int32, rb *workv1alpha2.ResourceBinding) {
	e.T.Helper()
	e.Eventually("nginx scheduled for its latest spec", func() (bool, string) {
		var err error
		rb, err = e.C.Karmada.WorkV1alpha2().ResourceBindings("default").Get(e.Ctx, "nginx-deployment", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var sum int32
		member1 = 0
		for _, tc := range rb.Spec.Clusters {
			sum += tc.Replicas
			if tc.Name == "member1" {
				member1 = tc.Replicas
			}
		}
		return rb.Status.SchedulerObservedGeneration == rb.Generation && sum == rb.Spec.Replicas &&
			meta.IsStatusConditionTrue(rb.Status.Conditions, "Scheduled"), fixtures.Placement(rb.Spec.Clusters)
	})
	return member1, rb
}

// unschedulableIn waits until n pods of nginx in member1 are Unschedulable,
// and Karmada no longer reports any of them ready.
func (e *bounceEnv) unschedulableIn(n int32) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("%d unschedulable nginx pods in member1, none ready", n), func() (bool, string) {
		pods, err := e.Member("member1").CoreV1().Pods("default").List(e.Ctx, metav1.ListOptions{LabelSelector: "app=nginx"})
		if err != nil {
			return false, err.Error()
		}
		var stuck, total int32
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			total++
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					stuck++
				}
			}
		}
		rb := e.binding()
		ready, known := rebalance.ReadyReplicas(rb.Spec, rb.Status)["member1"]
		// A member Deployment without ready pods reports no readyReplicas:
		// unknown, which counts as below the assignment.
		return stuck == n && total == n && (!known || ready == 0), fmt.Sprintf("%d of %d unschedulable, ready %d (known %t)", stuck, total, ready, known)
	})
	// Past the one-second threshold the passes are given.
	time.Sleep(2 * time.Second)
}

func (e *bounceEnv) pass() (int, *deschedule.PassReport, string) {
	e.T.Helper()
	code, stdout, stderr := e.Run("--unschedulable-threshold", "1s", "-o", "json")
	report := &deschedule.PassReport{}
	require.NoError(e.T, json.Unmarshal([]byte(stdout), report), stdout)
	return code, report, stderr
}

// TestBounceBackWithoutEstimator runs the descheduler guide's example on a
// control plane without estimators, with a large node in member1: cordoned,
// it still counts as room for the scheduler. The first pass evicts the
// replicas member1 cannot run, the scheduler gives them straight back, and the
// next pass reports the bounce once and writes nothing to the placement.
func TestBounceBackWithoutEstimator(t *testing.T) {
	cp := harness.Require(t)
	e := &bounceEnv{deschedtest.New(t, cp, metav1.NamespaceDefault)}

	// A large member1 node, counted in its Cluster's resource summary.
	big := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "member1-big", Labels: map[string]string{"kubernetes.io/hostname": "member1-big", "type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("4Ti"), corev1.ResourcePods: resource.MustParse("500")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("4Ti"), corev1.ResourcePods: resource.MustParse("500")}},
	}
	_, err := e.Member("member1").CoreV1().Nodes().Create(e.Ctx, big, metav1.CreateOptions{})
	require.NoError(t, err)
	// The other tests of the package need member1 as it was: uncordoned,
	// without the large node, and without nginx.
	t.Cleanup(func() {
		ctx := context.Background()
		_ = e.C.Kube.AppsV1().Deployments("default").Delete(ctx, "nginx", metav1.DeleteOptions{})
		_ = e.C.Karmada.PolicyV1alpha1().PropagationPolicies("default").Delete(ctx, "nginx-propagation", metav1.DeleteOptions{})
		_ = e.Member("member1").CoreV1().Nodes().Delete(ctx, big.Name, metav1.DeleteOptions{})
		nodes, err := e.Member("member1").CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, n := range nodes.Items {
			_, _ = e.Member("member1").CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
		}
		// Wait until Karmada no longer counts the large node, which would
		// draw the next tests' replicas to member1.
		_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, deschedtest.WaitTimeout, true, func(ctx context.Context) (bool, error) {
			cluster, err := e.C.Karmada.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
			if err != nil || cluster.Status.ResourceSummary == nil {
				return false, nil
			}
			cpu := cluster.Status.ResourceSummary.Allocatable[corev1.ResourceCPU]
			return cpu.Cmp(resource.MustParse("1000")) < 0, nil
		})
	})
	e.Eventually("member1's resource summary to count the large node", func() (bool, string) {
		cluster, err := e.C.Karmada.ClusterV1alpha1().Clusters().Get(e.Ctx, "member1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		summary := cluster.Status.ResourceSummary
		if summary == nil {
			return false, "no resource summary"
		}
		cpu := summary.Allocatable[corev1.ResourceCPU]
		return cpu.Cmp(resource.MustParse("1000")) > 0, cpu.String()
	})

	// The guide's policy and Deployment.
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nginx-propagation"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2", "member3"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas},
				},
			},
		},
	}
	_, err = e.C.Karmada.PolicyV1alpha1().PropagationPolicies("default").Create(e.Ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	d := fixtures.Deployment("default", "nginx", 3)
	d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	_, err = e.C.Kube.AppsV1().Deployments("default").Create(e.Ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	inMember1, _ := e.settled()
	require.Positive(t, inMember1, "the large node draws replicas to member1")

	// Cordon every node of member1 and delete its nginx pods.
	nodes, err := e.Member("member1").CoreV1().Nodes().List(e.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, n := range nodes.Items {
		_, err := e.Member("member1").CoreV1().Nodes().Patch(e.Ctx, n.Name, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, e.Member("member1").CoreV1().Pods("default").DeleteCollection(e.Ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=nginx"}))
	e.unschedulableIn(inMember1)

	// First pass: the replicas member1 cannot run are evicted...
	code, report, _ := e.pass()
	require.Equal(t, cmd.ExitOK, code)
	require.Len(t, report.Bindings, 1)
	assert.Equal(t, deschedule.OutcomeDescheduled, report.Bindings[0].Outcome)
	assert.Equal(t, inMember1, report.Bindings[0].EvictedReplicas)

	// ...and the scheduler, which sees the cordoned room, puts them back.
	back, rb := e.settled()
	require.Equal(t, inMember1, back, "karmada-scheduler without an estimator returns the replicas to member1: %s", fixtures.Placement(rb.Spec.Clusters))
	e.unschedulableIn(back)

	// Second pass: the bounce is reported, once, and nothing is evicted.
	generation := e.binding().Generation
	code, report, stderr := e.pass()
	require.Equal(t, cmd.ExitOK, code)
	b := report.Bindings[0]
	assert.Equal(t, deschedule.OutcomeBouncedBack, b.Outcome)
	assert.Zero(t, b.EvictedReplicas)
	assert.Contains(t, b.Message, "karmada-scheduler gave cluster(member1)")
	assert.Contains(t, b.Message, "without karmada-scheduler-estimator")
	for _, row := range b.Clusters {
		if row.Cluster == "member1" {
			assert.Equal(t, deschedule.ActionBouncedBack, row.Action)
		}
	}
	assert.Contains(t, stderr, "1 bounced back")
	assert.Equal(t, generation, e.binding().Generation, "the placement is not written again")

	warnings := func() int {
		events, err := e.C.Kube.CoreV1().Events("default").List(e.Ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"reason": deschedule.ReasonDescheduleBouncedBack}.String(),
		})
		require.NoError(t, err)
		for _, ev := range events.Items {
			assert.Equal(t, corev1.EventTypeWarning, ev.Type)
			assert.Contains(t, []string{"ResourceBinding", "Deployment"}, ev.InvolvedObject.Kind)
		}
		return len(events.Items)
	}
	assert.Equal(t, 2, warnings(), "a warning on the binding and on the Deployment")

	// Third pass: still left alone, and no second warning.
	code, report, _ = e.pass()
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, deschedule.OutcomeBouncedBack, report.Bindings[0].Outcome)
	assert.Equal(t, generation, e.binding().Generation)
	assert.Equal(t, 2, warnings())

}
