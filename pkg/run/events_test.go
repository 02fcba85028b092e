package run

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	eventrecord "k8s.io/client-go/tools/record"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// scriptedMover moves each workload to member2, failing those named in fail.
type scriptedMover struct{ fail map[string]bool }

func (m scriptedMover) Move(_ context.Context, t rebalance.Target, triggered func(rebalance.Row)) (rebalance.Row, error) {
	at := metav1.Now()
	row := rebalance.Row{Workload: t.Workload, Binding: rebalance.BindingNameFor(t.Workload), Result: appsv1alpha1.RebalanceSuccessful, TriggeredAt: &at,
		Before: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 2}}}
	triggered(row)
	if m.fail[t.Workload.Name] {
		row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeSchedulingFailed, Reason: "Unschedulable", Message: "0/2 clusters are available"}
		return row, nil
	}
	row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeScheduled}
	row.After = []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 2}}
	return row, nil
}

func eventFixture(names ...string) (*karmadafake.Clientset, []rebalance.Target) {
	var objects []runtime.Object
	var targets []rebalance.Target
	last := metav1.NewTime(time.Now().Add(-time.Hour))
	for _, n := range names {
		w := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: n}
		targets = append(targets, rebalance.Target{Workload: w})
		objects = append(objects, &workv1alpha2.ResourceBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: rebalance.BindingNameFor(w), Generation: 1,
				Labels: map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: "p-1"}},
			Spec: workv1alpha2.ResourceBindingSpec{
				Resource: workv1alpha2.ObjectReference{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name},
				Clusters: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 2}},
			},
			Status: workv1alpha2.ResourceBindingStatus{SchedulerObservedGeneration: 1, LastScheduledTime: &last},
		})
	}
	client := karmadafake.NewSimpleClientset(objects...)
	// The API server sets what a create does not carry.
	client.PrependReactor("create", "workloadrebalancers", func(action clienttesting.Action) (bool, runtime.Object, error) {
		obj := action.(clienttesting.CreateAction).GetObject().(*appsv1alpha1.WorkloadRebalancer)
		obj.CreationTimestamp, obj.Generation, obj.UID = metav1.Now(), 1, types.UID("uid-"+obj.Name)
		return false, nil, nil
	})
	return client, targets
}

