package handover

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// members plays the member clusters and karmada-scheduler around a fake
// API: each cluster runs what spec.clusters asks, a removed replica stops
// at once and a new one is ready after startup; an unsuspended binding
// whose trigger is after its last schedule is rescheduled to decision. It
// keeps the fewest ready replicas summed over the clusters.
type members struct {
	mu       sync.Mutex
	ready    map[string]int32
	starting map[string][]time.Time
	minReady int32
	startup  time.Duration
	decision []workv1alpha2.TargetCluster
}

func (m *members) step(ctx context.Context, t *testing.T, client *fake.Clientset) {
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !rb.Spec.SchedulingSuspended() && rb.Spec.RescheduleTriggeredAt != nil && rb.Status.LastScheduledTime.Before(rb.Spec.RescheduleTriggeredAt) {
		rb.Spec.Clusters = m.decision
		rb.Status.LastScheduledTime = rb.Spec.RescheduleTriggeredAt.DeepCopy()
		rb.Status.SchedulerObservedGeneration = rb.Generation
	}
	want := map[string]int32{}
	for _, c := range rb.Spec.Clusters {
		want[c.Name] = c.Replicas
	}
	now := time.Now()
	var status []workv1alpha2.AggregatedStatusItem
	for _, name := range []string{"member1", "member2"} {
		// Stop what is no longer wanted, ready replicas last.
		for int32(len(m.starting[name]))+m.ready[name] > want[name] {
			if n := len(m.starting[name]); n > 0 {
				m.starting[name] = m.starting[name][:n-1]
			} else {
				m.ready[name]--
			}
		}
		for int32(len(m.starting[name]))+m.ready[name] < want[name] {
			m.starting[name] = append(m.starting[name], now)
		}
		var still []time.Time
		for _, at := range m.starting[name] {
			if now.Sub(at) >= m.startup {
				m.ready[name]++
			} else {
				still = append(still, at)
			}
		}
		m.starting[name] = still
		raw, _ := json.Marshal(map[string]int32{"readyReplicas": m.ready[name]})
		status = append(status, workv1alpha2.AggregatedStatusItem{ClusterName: name, Status: &runtime.RawExtension{Raw: raw}, Applied: true})
	}
	m.minReady = min(m.minReady, m.ready["member1"]+m.ready["member2"])
	rb.Status.AggregatedStatus = status
	_, err = client.WorkV1alpha2().ResourceBindings("default").Update(ctx, rb, metav1.UpdateOptions{})
	if err != nil {
		t.Logf("update: %v", err)
	}
}

type noOneWrite struct{ called bool }

func (n *noOneWrite) Move(_ context.Context, t rebalance.Target, _ func(rebalance.Row)) (rebalance.Row, error) {
	n.called = true
	return rebalance.Row{Workload: t.Workload}, nil
}

func seedBinding() *workv1alpha2.ResourceBinding {
	last := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	return &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-deployment",
			Labels: map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: "id"}},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"},
			Replicas: 3, Clusters: tc("member2", 3),
		},
		Status: workv1alpha2.ResourceBindingStatus{
			LastScheduledTime: &last,
			AggregatedStatus: []workv1alpha2.AggregatedStatusItem{{ClusterName: "member2", Applied: true,
				Status: &runtime.RawExtension{Raw: []byte(`{"readyReplicas":3}`)}}},
			Conditions: []metav1.Condition{{Type: workv1alpha2.Scheduled, Status: metav1.ConditionTrue, Reason: "Success", LastTransitionTime: last}},
		},
	}
}

// TestMoveKeepsReadyReplicas moves the seed's {member2:3} to
// {member1:1, member2:2} against simulated members whose new replicas take
// a while to become ready: the ready count never drops below 3, the binding
// ends unsuspended without the ledger, in the scheduler's placement.
func TestMoveKeepsReadyReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := fake.NewSimpleClientset(seedBinding())
	sim := &members{ready: map[string]int32{"member2": 3}, starting: map[string][]time.Time{}, minReady: 3,
		startup: 300 * time.Millisecond, decision: tc("member1", 1, "member2", 2)}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				sim.step(ctx, t, client)
			}
		}
	}()
	clock := rebalance.NewServerClock()
	clock.Observe(time.Now())
	one := &noOneWrite{}
	m := &Mover{Karmada: client, Clock: clock, Budget: DefaultBudget(), OneWrite: one,
		Predict: func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
			return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}}, nil
		}}
	target := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}}
	row, err := m.Move(ctx, target, func(rebalance.Row) {})
	close(stop)
	<-done
	require.NoError(t, err)
	assert.False(t, one.called, "moved make-before-break, not in one write")
	assert.Equal(t, rebalance.OutcomeScheduled, row.Observation.Outcome, row.Message)
	assert.Contains(t, row.Message, "made before break")
	assert.GreaterOrEqual(t, sim.minReady, int32(3), "ready replicas never fell below the starting count")
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, LedgerAnnotation)
	assert.Equal(t, tc("member1", 1, "member2", 2), rb.Spec.Clusters)
}

