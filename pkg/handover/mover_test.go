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
	// decide, when set, plays a scheduler that answers a step after the
	// members acted on the trigger's write, with estimators that still
	// counted the replicas that write stopped: inFlight says whether any
	// cluster ran more than spec.clusters asked when the trigger landed.
	decide   func(inFlight bool) []workv1alpha2.TargetCluster
	deciding bool
	inFlight bool
}

func (m *members) step(ctx context.Context, t *testing.T, client *fake.Clientset) {
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[string]int32{}
	for _, c := range rb.Spec.Clusters {
		want[c.Name] = c.Replicas
	}
	if !rb.Spec.SchedulingSuspended() && rb.Spec.RescheduleTriggeredAt != nil && rb.Status.LastScheduledTime.Before(rb.Spec.RescheduleTriggeredAt) {
		switch {
		case m.decide != nil && !m.deciding:
			m.deciding = true
			for _, name := range []string{"member1", "member2"} {
				if int32(len(m.starting[name]))+m.ready[name] > want[name] {
					m.inFlight = true
				}
			}
		default:
			decision := m.decision
			if m.decide != nil {
				decision = m.decide(m.inFlight)
			}
			rb.Spec.Clusters = decision
			rb.Status.LastScheduledTime = rb.Spec.RescheduleTriggeredAt.DeepCopy()
			rb.Status.SchedulerObservedGeneration = rb.Generation
			want = map[string]int32{}
			for _, c := range rb.Spec.Clusters {
				want[c.Name] = c.Replicas
			}
		}
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
		raw, _ := json.Marshal(map[string]int32{"readyReplicas": m.ready[name], "replicas": m.ready[name] + int32(len(m.starting[name]))})
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
	assert.False(t, one.called, "moved make-before-break, not in one write: %+v", row)
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
	assert.False(t, one.called, "moved make-before-break, not in one write: %+v", row)
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

// TestMoveSettlesBeforeTheRelease plays the race seen on the seed's move
// back: a scheduler whose estimators still count the replicas the release's
// write stopped chooses {member1:2, member2:1} against the predicted
// {member1:1, member2:2}, and its write stops a ready replica it then has
// to start again. Settled first (the prediction in spec.clusters while the
// binding is suspended, the surplus stopped, a new read agreeing), the
// release finds nothing in flight: the scheduler chooses the prediction and
// the ready count never drops below 3.
func TestMoveSettlesBeforeTheRelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := fake.NewSimpleClientset(seedBinding())
	sim := &members{ready: map[string]int32{"member2": 3}, starting: map[string][]time.Time{}, minReady: 3,
		startup: 300 * time.Millisecond,
		decide: func(inFlight bool) []workv1alpha2.TargetCluster {
			if inFlight {
				return tc("member1", 2, "member2", 1)
			}
			return tc("member1", 1, "member2", 2)
		}}
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
	predicted := func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
		return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2), tc("member1", 2, "member2", 1)}}, nil
	}
	var rechecked []*workv1alpha2.ResourceBinding
	m := &Mover{Karmada: client, Clock: clock, Budget: DefaultBudget(), OneWrite: &noOneWrite{}, Predict: predicted,
		SettleTimeout: 5 * time.Second,
		Recheck: func(_ context.Context, _ rebalance.Target, b *workv1alpha2.ResourceBinding) (Prediction, error) {
			rechecked = append(rechecked, b)
			return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}}, nil
		}}
	target := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}}
	row, err := m.Move(ctx, target, func(rebalance.Row) {})
	close(stop)
	<-done
	require.NoError(t, err)
	assert.Contains(t, row.Message, "as predicted")
	assert.GreaterOrEqual(t, sim.minReady, int32(3), "ready replicas never fell below the starting count")
	require.NotEmpty(t, rechecked, "the placement was predicted again before the release")
	assert.False(t, rechecked[0].Spec.SchedulingSuspended(), "rechecked as the scheduler will see it, not suspended")
	assert.Equal(t, tc("member1", 1, "member2", 2), rechecked[0].Spec.Clusters, "rechecked with the prediction in spec.clusters")
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.Equal(t, tc("member1", 1, "member2", 2), rb.Spec.Clusters)
}