// drain returns the events a fake recorder holds.
func drain(r *eventrecord.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestRecordedWavesWriteTheirHistory runs a recorded waved run whose
// second workload fails and whose failure budget then stops it: its
// record gets the start, each workload as it ends, and why it stopped.
func TestRecordedWavesWriteTheirHistory(t *testing.T) {
	client, targets := eventFixture("a", "b", "c")
	events := eventrecord.NewFakeRecorder(100)
	engine := &Engine{Karmada: client, Clock: rebalance.NewServerClock(), Events: events}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := engine.Run(ctx, Request{
		Targets: targets, DryRun: rebalance.DryRunNone,
		Wait:     true,
		Workers:  4,
		Timeout:  time.Minute,
		Deadline: time.Now().Add(time.Minute),
		Record:   Recording{Name: "fleet"},
		Waves: &Waves{Options: waves.Options{MaxInFlight: 1, MaxFailures: 1, LedgerInterval: time.Millisecond},
			Mover: scripted{scriptedMover{fail: map[string]bool{"b": true}}}},
	})
	require.NoError(t, err)
	require.NotNil(t, res.Record)
	assert.Equal(t, []string{
		"Normal RebalanceStarted Rebalancing 3 workloads, in waves of at most 1 in flight, stopping after 1 failure(s)",
		"Normal WorkloadRescheduled Deployment shop/a rescheduled: {member1:2} -> {member2:2}",
		"Warning WorkloadFailed Deployment shop/b failed: SchedulingFailed: Unschedulable: 0/2 clusters are available",
		"Warning RebalanceInterrupted Stopped early: 1 workload(s) failed, which reached --max-failures 1; no further workload was started. " +
			"3 workloads: 2 successful, 0 failed, 1 pending; 1 rescheduled, 0 ignored, 1 scheduling failed; run `kubectl rebalance workloadrebalancer/fleet` to finish (nothing is triggered twice)",
	}, drain(events))
}

// TestRecordedRunAllAtOnceWritesItsHistory: without waves, the rows are
// known at the end of the pass; each workload the pass ran gets its event,
// then the run's end.
func TestRecordedRunAllAtOnceWritesItsHistory(t *testing.T) {
	client, targets := eventFixture("a", "b")
	events := eventrecord.NewFakeRecorder(100)
	engine := &Engine{Karmada: client, Clock: rebalance.NewServerClock(), Events: events}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := engine.Run(ctx, Request{
		Targets: targets, DryRun: rebalance.DryRunNone, Workers: 4, Timeout: time.Minute, Deadline: time.Now().Add(time.Minute),
		Record: Recording{Name: "pair"},
	})
	require.NoError(t, err)
	got := drain(events)
	require.Len(t, got, 4, "%s", strings.Join(got, "\n"))
	assert.Equal(t, "Normal RebalanceStarted Rebalancing 2 workloads, all at once", got[0])
	assert.Equal(t, "Normal WorkloadTriggered Deployment shop/a: trigger written; the run did not wait for the scheduler's answer", got[1])
	assert.Equal(t, "Normal WorkloadTriggered Deployment shop/b: trigger written; the run did not wait for the scheduler's answer", got[2])
	assert.Equal(t, "Normal RebalanceFinished Finished: 2 workloads: 2 successful, 0 failed, 0 pending; 0 rescheduled, 0 ignored", got[3])

	// Run again, the record is complete: nothing is triggered, so only
	// the start and the end are told.
	_, err = engine.Run(ctx, Request{
		Targets: targets, DryRun: rebalance.DryRunNone, Workers: 4, Timeout: time.Minute, Deadline: time.Now().Add(time.Minute),
		Record: Recording{Name: "pair"},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"Normal RebalanceStarted Continuing the record: its pending workloads of 2 workloads, all at once; none is triggered twice",
		"Normal RebalanceFinished Finished: 2 workloads: 2 successful, 0 failed, 0 pending; 0 rescheduled, 0 ignored",
	}, drain(events))
}

// TestRecordedRunInterrupted: a run whose context ends says so.
func TestRecordedRunInterrupted(t *testing.T) {
	client, targets := eventFixture("a")
	events := eventrecord.NewFakeRecorder(100)
	engine := &Engine{Karmada: client, Clock: rebalance.NewServerClock(), Events: events}
	ctx, cancel := context.WithCancel(context.Background())
	hang := make(chan struct{})
	_, _ = engine.Run(ctx, Request{
		Targets: targets, DryRun: rebalance.DryRunNone, Wait: true, Workers: 1, Timeout: time.Minute, Deadline: time.Now().Add(time.Minute),
		Record: Recording{Name: "cut"},
		Waves: &Waves{Options: waves.Options{MaxInFlight: 1},
			Mover: scripted{hangingMover{started: func() { cancel() }, release: hang}}},
	})
	close(hang)
	got := drain(events)
	require.NotEmpty(t, got)
	assert.Equal(t, "Normal RebalanceStarted Rebalancing 1 workload, in waves of at most 1 in flight", got[0])
	last := got[len(got)-1]
	assert.True(t, strings.HasPrefix(last, "Warning RebalanceInterrupted Stopped early: interrupted"), last)
	assert.Contains(t, last, "run `kubectl rebalance workloadrebalancer/cut` to finish")
}

// hangingMover writes the trigger, then waits for the run's end.
type hangingMover struct {
	started func()
	release chan struct{}
}

func (m hangingMover) Move(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row)) (rebalance.Row, error) {
	at := metav1.Now()
	row := rebalance.Row{Workload: t.Workload, Binding: rebalance.BindingNameFor(t.Workload), Result: appsv1alpha1.RebalanceSuccessful, TriggeredAt: &at}
	triggered(row)
	m.started()
	<-ctx.Done()
	row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeWaiting, Reason: rebalance.ReasonAwaitingScheduler, Message: "the scheduler has not answered yet"}
	return row, nil
}

