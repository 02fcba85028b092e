package watch

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
)

var (
	t0   = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	web  = rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	orig = []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 3}}
	next = []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}}
)

func at(d time.Duration) *metav1.Time { t := metav1.NewTime(t0.Add(d)); return &t }

// binding builds a Deployment's binding placed on clusters; opts change it.
func binding(clusters []workv1alpha2.TargetCluster, opts ...func(*workv1alpha2.ResourceBinding)) *workv1alpha2.ResourceBinding {
	b := &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment", Generation: 4},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			Replicas: 3, Clusters: clusters,
		},
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

func withLedger(l handover.Ledger) func(*workv1alpha2.ResourceBinding) {
	return func(b *workv1alpha2.ResourceBinding) {
		raw, _ := json.Marshal(l)
		b.Annotations = map[string]string{handover.LedgerAnnotation: string(raw)}
		b.Spec.Suspension = &workv1alpha2.Suspension{}
		yes := true
		b.Spec.Suspension.Scheduling = &yes
	}
}

func withReady(cluster string, ready int) func(*workv1alpha2.ResourceBinding) {
	return func(b *workv1alpha2.ResourceBinding) {
		raw, _ := json.Marshal(map[string]int{"readyReplicas": ready, "replicas": ready})
		b.Status.AggregatedStatus = append(b.Status.AggregatedStatus, workv1alpha2.AggregatedStatusItem{ClusterName: cluster, Applied: true, Status: &runtime.RawExtension{Raw: raw}})
	}
}

func triggered(trigger, scheduled *metav1.Time, cond metav1.ConditionStatus) func(*workv1alpha2.ResourceBinding) {
	return func(b *workv1alpha2.ResourceBinding) {
		b.Spec.RescheduleTriggeredAt = trigger
		b.Status.LastScheduledTime = scheduled
		b.Status.SchedulerObservedGeneration = b.Generation
		if cond != "" {
			b.Status.Conditions = []metav1.Condition{{Type: workv1alpha2.Scheduled, Status: cond, Reason: "Success", LastTransitionTime: *scheduled}}
		}
	}
}

