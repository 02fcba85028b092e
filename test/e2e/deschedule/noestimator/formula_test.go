package noestimator

import (
	"fmt"
	"sort"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"
)

func rollingUpdate(maxSurge, maxUnavailable int) appsv1.DeploymentStrategy {
	return appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge:       ptr.To(intstr.FromInt32(int32(maxSurge))),
			MaxUnavailable: ptr.To(intstr.FromInt32(int32(maxUnavailable))),
		},
	}
}

// assertEvents checks that the pass recorded message once on the binding of
// Deployment name and once on the Deployment, as karmada-descheduler does.
func (e *env) assertEvents(name, message string) {
	e.T.Helper()
	for kind, object := range map[string]string{"ResourceBinding": name + "-deployment", "Deployment": name} {
		events := e.events(kind, object)
		require.Len(e.T, events, 1, "events on %s %s", kind, object)
		assert.Equal(e.T, corev1.EventTypeNormal, events[0].Type)
		assert.Equal(e.T, deschedule.ReasonDescheduleSucceed, events[0].Reason)
		assert.Equal(e.T, message, events[0].Message)
	}
}

// TestDescheduleFormula checks karmada-descheduler's formula case by case
// with pods that real member schedulers leave Unschedulable.
func TestDescheduleFormula(t *testing.T) {
	t.Parallel()

	// Running pods are never given up: member1 runs 2 pods of the old
	// template while the 2 pods of the new one cannot be placed. 3 - 2 = 1
	// would drop a running pod, so the assignment stops at the 2 ready.
	t.Run("ready floor", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "floor")
		d := e.workload("web", 3)
		d.Spec.Strategy = rollingUpdate(1, 1)
		e.CreateDeployment(d)
		e.createPolicy("web", deschedtest.Aggregated("member1"), "web")
		e.waitPlacement("web", "{member1:3}")
		e.node("member1", 3)
		e.WaitPods("member1", "web", podCounts{Ready: 3, Total: 3})

		e.updateDeployment("web", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.NodeSelector["deschedule-e2e/variant"] = "v2" // no node has it
		})
		e.WaitPods("member1", "web", podCounts{Ready: 2, Unschedulable: 2, Total: 4})
		e.waitReady("web", "member1", int32p(2))

		code, report := e.RunJSON("--unschedulable-threshold", "0s")
		require.Equal(t, cmd.ExitOK, code)
		b := bindingOf(t, report, "web")
		assert.Equal(t, deschedule.ClusterReport{
			Cluster: "member1", Spec: 3, Ready: int32p(2), Unschedulable: int32p(2), New: 2, Evicted: 1, Action: deschedule.ActionEvict,
		}, clusterOf(t, b, "member1"))
		assert.Equal(t, deschedule.OutcomeDescheduled, b.Outcome)
		const message = "Binding has been descheduled, 1 replica(s) in cluster(member1), 1 total descheduled replica(s)"
		assert.Equal(t, message, b.Message)
		e.assertEvents("web", message)
	})

	// Pods of the previous template do not count: member2 has 3 pending
	// pods of the old ReplicaSet and 1 of the current one. Counting all 4
	// would exceed the assignment of 3 and change nothing.
	t.Run("old replicaset", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "oldrs")
		d := e.workload("web", 3)
		d.Spec.Strategy = rollingUpdate(1, 0)
		e.CreateDeployment(d)
		e.createPolicy("web", deschedtest.Aggregated("member2"), "web")
		e.waitPlacement("web", "{member2:3}")
		e.WaitPods("member2", "web", podCounts{Unschedulable: 3, Total: 3})

		e.updateDeployment("web", func(d *appsv1.Deployment) {
			d.Spec.Template.Annotations = map[string]string{"deschedule-e2e/revision": "2"}
		})
		e.WaitPods("member2", "web", podCounts{Unschedulable: 4, Total: 4})
		e.waitReady("web", "member2", nil)
		replicaSets, err := e.Member("member2").AppsV1().ReplicaSets(e.NS).List(e.Ctx, metav1.ListOptions{LabelSelector: "app=web"})
		require.NoError(t, err)
		require.Len(t, replicaSets.Items, 2, "the old and the current ReplicaSet")

		code, report := e.RunJSON("--unschedulable-threshold", "0s")
		require.Equal(t, cmd.ExitOK, code)
		b := bindingOf(t, report, "web")
		assert.Equal(t, deschedule.ClusterReport{
			Cluster: "member2", Spec: 3, Ready: nil, Unschedulable: int32p(1), New: 2, Evicted: 1, Action: deschedule.ActionEvict,
		}, clusterOf(t, b, "member2"))
		e.assertEvents("web", "Binding has been descheduled, 1 replica(s) in cluster(member2), 1 total descheduled replica(s)")
	})

	// No pod runs, so member3 reports no ready count at all; unknown counts
	// as below the assignment and every replica may go. The threshold
	// decides first: pods pending for seconds do not count against 5m.
	t.Run("unknown ready and threshold", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "unknown")
		e.CreateDeployment(e.workload("web", 2))
		e.createPolicy("web", deschedtest.Aggregated("member3"), "web")
		e.waitPlacement("web", "{member3:2}")
		e.WaitPods("member3", "web", podCounts{Unschedulable: 2, Total: 2})
		e.waitReady("web", "member3", nil)

		code, report := e.RunJSON()
		require.Equal(t, cmd.ExitOK, code)
		assert.Equal(t, "5m0s", report.UnschedulableThreshold)
		b := bindingOf(t, report, "web")
		assert.Equal(t, deschedule.ClusterReport{
			Cluster: "member3", Spec: 2, Unschedulable: int32p(0), New: 2, Action: deschedule.ActionNone,
		}, clusterOf(t, b, "member3"))
		assert.Equal(t, deschedule.OutcomeUnchanged, b.Outcome)
		assert.Empty(t, e.events("ResourceBinding", "web-deployment"))

		code, report = e.RunJSON("--unschedulable-threshold", "0s")
		require.Equal(t, cmd.ExitOK, code)
		b = bindingOf(t, report, "web")
		assert.Equal(t, deschedule.ClusterReport{
			Cluster: "member3", Spec: 2, Unschedulable: int32p(2), New: 0, Evicted: 2, Action: deschedule.ActionEvict,
		}, clusterOf(t, b, "member3"))
		e.assertEvents("web", "Binding has been descheduled, 2 replica(s) in cluster(member3), 2 total descheduled replica(s)")
	})

	// More pods are unschedulable than the cluster is assigned: the count is
	// stale (here member1 never got the scale-down, dispatching is
	// suspended), and Karmada leaves such a cluster alone.
	t.Run("unschedulable above spec", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "overspec")
		e.CreateDeployment(e.workload("web", 4))
		e.createPolicy("web", deschedtest.Aggregated("member1"), "web")
		e.waitPlacement("web", "{member1:4}")
		e.WaitPods("member1", "web", podCounts{Unschedulable: 4, Total: 4})

		policies := e.C.Karmada.PolicyV1alpha1().PropagationPolicies(e.NS)
		policy, err := policies.Get(e.Ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		policy.Spec.Suspension = &policyv1alpha1.Suspension{Dispatching: ptr.To(true)}
		_, err = policies.Update(e.Ctx, policy, metav1.UpdateOptions{})
		require.NoError(t, err)
		e.Eventually("dispatching suspended on the binding", func() (bool, string) {
			s := e.Binding("web").Spec.Suspension
			return s != nil && ptr.Deref(s.Dispatching, false), fmt.Sprintf("%+v", s)
		})
		e.updateDeployment("web", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](2) })
		e.waitPlacement("web", "{member1:2}")
		e.waitReady("web", "member1", nil)

		code, report := e.RunJSON("--unschedulable-threshold", "0s")
		require.Equal(t, cmd.ExitOK, code)
		b := bindingOf(t, report, "web")
		assert.Equal(t, deschedule.ClusterReport{
			Cluster: "member1", Spec: 2, Unschedulable: int32p(4), New: 2, Action: deschedule.ActionOverSpec,
		}, clusterOf(t, b, "member1"))
		assert.Equal(t, deschedule.OutcomeUnchanged, b.Outcome)
		assert.Contains(t, b.Message, "cluster member1 has more unschedulable pods than assigned replicas")
		assert.Empty(t, e.events("ResourceBinding", "web-deployment"))
	})

	// One binding over three clusters: one runs everything, one misses a
	// single pod (and keeps its ready ones), one runs nothing. Karmada
	// chooses the split; the test sizes each cluster's nodes after it.
	t.Run("several clusters", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "multi")
		e.CreateDeployment(e.workload("web", 6))
		e.createPolicy("web", deschedtest.DynamicWeight("member1", "member2", "member3"), "web")
		rb := e.waitScheduled("web")
		require.Len(t, rb.Spec.Clusters, 3, "6 replicas over 3 roomy clusters use all three")
		byShare := append(rb.Spec.Clusters[:0:0], rb.Spec.Clusters...)
		sort.SliceStable(byShare, func(i, j int) bool { return byShare[i].Replicas > byShare[j].Replicas })
		short, full, empty := byShare[0], byShare[1], byShare[2]
		require.GreaterOrEqual(t, short.Replicas, int32(2))

		e.node(short.Name, int(short.Replicas-1))
		e.node(full.Name, int(full.Replicas))
		e.WaitPods(short.Name, "web", podCounts{Ready: int(short.Replicas - 1), Unschedulable: 1, Total: int(short.Replicas)})
		e.WaitPods(full.Name, "web", podCounts{Ready: int(full.Replicas), Total: int(full.Replicas)})
		e.WaitPods(empty.Name, "web", podCounts{Unschedulable: int(empty.Replicas), Total: int(empty.Replicas)})
		e.waitReady("web", short.Name, int32p(short.Replicas-1))
		e.waitReady("web", full.Name, int32p(full.Replicas))
		e.waitReady("web", empty.Name, nil)

		code, report := e.RunJSON("--unschedulable-threshold", "0s")
		require.Equal(t, cmd.ExitOK, code)
		b := bindingOf(t, report, "web")
		want := map[string]deschedule.ClusterReport{
			short.Name: {Cluster: short.Name, Spec: short.Replicas, Ready: int32p(short.Replicas - 1), Unschedulable: int32p(1),
				New: short.Replicas - 1, Evicted: 1, Action: deschedule.ActionEvict},
			full.Name: {Cluster: full.Name, Spec: full.Replicas, Ready: int32p(full.Replicas), New: full.Replicas, Action: deschedule.ActionReady},
			empty.Name: {Cluster: empty.Name, Spec: empty.Replicas, Unschedulable: int32p(empty.Replicas), New: 0,
				Evicted: empty.Replicas, Action: deschedule.ActionEvict},
		}
		message := "Binding has been descheduled"
		for _, tc := range rb.Spec.Clusters {
			assert.Equal(t, want[tc.Name], clusterOf(t, b, tc.Name))
			if n := want[tc.Name].Evicted; n > 0 {
				message += fmt.Sprintf(", %d replica(s) in cluster(%s)", n, tc.Name)
			}
		}
		message += fmt.Sprintf(", %d total descheduled replica(s)", 1+empty.Replicas)
		assert.Equal(t, message, b.Message)
		assert.Equal(t, 1+empty.Replicas, report.Summary.EvictedReplicas)
		e.assertEvents("web", message)
	})
}