// TestSettleStagesWhatTheSchedulerNowChooses: when new reads agree that
// the scheduler would now choose another placement than first predicted,
// the move starts what that one adds and settles there before the release.
func TestSettleStagesWhatTheSchedulerNowChooses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := fake.NewSimpleClientset(seedBinding())
	sim := &members{ready: map[string]int32{"member2": 3}, starting: map[string][]time.Time{}, minReady: 3,
		startup: 300 * time.Millisecond, decision: tc("member1", 2, "member2", 1)}
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
	m := &Mover{Karmada: client, Clock: clock, Budget: DefaultBudget(), OneWrite: &noOneWrite{}, SettleTimeout: 5 * time.Second,
		Predict: func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
			return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}}, nil
		},
		Recheck: func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
			return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 2, "member2", 1)}}, nil
		}}
	target := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}}
	row, err := m.Move(ctx, target, func(rebalance.Row) {})
	close(stop)
	<-done
	require.NoError(t, err)
	assert.Contains(t, row.Message, "scheduler chose {member1:2, member2:1}")
	assert.NotContains(t, row.Message, "not started first")
	assert.GreaterOrEqual(t, sim.minReady, int32(3), "ready replicas never fell below the starting count")
}

// TestMovePredictsAgainWhileSummariesAreStale: right after a failover the
// shared read's prediction is marked Unsettled (a member's summary still
// counting pods that are gone); the move predicts from reads of its own
// until one is settled and stages for that, in one step, instead of
// staging for the stale answer and again before the release.
func TestMovePredictsAgainWhileSummariesAreStale(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := fake.NewSimpleClientset(seedBinding())
	sim := &members{ready: map[string]int32{"member2": 3}, starting: map[string][]time.Time{}, minReady: 3,
		startup: 300 * time.Millisecond, decision: tc("member1", 2, "member2", 1)}
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
	rechecks := 0
	m := &Mover{Karmada: client, Clock: clock, Budget: DefaultBudget(), OneWrite: &noOneWrite{}, SettleTimeout: 5 * time.Second,
		Predict: func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
			return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}, Unsettled: "stale summary of member1"}, nil
		},
		Recheck: func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
			rechecks++
			if rechecks == 1 {
				return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}, Unsettled: "stale summary of member1"}, nil
			}
			return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 2, "member2", 1)}}, nil
		}}
	target := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}}
	row, err := m.Move(ctx, target, func(rebalance.Row) {})
	close(stop)
	<-done
	require.NoError(t, err)
	assert.Contains(t, row.Message, "staged {member1:2, member2:3} in 1 step(s)")
	assert.Contains(t, row.Message, "scheduler chose {member1:2, member2:1}, as predicted")
	assert.GreaterOrEqual(t, sim.minReady, int32(3))
}

// watchingOneWrite is a one-write mover that follows the run's bindings:
// it records what it was told was written and what it saw when a workload
// was handed to it.
type watchingOneWrite struct {
	told          []*rebalance.Binding
	suspendedSeen bool
	called        bool
}

func (w *watchingOneWrite) Watched(context.Context, rebalance.Target) (*rebalance.Binding, bool) {
	return nil, false
}

func (w *watchingOneWrite) Wrote(b *rebalance.Binding) { w.told = append(w.told, b) }

func (w *watchingOneWrite) Move(_ context.Context, t rebalance.Target, _ func(rebalance.Row)) (rebalance.Row, error) {
	w.called = true
	w.suspendedSeen = len(w.told) == 0 || w.told[len(w.told)-1].Spec.SchedulingSuspended()
	return rebalance.Row{Workload: t.Workload}, nil
}

// TestHeldOneWriteMoveIsHandedOverUnsuspended: a held workload whose move
// turns out to be a one-write move (nothing to start first) has its hold
// lifted, and the one-write mover that follows the run's bindings is told
// the binding as the undo wrote it before the workload is handed over; from
// its watch's older copy it would take the binding for suspended and not
// write the trigger.
func TestHeldOneWriteMoveIsHandedOverUnsuspended(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset(seedBinding())
	clock := rebalance.NewServerClock()
	clock.Observe(time.Now())
	one := &watchingOneWrite{}
	base := &Mover{Karmada: client, Clock: clock, Budget: DefaultBudget(), OneWrite: &noOneWrite{},
		Predict: func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
			return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member2", 3)}}, nil
		}}
	m := base.WithOneWriteMover(one, one).(*Mover)
	target := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}}
	held, err := m.Hold(ctx, target)
	require.NoError(t, err)
	require.True(t, held)

	_, err = m.Move(ctx, target, func(rebalance.Row) {})
	require.NoError(t, err)
	require.True(t, one.called, "nothing to start first: moved in one write")
	require.NotEmpty(t, one.told, "the undo's write was told")
	assert.False(t, one.suspendedSeen, "handed over as the undo wrote it, no longer suspended")
	assert.Equal(t, "web-deployment", one.told[len(one.told)-1].Name)
}