func TestClassify(t *testing.T) {
	listed := Entry{Workload: web, Listed: true}
	successful := Entry{Workload: web, Listed: true, Result: appsv1alpha1.RebalanceSuccessful}
	cases := []struct {
		name   string
		entry  Entry
		b      *workv1alpha2.ResourceBinding
		before []workv1alpha2.TargetCluster
		state  State
		ready  string
		reason string
		after  []workv1alpha2.TargetCluster
	}{
		{name: "planned, not listed", entry: Entry{Workload: web}, b: binding(orig), state: StateWaiting, reason: "not started yet"},
		{name: "listed, no result, no binding", entry: listed, state: StateWaiting, reason: "listed, no result yet; its binding is not there (yet)"},
		{name: "listed, no result", entry: listed, b: binding(orig), state: StateWaiting, reason: "listed, no result yet"},
		{name: "held, recorded Successful by the controller meanwhile", entry: successful,
			b:     binding(orig, withLedger(handover.Ledger{Phase: handover.PhaseHeld, Owner: "host-1", Original: orig, Target: next})),
			state: StateHeld, reason: "scheduling suspended ahead of its move by host-1", after: next},
		{name: "held by an older release's ledger", entry: listed,
			b:     binding(orig, withLedger(handover.Ledger{Hold: true, Original: orig})),
			state: StateHeld, reason: "scheduling suspended ahead of its move"},
		{name: "staging: ready of the gaining cluster only", entry: successful,
			b: binding([]workv1alpha2.TargetCluster{{Name: "member1", Replicas: 3}, {Name: "member2", Replicas: 2}},
				withLedger(handover.Ledger{Phase: handover.PhaseStaging, Owner: "host-1", Deadline: at(time.Minute), Original: orig, Target: next,
					Staged: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 3}, {Name: "member2", Replicas: 2}}}),
				withReady("member1", 3), withReady("member2", 1)),
			state: StateStaging, ready: "member2 1/2", after: next,
			reason: "starting the replicas it adds by host-1: member2 1/2 ready, deadline 2026-01-02T03:05:05Z"},
		{name: "staging, member status not reported yet", entry: listed,
			b: binding(orig, withLedger(handover.Ledger{Phase: handover.PhaseStaging, Original: orig,
				Staged: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 3}, {Name: "member2", Replicas: 2}}})),
			state: StateStaging, ready: "member2 ?/2", reason: "starting the replicas it adds: member2 ?/2 ready"},
		{name: "settling", entry: successful,
			b:     binding(next, withLedger(handover.Ledger{Phase: handover.PhaseSettling, Original: orig, Staged: next, Target: next})),
			state: StateSettling, after: next, reason: "the new replicas took over; the clusters losing replicas scale down"},
		{name: "unreadable ledger", entry: listed,
			b: binding(orig, func(b *workv1alpha2.ResourceBinding) {
				b.Annotations = map[string]string{handover.LedgerAnnotation: "{"}
			}),
			state: StateHeld, reason: "annotation kubectl-rebalance.io/handover does not parse: unexpected end of JSON input"},
		{name: "recorded Failed", entry: Entry{Workload: web, Listed: true, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound},
			state: StateFailed, reason: "ReferencedBindingNotFound"},
		{name: "released, scheduler not answered", entry: successful, before: orig,
			b:     binding(next, triggered(at(10*time.Second), at(0), metav1.ConditionTrue)),
			state: StateReleased, after: next, reason: "released at 2026-01-02T03:04:15Z; waiting for karmada-scheduler"},
		{name: "done and ready", entry: successful, before: orig,
			b:     binding(next, triggered(at(10*time.Second), at(11*time.Second), metav1.ConditionTrue), withReady("member1", 1), withReady("member2", 2)),
			state: StateDone, after: next, reason: "rescheduled; ready: member1 1/1, member2 2/2"},
		{name: "done, not ready yet", entry: successful,
			b:     binding(next, triggered(at(10*time.Second), at(11*time.Second), metav1.ConditionTrue), withReady("member1", 1), withReady("member2", 0)),
			state: StateDone, after: next, reason: "rescheduled; not ready yet: member1 1/1, member2 0/2"},
		{name: "scheduling failed", entry: successful,
			b: binding(orig, triggered(at(10*time.Second), at(0), ""), func(b *workv1alpha2.ResourceBinding) {
				b.Status.Conditions = []metav1.Condition{{Type: workv1alpha2.Scheduled, Status: metav1.ConditionFalse, Reason: "NoClusterFit", Message: "0/3 clusters are available", LastTransitionTime: *at(12 * time.Second)}}
			}),
			state: StateFailed, after: orig, reason: "NoClusterFit: 0/3 clusters are available"},
		{name: "ignored: suspended by someone else", entry: successful,
			b: binding(orig, triggered(at(10*time.Second), at(0), metav1.ConditionTrue), func(b *workv1alpha2.ResourceBinding) {
				yes := true
				b.Spec.Suspension = &workv1alpha2.Suspension{Scheduling: &yes}
			}),
			state: StateIgnored, after: orig, reason: "SchedulingSuspended: scheduling of the binding was suspended after the trigger; resume it to let the trigger take effect"},
		{name: "successful, binding gone", entry: successful, state: StateDone, reason: "recorded Successful; its binding is gone"},
		{name: "released before the record lists it", entry: Entry{Workload: web, Since: t0}, before: orig,
			b:     binding(next, triggered(at(10*time.Second), at(0), metav1.ConditionTrue)),
			state: StateReleased, after: next, reason: "released at 2026-01-02T03:04:15Z; waiting for karmada-scheduler"},
		{name: "a trigger older than the record is not the run's", entry: Entry{Workload: web, Since: *at(time.Hour)},
			b:     binding(orig, triggered(at(10*time.Second), at(11*time.Second), metav1.ConditionTrue)),
			state: StateWaiting, reason: "not started yet"},
		{name: "successful, no trigger yet (a hold undone took the controller's back)", entry: successful, b: binding(orig),
			state: StateWaiting, after: orig, reason: "recorded Successful; no trigger written yet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			row := Classify(tc.entry, tc.b, tc.before)
			assert.Equal(t, tc.state, row.State)
			assert.Equal(t, tc.ready, row.Ready)
			assert.Equal(t, tc.reason, row.Reason)
			if tc.after != nil {
				assert.Equal(t, tc.after, row.After)
			}
			if tc.b != nil && tc.b.Annotations[handover.LedgerAnnotation] != "" && tc.state != StateHeld || tc.state == StateHeld && tc.after != nil {
				assert.Equal(t, orig, row.Before, "a move's ledger says where it came from")
			}
		})
	}
}

func rebalancer(mutate func(*appsv1alpha1.WorkloadRebalancer)) *appsv1alpha1.WorkloadRebalancer {
	rb := &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Generation: 2},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{web}},
		Status: appsv1alpha1.WorkloadRebalancerStatus{ObservedGeneration: 2, FinishTime: &t0,
			ObservedWorkloads: []appsv1alpha1.ObservedWorkload{{Workload: web, Result: appsv1alpha1.RebalanceSuccessful}}},
	}
	if mutate != nil {
		mutate(rb)
	}
	return rb
}

