package waves

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// fakeMover moves workloads by rules keyed on the workload's name, and
// records how many moves overlapped.
type fakeMover struct {
	mu       sync.Mutex
	inFlight int
	peak     int
	order    []string
	// outcome per name; default Scheduled and ready.
	outcome map[string]rebalance.Outcome
	// hang names moves that never finish on their own.
	hang map[string]bool
	// hold, when set, is waited on by every move before it finishes.
	hold chan struct{}
}

func (f *fakeMover) Move(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row)) (rebalance.Row, error) {
	f.mu.Lock()
	f.inFlight++
	f.peak = max(f.peak, f.inFlight)
	f.order = append(f.order, t.Workload.Name)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	at := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	row := rebalance.Row{Workload: t.Workload, Binding: rebalance.BindingNameFor(t.Workload),
		Result: appsv1alpha1.RebalanceSuccessful, TriggeredAt: &at}
	triggered(row)
	if f.hang[t.Workload.Name] {
		<-ctx.Done()
		row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeWaiting}
		return row, nil
	}
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeWaiting}
			return row, nil
		}
	}
	outcome := rebalance.OutcomeScheduled
	if o, ok := f.outcome[t.Workload.Name]; ok {
		outcome = o
	}
	row.Observation = rebalance.Observation{Outcome: outcome}
	if outcome == rebalance.OutcomeScheduled {
		row.Message = readyPrefix + "member1 1/1"
		row.Readiness = &rebalance.Readiness{Ready: true, Detail: "member1 1/1"}
	}
	return row, nil
}

func targets(names ...string) []rebalance.Target {
	out := make([]rebalance.Target, 0, len(names))
	for _, n := range names {
		out = append(out, rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: n}})
	}
	return out
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("app-%02d", i)
	}
	return out
}

func TestWindowNeverExceedsMaxInFlight(t *testing.T) {
	for _, n := range []int{1, 3, 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			mover := &fakeMover{}
			e := &Engine{Options: Options{MaxInFlight: n, WaitReady: true}}
			res, err := e.Run(context.Background(), mover, targets(names(25)...), nil)
			require.NoError(t, err)
			assert.LessOrEqual(t, mover.peak, n)
			assert.Equal(t, 0, res.Failed)
			assert.Equal(t, 0, res.Pending)
			assert.Equal(t, StopNone, res.Stop)
			assert.Equal(t, 25, res.Written)
			assert.Len(t, res.Rows, 25)
		})
	}
}

func TestOrder(t *testing.T) {
	mover := &fakeMover{}
	e := &Engine{Options: Options{MaxInFlight: 1}}
	_, err := e.Run(context.Background(), mover, targets("c", "a", "b", "a"), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, mover.order, "the WorkloadRebalancer's order, duplicates collapsed")

	given := map[string]int{"c": 0, "a": 1, "b": 2}
	mover = &fakeMover{}
	e.Order = func(a, b rebalance.Workload) int { return given[a.Name] - given[b.Name] }
	_, err = e.Run(context.Background(), mover, targets("c", "a", "b"), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"c", "a", "b"}, mover.order)
}

// TestFinishedHearsEachWorkloadAsItEnds checks that every started workload
// is told once, with its judged row, as its move ends; unstarted ones are
// not.
func TestFinishedHearsEachWorkloadAsItEnds(t *testing.T) {
	mover := &fakeMover{outcome: map[string]rebalance.Outcome{"app-01": rebalance.OutcomeSchedulingFailed}}
	var heard []rebalance.Row
	e := &Engine{Options: Options{MaxInFlight: 1, MaxFailures: 1, Finished: func(row rebalance.Row) { heard = append(heard, row) }}}
	res, err := e.Run(context.Background(), mover, targets(names(4)...), nil)
	require.NoError(t, err)
	require.Len(t, heard, 2, "app-00 and app-01 started; the budget stopped the rest")
	assert.Equal(t, "app-00", heard[0].Workload.Name)
	assert.Equal(t, rebalance.OutcomeScheduled, heard[0].Observation.Outcome)
	assert.Equal(t, "app-01", heard[1].Workload.Name)
	assert.Equal(t, rebalance.OutcomeSchedulingFailed, heard[1].Observation.Outcome)
	assert.Equal(t, res.Rows[1], heard[1], "the row heard is the row of the result")
}

