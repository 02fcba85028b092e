package handover

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

var webTarget = rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}}

// simulate runs the simulated members and scheduler until the test ends.
func simulate(ctx context.Context, t *testing.T, client *fake.Clientset, sim *members) {
	done := make(chan struct{})
	stop := make(chan struct{})
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
	t.Cleanup(func() { close(stop); <-done })
}

// simulatedSeed is the seed's binding ({member2:3}) on a fake API with
// simulated members (pods ready 200 ms after they start) and a scheduler
// that decides {member1:1, member2:2}, for 20 s at most.
func simulatedSeed(t *testing.T) (context.Context, *fake.Clientset, *members) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	client := fake.NewSimpleClientset(seedBinding())
	sim := &members{ready: map[string]int32{"member2": 3}, starting: map[string][]time.Time{}, minReady: 3,
		startup: 200 * time.Millisecond, decision: tc("member1", 1, "member2", 2)}
	simulate(ctx, t, client, sim)
	return ctx, client, sim
}

func settlingMover(client *fake.Clientset, owner string) *Mover {
	clock := rebalance.NewServerClock()
	clock.Observe(time.Now())
	predicted := func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
		return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}}, nil
	}
	return &Mover{Karmada: client, Clock: clock, Budget: DefaultBudget(), OneWrite: &noOneWrite{}, Predict: predicted,
		Owner: owner, SettleTimeout: 5 * time.Second,
		Recheck: func(ctx context.Context, _ rebalance.Target, _ *workv1alpha2.ResourceBinding) (Prediction, error) {
			// The settle step's read never agrees: the move stays in its
			// settle step until it is stopped.
			return Prediction{Unsettled: "still counting pods being deleted", Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}}, nil
		}}
}

func ledgerPhase(ctx context.Context, client *fake.Clientset) Phase {
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	l, err := ReadLedger(rb)
	if err != nil || l == nil {
		return ""
	}
	return l.CurrentPhase()
}

// TestInterruptedAfterTheSettleWriteKeepsTheNewReplicas: a move stopped
// (Ctrl-C) once its settle write stopped the losing cluster's replicas
// keeps the new placement and lifts its suspension; it never puts the old
// placement back, which would stop the replicas that now serve.
func TestInterruptedAfterTheSettleWriteKeepsTheNewReplicas(t *testing.T) {
	ctx, client, sim := simulatedSeed(t)
	m := settlingMover(client, "host/1/self")
	moveCtx, stop := context.WithCancel(ctx)
	go func() {
		for ctx.Err() == nil && ledgerPhase(ctx, client) != PhaseSettling {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // member2 stops its surplus
		stop()
	}()
	row, err := m.Move(moveCtx, webTarget, func(rebalance.Row) {})
	require.NoError(t, err)
	assert.Contains(t, row.Message, "the new replicas had taken over")
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, LedgerAnnotation)
	assert.Equal(t, tc("member1", 1, "member2", 2), rb.Spec.Clusters, "the settled placement is kept")
	time.Sleep(100 * time.Millisecond)
	assert.GreaterOrEqual(t, sim.minReady, int32(3), "no ready replica was lost")
}

// TestRunDeadlineAfterTheSettleWriteLetsTheMoveFinish: the run's deadline
// (--timeout) passing once the settle write was made does not cut the
// move: it releases with its trigger and reads the scheduler's answer, and
// no ready replica is lost.
func TestRunDeadlineAfterTheSettleWriteLetsTheMoveFinish(t *testing.T) {
	ctx, client, sim := simulatedSeed(t)
	m := settlingMover(client, "host/1/self")
	m.SettleTimeout = time.Second
	deadlineCtx, cancelDeadline := context.WithCancel(ctx)
	defer cancelDeadline()
	go func() {
		for ctx.Err() == nil && ledgerPhase(ctx, client) != PhaseSettling {
			time.Sleep(10 * time.Millisecond)
		}
		cancelDeadline()
	}()
	row, err := m.Move(expired{deadlineCtx}, webTarget, func(rebalance.Row) {})
	require.NoError(t, err)
	require.NotNil(t, row.TriggeredAt, "released with a trigger: %s", row.Message)
	assert.Equal(t, rebalance.OutcomeScheduled, row.Observation.Outcome, row.Message)
	assert.Equal(t, tc("member1", 1, "member2", 2), row.After)
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, LedgerAnnotation)
	assert.GreaterOrEqual(t, sim.minReady, int32(3), "no ready replica was lost")
}

// TestStagedReleaseWhileOthersMove: in a run all at once, a move whose
// other moves are under way releases from its whole staged placement - no
// settle write, no ledger phase Settling - and the scheduler's answer,
// within it, loses no ready replica. Alone, the same move settles.
func TestStagedReleaseWhileOthersMove(t *testing.T) {
	for _, others := range []bool{true, false} {
		t.Run(fmt.Sprintf("others moving %v", others), func(t *testing.T) {
			ctx, client, sim := simulatedSeed(t)
			m := settlingMover(client, "host/1/self")
			m.Recheck = func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
				return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}}, nil
			}
			m.StagedRelease, m.Gate = true, NewGate()
			if others {
				m.Gate.begin() // another move of the run
			}
			var settled atomic.Bool
			go func() {
				for ctx.Err() == nil {
					if ledgerPhase(ctx, client) == PhaseSettling {
						settled.Store(true)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
			row, err := m.Move(ctx, webTarget, func(rebalance.Row) {})
			require.NoError(t, err)
			assert.Equal(t, rebalance.OutcomeScheduled, row.Observation.Outcome, row.Message)
			assert.Equal(t, others, strings.Contains(row.Message, "released from the staged placement"), row.Message)
			assert.Equal(t, !others, settled.Load(), "settle write")
			assert.GreaterOrEqual(t, sim.minReady, int32(3), "no ready replica was lost")
		})
	}
}