// controllerTrigger plays Karmada's workloadRebalancer controller acting on
// a record created now: it writes the record's creationTimestamp as the
// binding's trigger.
func controllerTrigger(ctx context.Context, t *testing.T, client *fake.Clientset) metav1.Time {
	t.Helper()
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	at := metav1.NewTime(time.Now().Truncate(time.Second))
	rb.Spec.RescheduleTriggeredAt = &at
	_, err = client.WorkV1alpha2().ResourceBindings("default").Update(ctx, rb, metav1.UpdateOptions{})
	require.NoError(t, err)
	return at
}

// TestHeldMoveIsNotBypassedByATrigger holds the seed's binding, lets a
// trigger land on it meanwhile (Karmada's controller acting on a record
// that lists the workload), then moves it: the simulated scheduler leaves
// the suspended binding alone, so the move stays make-before-break.
func TestHeldMoveIsNotBypassedByATrigger(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := fake.NewSimpleClientset(seedBinding())
	sim := &members{ready: map[string]int32{"member2": 3}, starting: map[string][]time.Time{}, minReady: 3,
		startup: 300 * time.Millisecond, decision: tc("member1", 1, "member2", 2)}
	clock := rebalance.NewServerClock()
	clock.Observe(time.Now())
	one := &noOneWrite{}
	m := &Mover{Karmada: client, Clock: clock, Budget: DefaultBudget(), OneWrite: one,
		Predict: func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
			return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}}, nil
		}}
	target := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}}
	held, err := m.Hold(ctx, target)
	require.NoError(t, err)
	require.True(t, held)
	controllerTrigger(ctx, t, client)
	sim.step(ctx, t, client) // the scheduler sees the trigger before the move starts

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				sim.step(ctx, t, client)
			}
		}
	}()
	row, err := m.Move(ctx, target, func(rebalance.Row) {})
	close(stop)
	<-done
	require.NoError(t, err)
	assert.False(t, one.called, "moved make-before-break, not in one write")
	assert.Contains(t, row.Message, "made before break")
	assert.GreaterOrEqual(t, sim.minReady, int32(3), "ready replicas never fell below the starting count")
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, LedgerAnnotation)
	assert.Equal(t, tc("member1", 1, "member2", 2), rb.Spec.Clusters)
}

// TestUnholdPutsTheTriggerBack lifts a hold no move took over: a trigger
// written while the binding was held is taken back with the suspension, so
// lifting it does not become a one-write reschedule.
func TestUnholdPutsTheTriggerBack(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset(seedBinding())
	clock := rebalance.NewServerClock()
	clock.Observe(time.Now())
	m := &Mover{Karmada: client, Clock: clock, Budget: DefaultBudget(), OneWrite: &noOneWrite{}}
	target := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}}
	held, err := m.Hold(ctx, target)
	require.NoError(t, err)
	require.True(t, held)
	again, err := m.Hold(ctx, target)
	require.NoError(t, err)
	assert.False(t, again, "a held binding is not held twice")
	controllerTrigger(ctx, t, client)
	require.NoError(t, m.Unhold(ctx, target))
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, LedgerAnnotation)
	assert.Nil(t, rb.Spec.RescheduleTriggeredAt, "the trigger written during the hold is gone")
	assert.Equal(t, tc("member2", 3), rb.Spec.Clusters)
}

// TestMoveLetsGoWhenKarmadaEvictsTheTarget plays Karmada's taint manager
// evicting member1, the gaining cluster, from the suspended binding while
// its staged replica starts: the move must not release its prediction onto
// member1, nor put its own original placement back over Karmada's; it lifts
// only its suspension and ledger, writes no trigger, and says why.
func TestMoveLetsGoWhenKarmadaEvictsTheTarget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := fake.NewSimpleClientset(seedBinding())
	go func() {
		for ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
			rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
			if err != nil || rb.Annotations[LedgerAnnotation] == "" || len(rb.Spec.Clusters) < 2 {
				continue
			}
			rb.Spec.Clusters = tc("member2", 3)
			rb.Spec.GracefulEvictionTasks = []workv1alpha2.GracefulEvictionTask{{FromCluster: "member1", Reason: "TaintUntolerated", Producer: "TaintManager"}}
			_, _ = client.WorkV1alpha2().ResourceBindings("default").Update(ctx, rb, metav1.UpdateOptions{})
			return
		}
	}()
	clock := rebalance.NewServerClock()
	clock.Observe(time.Now())
	m := &Mover{Karmada: client, Clock: clock, Budget: DefaultBudget(), OneWrite: &noOneWrite{},
		Predict: func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
			return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}}, nil
		}}
	target := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}}
	row, err := m.Move(ctx, target, func(rebalance.Row) {})
	require.NoError(t, err)
	assert.Empty(t, row.Result, "no trigger was written")
	assert.Contains(t, row.Message, "changed during the move")
	assert.Contains(t, row.Message, "evicting it from member1")
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, LedgerAnnotation)
	assert.Nil(t, rb.Spec.RescheduleTriggeredAt)
	assert.Equal(t, tc("member2", 3), rb.Spec.Clusters, "Karmada's placement stays")
}