func TestSummarize(t *testing.T) {
	api := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "api"}
	planned, err := record.PlanAnnotations([]rebalance.Workload{web, api}, record.RunOptions{MaxInFlight: 1, MaxFailures: 3})
	require.NoError(t, err)
	done := Row{Workload: web, State: StateDone, Listed: true}
	cases := []struct {
		name     string
		rb       *appsv1alpha1.WorkloadRebalancer
		rows     []Row
		finished bool
		line     string
	}{
		{name: "finished", rb: rebalancer(nil), rows: []Row{done}, finished: true,
			line: "workloadrebalancer fleet: 1 workload (1 done); waiting for nothing: the run is finished"},
		{name: "a move under way keeps it open", rb: rebalancer(nil),
			rows: []Row{{Workload: web, State: StateStaging, Ready: "member2 1/2", Listed: true}},
			line: "workloadrebalancer fleet: 1 workload (1 staging); waiting for deployment.apps/web to get its new replicas ready (member2 1/2)"},
		{name: "released keeps it open", rb: rebalancer(nil), rows: []Row{{Workload: web, State: StateReleased, Listed: true}},
			line: "workloadrebalancer fleet: 1 workload (1 released); waiting for karmada-scheduler to reschedule deployment.apps/web"},
		{name: "a spec not reconciled yet", rb: rebalancer(func(rb *appsv1alpha1.WorkloadRebalancer) { rb.Generation = 3 }), rows: []Row{done},
			line: "workloadrebalancer fleet: 1 workload (1 done); waiting for the record's status"},
		{name: "planned workloads not listed yet, run going", rb: rebalancer(func(rb *appsv1alpha1.WorkloadRebalancer) { rb.Annotations = planned }),
			rows: []Row{done, {Workload: api, State: StateWaiting}},
			line: "workloadrebalancer fleet: 2 workloads (1 waiting, 1 done); failure budget 0/3 spent; waiting for 1 workload(s) to start"},
		{name: "aborted and stopped", finished: true,
			rb: rebalancer(func(rb *appsv1alpha1.WorkloadRebalancer) {
				rb.Annotations = map[string]string{record.UnstartedAnnotation: "1", record.FailuresAnnotation: "1",
					record.AbortedAnnotation: `{"by":"alice","at":"2026-01-02T03:04:05Z"}`}
				for k, v := range planned {
					rb.Annotations[k] = v
				}
			}),
			rows: []Row{done, {Workload: api, State: StateWaiting}},
			line: "workloadrebalancer fleet: 2 workloads (1 waiting, 1 done); failure budget 1/3 spent; aborted by alice at 2026-01-02T03:04:05Z; waiting for nothing: the run stopped with 1 workload(s) not started"},
		{name: "aborted, not stopped yet",
			rb: rebalancer(func(rb *appsv1alpha1.WorkloadRebalancer) {
				rb.Annotations = map[string]string{record.AbortedAnnotation: `{"by":"alice"}`}
				for k, v := range planned {
					rb.Annotations[k] = v
				}
			}),
			rows: []Row{done, {Workload: api, State: StateWaiting}},
			line: "workloadrebalancer fleet: 2 workloads (1 waiting, 1 done); failure budget 0/3 spent; aborted by alice; waiting for the aborted run to record that it stopped"},
		{name: "paused at a step",
			rb: rebalancer(func(rb *appsv1alpha1.WorkloadRebalancer) {
				rb.Annotations = map[string]string{record.PausedAtStepAnnotation: "2",
					record.ApprovedAnnotation: `[{"step":1,"by":"bob","at":"2026-01-02T03:04:05Z"}]`}
				for k, v := range planned {
					rb.Annotations[k] = v
				}
			}),
			rows: []Row{done, {Workload: api, State: StateWaiting}},
			line: "workloadrebalancer fleet: 2 workloads (1 waiting, 1 done); failure budget 0/3 spent; step 1 approved by bob at 2026-01-02T03:04:05Z; waiting for an approval of step 2: `kubectl rebalance approve fleet`"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(tc.rb, tc.rows)
			assert.Equal(t, tc.finished, s.Finished)
			assert.Equal(t, tc.line, s.String())
		})
	}
}

func TestEntries(t *testing.T) {
	api := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "api"}
	planned, err := record.PlanAnnotations([]rebalance.Workload{api, web}, record.RunOptions{MaxInFlight: 1})
	require.NoError(t, err)
	rb := rebalancer(func(rb *appsv1alpha1.WorkloadRebalancer) { rb.Annotations = planned })
	rb.CreationTimestamp = t0
	assert.Equal(t, []Entry{
		{Workload: web, Listed: true, Result: appsv1alpha1.RebalanceSuccessful, Since: t0},
		{Workload: api, Since: t0},
	}, Entries(rb))
}

func TestScope(t *testing.T) {
	w := func(ns, name string) rebalance.Workload {
		return rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}
	}
	var many []rebalance.Workload
	for i := 0; i <= maxScopedNamespaces; i++ {
		many = append(many, w(fmt.Sprintf("ns%d", i), "a"))
	}
	tests := []struct {
		name          string
		workloads     []rebalance.Workload
		namespaces    []string
		clusterScoped bool
	}{
		{"no scope watches everything", nil, []string{""}, true},
		{"one namespace", []rebalance.Workload{w("shop", "a"), w("shop", "b")}, []string{"shop"}, false},
		{"namespaces sorted, once each", []rebalance.Workload{w("b", "x"), w("a", "y"), w("b", "z")}, []string{"a", "b"}, false},
		{"a cluster-scoped workload watches the cluster bindings", []rebalance.Workload{w("", "ns"), w("a", "y")}, []string{"a"}, true},
		{"an empty run watches nothing", []rebalance.Workload{}, nil, false},
		{"too many namespaces watch them all", many, []string{""}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			namespaces, clusterScoped := scope(tt.workloads)
			assert.Equal(t, tt.namespaces, namespaces)
			assert.Equal(t, tt.clusterScoped, clusterScoped)
		})
	}
}