// expired is a context whose cancellation reads as its deadline passing,
// as the run's --timeout does.
type expired struct{ context.Context }

func (e expired) Err() error {
	if e.Context.Err() != nil {
		return context.DeadlineExceeded
	}
	return nil
}

// TestASecondProcessWaitsForTheOwner: a move finds the binding moved by
// another live process: it leaves it alone (no undo of the other's move)
// and says so when its own context ends first.
func TestASecondProcessWaitsForTheOwner(t *testing.T) {
	ctx, client, _ := simulatedSeed(t)
	first := settlingMover(client, "other-host/1/first")
	firstCtx, stopFirst := context.WithCancel(ctx)
	defer stopFirst()
	go func() { _, _ = first.Move(firstCtx, webTarget, func(rebalance.Row) {}) }()
	for ledgerPhase(ctx, client) == "" {
		time.Sleep(10 * time.Millisecond)
	}
	second := settlingMover(client, "other-host/2/second")
	secondCtx, stopSecond := context.WithTimeout(ctx, time.Second)
	defer stopSecond()
	row, err := second.Move(secondCtx, webTarget, func(rebalance.Row) {})
	require.NoError(t, err)
	assert.Contains(t, row.Message, "is being moved by another process")
	assert.Contains(t, row.Message, "other-host/1/first")
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	l, err := ReadLedger(rb)
	require.NoError(t, err)
	require.NotNil(t, l, "the first move's ledger is still there")
	assert.Equal(t, "other-host/1/first", l.Owner)
}

// TestScaledDuringTheMoveLetsGo: a change of spec.replicas mid-move (an
// autoscaler, a person) stops the move; the binding is let go for Karmada
// to place the new count, never staged over it.
func TestScaledDuringTheMoveLetsGo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := fake.NewSimpleClientset(seedBinding())
	m := settlingMover(client, "host/1/self")
	m.Recheck = nil
	go func() {
		for ctx.Err() == nil && ledgerPhase(ctx, client) != PhaseStaging {
			time.Sleep(10 * time.Millisecond)
		}
		// A patch of spec.replicas alone, as the detector's would be: an
		// update from an older read would also undo the move's own write.
		_, _ = client.WorkV1alpha2().ResourceBindings("default").Patch(ctx, "web-deployment", types.MergePatchType,
			[]byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{})
	}()
	row, err := m.Move(ctx, webTarget, func(rebalance.Row) {})
	require.NoError(t, err)
	assert.Empty(t, row.Result, "no trigger was written")
	assert.Contains(t, row.Message, "scaled from 3 to 5")
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, LedgerAnnotation)
}

// TestKindWithoutReadyCountMovesInOneWrite: a workload whose member status
// reports no ready count cannot be moved make-before-break (nothing tells
// when its new replicas are ready): it moves in one write, and the row
// says why instead of claiming a make-before-break move.
func TestKindWithoutReadyCountMovesInOneWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := seedBinding()
	b.Spec.Resource = workv1alpha2.ObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "default", Name: "web"}
	b.Name = rebalance.BindingNameFor(rebalance.Workload{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "default", Name: "web"})
	b.Status.AggregatedStatus[0].Status.Raw = []byte(`{"phase":"Running"}`)
	client := fake.NewSimpleClientset(b)
	one := &noOneWrite{}
	m := settlingMover(client, "host/1/self")
	m.OneWrite = one
	row, err := m.Move(ctx, rebalance.Target{Workload: rebalance.Workload{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "default", Name: "web"}}, func(rebalance.Row) {})
	require.NoError(t, err)
	assert.True(t, one.called, "moved in one write")
	assert.Contains(t, row.Message, "reports no ready replica count")
	rb, err := client.WorkV1alpha2().ResourceBindings("default").Get(ctx, b.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, rb.Spec.SchedulingSuspended(), "never suspended")
}

// TestStayingIsCheckedWhileOthersMove: a workload whose placement depends
// on the clusters' room, predicted from the run's shared read to stay where
// it is, moves in one write when it is alone; while other moves of the run
// are under way (they change that room) the prediction is asked again from
// a read of its own, and the move it finds is made before break.
func TestStayingIsCheckedWhileOthersMove(t *testing.T) {
	for _, others := range []bool{false, true} {
		t.Run(fmt.Sprintf("others moving %v", others), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			b := seedBinding()
			b.Spec.Placement = &policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas},
			}}
			client := fake.NewSimpleClientset(b)
			sim := &members{ready: map[string]int32{"member2": 3}, starting: map[string][]time.Time{}, minReady: 3,
				startup: 200 * time.Millisecond, decision: tc("member1", 1, "member2", 2)}
			simulate(ctx, t, client, sim)
			m := settlingMover(client, "host/1/self")
			m.Predict = func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
				return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member2", 3)}}, nil
			}
			m.Recheck = func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
				return Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}}, nil
			}
			one := &noOneWrite{}
			m.OneWrite, m.Gate = one, NewGate()
			if others {
				m.Gate.begin() // another move of the run
			}
			row, err := m.Move(ctx, webTarget, func(rebalance.Row) {})
			require.NoError(t, err)
			assert.Equal(t, !others, one.called, "moved in one write: %s", row.Message)
			if others {
				assert.Contains(t, row.Message, "made before break")
				assert.GreaterOrEqual(t, sim.minReady, int32(3), "no ready replica was lost")
			}
		})
	}
}