func TestFailureBudgetStopsStarting(t *testing.T) {
	mover := &fakeMover{outcome: map[string]rebalance.Outcome{
		"app-00": rebalance.OutcomeSchedulingFailed,
		"app-01": rebalance.OutcomeSchedulingFailed,
	}}
	e := &Engine{Options: Options{MaxInFlight: 1, MaxFailures: 2, WaitReady: true}}
	res, err := e.Run(context.Background(), mover, targets(names(6)...), nil)
	require.NoError(t, err)
	assert.Equal(t, StopFailureBudget, res.Stop)
	assert.Contains(t, res.StopMessage, "--max-failures 2")
	assert.Equal(t, []string{"app-00", "app-01"}, mover.order)
	assert.Equal(t, 4, res.NotStarted)
	assert.Equal(t, 2, res.Failed)
	assert.Equal(t, 4, res.Pending)
	assert.Equal(t, "not started: the failure budget (--max-failures) was used up", res.Rows[5].Message)
	assert.Empty(t, string(res.Rows[5].Result))
}

func TestProgressDeadlineIsAFailure(t *testing.T) {
	mover := &fakeMover{hang: map[string]bool{"app-01": true}}
	e := &Engine{Options: Options{MaxInFlight: 2, ProgressDeadline: 50 * time.Millisecond, MaxFailures: 1, WaitReady: true}}
	res, err := e.Run(context.Background(), mover, targets(names(3)...), nil)
	require.NoError(t, err)
	row := res.Rows[1]
	assert.Equal(t, rebalance.OutcomeDeadlineExceeded, row.Observation.Outcome)
	assert.Equal(t, ReasonNotScheduled, row.Observation.Reason)
	assert.Equal(t, 1, res.Failed)
	assert.Equal(t, StopFailureBudget, res.Stop)
}

func TestInterruptLeavesTheRestPending(t *testing.T) {
	mover := &fakeMover{hold: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	e := &Engine{Options: Options{MaxInFlight: 3, WaitReady: true, Progress: func(s Status) {
		if s.InFlight == 3 {
			once.Do(cancel)
		}
	}}}
	res, err := e.Run(ctx, mover, targets(names(10)...), nil)
	require.NoError(t, err)
	assert.Equal(t, StopInterrupted, res.Stop)
	assert.Equal(t, 3, res.InFlightAtStop)
	assert.Equal(t, 7, res.NotStarted)
	assert.Equal(t, 10, res.Pending)
	assert.Equal(t, 3, res.Written, "the in-flight triggers are written and reported")
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, res.Rows[0].Result)
	assert.Equal(t, rebalance.OutcomeWaiting, res.Rows[0].Observation.Outcome)
}

func TestPauseKeepsSlotsFree(t *testing.T) {
	mover := &fakeMover{}
	e := &Engine{Options: Options{MaxInFlight: 2, Pause: 20 * time.Millisecond}}
	res, err := e.Run(context.Background(), mover, targets(names(6)...), nil)
	require.NoError(t, err)
	assert.Equal(t, 0, res.Pending)
	assert.LessOrEqual(t, mover.peak, 2)
}

func TestLedgerGetsTheWrittenTriggers(t *testing.T) {
	mover := &fakeMover{}
	var mu sync.Mutex
	var seen int
	e := &Engine{Options: Options{MaxInFlight: 2, LedgerInterval: time.Millisecond, Pause: 5 * time.Millisecond}}
	_, err := e.Run(context.Background(), mover, targets(names(5)...), func(r *rebalance.Result) error {
		mu.Lock()
		defer mu.Unlock()
		for _, row := range r.Rows {
			assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result)
		}
		seen = len(r.Rows)
		return nil
	})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 5, seen)
}

func TestLedgerGoneStopsStarting(t *testing.T) {
	mover := &fakeMover{}
	e := &Engine{Options: Options{MaxInFlight: 1, LedgerInterval: time.Millisecond, Pause: 20 * time.Millisecond}}
	res, err := e.Run(context.Background(), mover, targets(names(6)...), func(r *rebalance.Result) error {
		return &LedgerGoneError{Message: "workloadrebalancer x was deleted"}
	})
	require.NoError(t, err)
	assert.Equal(t, StopLedgerGone, res.Stop)
	assert.Equal(t, "workloadrebalancer x was deleted", res.StopMessage)
	assert.Greater(t, res.NotStarted, 0)
}

func TestFailuresSpentCountAgainstTheBudget(t *testing.T) {
	e := &Engine{Options: Options{MaxInFlight: 1, MaxFailures: 2, FailuresSpent: 2}}
	res, err := e.Run(context.Background(), &fakeMover{}, targets(names(3)...), nil)
	require.NoError(t, err)
	assert.Equal(t, StopFailureBudget, res.Stop)
	assert.Equal(t, 3, res.NotStarted)
	assert.Contains(t, res.StopMessage, "2 in earlier runs")
}