func TestWorkloadEvent(t *testing.T) {
	web := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	role := rebalance.Workload{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "reader"}
	m1 := []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 3}}
	m2 := []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 3}}
	tests := []struct {
		name              string
		row               rebalance.Row
		wantType, wantWhy string
		wantMessage       string
		wantNone          bool
	}{
		{name: "not triggered", row: rebalance.Row{Workload: web}, wantNone: true},
		{name: "made before break", row: rebalance.Row{Workload: web, Result: appsv1alpha1.RebalanceSuccessful, Before: m1, After: m2,
			Staged: append(append([]workv1alpha2.TargetCluster{}, m1...), m2...), Readiness: &rebalance.Readiness{Ready: true},
			Observation: rebalance.Observation{Outcome: rebalance.OutcomeScheduled}},
			wantType: "Normal", wantWhy: ReasonRescheduled,
			wantMessage: "Deployment shop/web rescheduled: {member1:3} -> {member2:3}, made before break (staged {member1:3, member2:3} first); replicas ready"},
		{name: "one write", row: rebalance.Row{Workload: role, Result: appsv1alpha1.RebalanceSuccessful, Before: m1, After: m1, OneWrite: "nothing to start first",
			Observation: rebalance.Observation{Outcome: rebalance.OutcomeScheduled}},
			wantType: "Normal", wantWhy: ReasonRescheduled,
			wantMessage: "ClusterRole reader rescheduled: {member1:3} -> {member1:3}, in one write (nothing to start first)"},
		{name: "no binding", row: rebalance.Row{Workload: web, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound, Message: "no binding"},
			wantType: "Warning", wantWhy: ReasonFailed, wantMessage: "Deployment shop/web failed: ReferencedBindingNotFound: no binding"},
		{name: "past its deadline", row: rebalance.Row{Workload: web, Result: appsv1alpha1.RebalanceSuccessful,
			Observation: rebalance.Observation{Outcome: rebalance.OutcomeDeadlineExceeded, Reason: waves.ReasonNotReady, Message: "not ready within 5m0s"}},
			wantType: "Warning", wantWhy: ReasonFailed, wantMessage: "Deployment shop/web failed: DeadlineExceeded: NotReady: not ready within 5m0s"},
		{name: "still waiting", row: rebalance.Row{Workload: web, Result: appsv1alpha1.RebalanceSuccessful,
			Observation: rebalance.Observation{Outcome: rebalance.OutcomeWaiting, Reason: waves.ReasonAwaitingReady, Message: "rescheduled; the run stopped before the replicas were ready"}},
			wantType: "Normal", wantWhy: ReasonTriggered,
			wantMessage: "Deployment shop/web: trigger written; not done when the run ended: rescheduled; the run stopped before the replicas were ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eventType, reason, message, ok := workloadEvent(tt.row)
			if tt.wantNone {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tt.wantType, eventType)
			assert.Equal(t, tt.wantWhy, reason)
			assert.Equal(t, tt.wantMessage, message)
		})
	}
}

// scripted gives a test's mover the make-before-break interface a run's
// waves call: a hold always succeeds (so the record's first workload
// moves with it, as a held one does), and no earlier move left anything.
type scripted struct{ waves.Mover }

func (s scripted) WithOneWriteMover(waves.Mover, waves.WatchedBindings) waves.MakeBeforeBreak {
	return s
}
func (s scripted) WithObserver(func(*workv1alpha2.ResourceBinding)) waves.MakeBeforeBreak { return s }
func (s scripted) Hold(context.Context, rebalance.Target) (bool, error)                   { return true, nil }
func (s scripted) Unhold(context.Context, rebalance.Target) error                         { return nil }
func (s scripted) LeftSuspended(context.Context, rebalance.Target) (bool, error)          { return false, nil }
