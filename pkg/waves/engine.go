package waves

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Outcome and reasons the waves add to rebalance's vocabulary.
const (
	// ReasonNotTriggered: the trigger could not be written within the
	// progress deadline (conflicts, throttling, network).
	ReasonNotTriggered = "NotTriggered"
	// ReasonNotScheduled: the scheduler did not answer the trigger within
	// the progress deadline.
	ReasonNotScheduled = "NotScheduled"
	// ReasonNotReady: the scheduler answered, but the replicas of the new
	// placement were not ready within the progress deadline.
	ReasonNotReady = "NotReady"
	// ReasonAwaitingReady: the run stopped (Ctrl-C, --timeout) while the
	// replicas of the new placement were not ready yet.
	ReasonAwaitingReady = "AwaitingReady"
)

// StopReason says why a run stopped starting workloads before it started
// them all.
type StopReason string

const (
	// StopNone: every workload was started.
	StopNone StopReason = ""
	// StopFailureBudget: MaxFailures workloads failed.
	StopFailureBudget StopReason = "FailureBudget"
	// StopInterrupted: the context ended (Ctrl-C, SIGTERM, --timeout).
	StopInterrupted StopReason = "Interrupted"
	// StopError: a request no retry can fix failed (no permission, say).
	StopError StopReason = "Error"
	// StopLedgerGone: the ledger (a recorded run's WorkloadRebalancer) went
	// away during the run, so nothing could record a further start.
	StopLedgerGone StopReason = "LedgerGone"
	// StopAborted: someone aborted the run (its context ended with an
	// *AbortError as its cause).
	StopAborted StopReason = "Aborted"
)

// LedgerGoneError, returned by a ledger, stops the run from starting
// further workloads; Message says why, for the user.
type LedgerGoneError struct{ Message string }

func (e *LedgerGoneError) Error() string { return e.Message }

// Options tune an Engine.
type Options struct {
	// MaxInFlight bounds the workloads between start and done. At least 1.
	MaxInFlight int
	// WaitReady makes a workload done only once the replicas of its new
	// placement are ready; without it, scheduled is done.
	WaitReady bool
	// ProgressDeadline bounds each workload from its start to done; a
	// workload that takes longer counts as failed. Zero: no bound.
	ProgressDeadline time.Duration
	// MaxFailures stops starting workloads once that many failed. Zero:
	// no budget, every workload is started.
	MaxFailures int
	// FailuresSpent counts the failures of earlier runs of the same batch
	// (a resumed record): they count against MaxFailures.
	FailuresSpent int
	// Pause keeps a slot free for this long after its workload finished
	// before the next workload takes it (the minimum time a finished
	// workload is watched before the run moves on).
	Pause time.Duration
	// Order, when set, orders the workloads (like strings.Compare); nil
	// keeps the WorkloadRebalancer's order (rebalance.CompareWorkloads).
	Order func(a, b rebalance.Workload) int
	// Progress, when set, hears every change of the counts.
	Progress func(Status)
	// Finished, when set, hears each workload's row as its move ends,
	// from the goroutine that runs the waves (a recorded run's events).
	Finished func(rebalance.Row)
	// LedgerInterval is how often, at most, the triggers written are
	// handed to the ledger (a recorded run's status). Zero means 1s.
	LedgerInterval time.Duration
	// Gates are approval gates: after Gates[i] of the workloads this run
	// starts are finished (none in flight), the run calls Approve and
	// starts no further workload until it returns. Ascending; a gate at 0
	// waits before the first start (a run resumed at a step boundary).
	Gates []int
	// Approve waits for gate i to be approved. It returns nil to go on, or
	// an error when it cannot wait any longer; a run whose context ended
	// stops as its cause says (interrupted, aborted).
	Approve func(ctx context.Context, gate int) error
}

// Status counts the workloads of a run.
type Status struct {
	// Total workloads; Done finished well, Failed finished badly, InFlight
	// are started and not finished, Pending not started.
	Total, Done, Failed, InFlight, Pending int
	// Started is when the run started.
	Started time.Time
	// Stop is set once the run stopped starting workloads early.
	Stop StopReason
	// Paused is set while the run waits at an approval gate (Options.Gates).
	Paused bool
	// Moving are the workloads in flight, in the order they started.
	Moving []Moving
}

// Moving is a workload in flight.
type Moving struct {
	Workload rebalance.Workload
	Since    time.Time
}

// Result is how a waved run ended.
type Result struct {
	*rebalance.Result
	// Stop says why workloads were left unstarted; StopNone when all started.
	Stop StopReason
	// StopMessage says it in words, for the user.
	StopMessage string
	// NotStarted counts the workloads never started.
	NotStarted int
	// InFlightAtStop counts the workloads in flight when the run stopped.
	InFlightAtStop int
}

// Engine runs workloads in waves.
type Engine struct {
	// Mover, when set, moves each workload; otherwise Execute builds a
	// BindingMover from the runner it is given.
	Mover Mover
	// Handover, when set, moves each workload make-before-break instead of
	// Mover. In a batch above FleetThreshold, the workloads it leaves to
	// one write get the fleet's one-write mover (WithOneWriteMover), so
	// that they cost what they cost without it (a list and a watch per
	// namespace, not a get, a list and a watch per workload).
	Handover MakeBeforeBreak
	Options
	// Lister, when set, lets a batch of more than FleetThreshold workloads
	// read its bindings with one list per namespace and follow them with one
	// watch per namespace, instead of a get and a watch per workload.
	Lister BindingLister
	// FleetThreshold is the batch size above which Lister is used; zero
	// means 8.
	FleetThreshold int
	// FreshTrigger, when set, says which workloads are triggered at the
	// server's time when they start instead of at the runner's TriggerAt
	// (a waved record's workloads not yet in its spec).
	FreshTrigger func(rebalance.Workload) bool
	// Last is the result of the last Execute.
	Last *Result
}

// Ordered returns the distinct workloads of targets in the order a run
// starts them.
func (e *Engine) Ordered(targets []rebalance.Target) []rebalance.Workload {
	slots := e.slots(targets)
	out := make([]rebalance.Workload, 0, len(slots))
	for _, s := range slots {
		out = append(out, s.target.Workload)
	}
	return out
}

func (e *Engine) fleetThreshold() int {
	if e.FleetThreshold <= 0 {
		return 8
	}
	return e.FleetThreshold
}

// Execute runs targets in waves with runner as the template of every
// workload's run. It has the shape of a plain rebalance.Runner.Run, so a
// recorded run can hand its pending workloads to it: runner.Triggered, when
// set, is the ledger, handed the rows whose trigger was written, at most
// every LedgerInterval. The full result is kept in Last.
func (e *Engine) Execute(ctx context.Context, runner *rebalance.Runner, targets []rebalance.Target) (*rebalance.Result, error) {
	triggered := runner.Triggered
	var ledger func(*rebalance.Result) error
	if triggered != nil {
		ledger = func(r *rebalance.Result) error { triggered(r); return nil }
	}
	return e.ExecuteLedger(ctx, runner, targets, ledger)
}

// ExecuteLedger is Execute with a ledger that may refuse a hand-over: a
// *LedgerGoneError stops the run from starting further workloads.
func (e *Engine) ExecuteLedger(ctx context.Context, runner *rebalance.Runner, targets []rebalance.Target, ledger func(*rebalance.Result) error) (*rebalance.Result, error) {
	template := *runner
	template.Triggered = nil
	mover := e.Mover
	delegates := e.Handover != nil
	if delegates {
		mover = e.Handover
	}
	switch {
	case mover != nil && !delegates:
	case e.Lister != nil && len(rebalance.DistinctWorkloads(targets)) > e.fleetThreshold():
		fleetCtx, cancel := context.WithCancel(ctx)
		fl := newFleet(fleetCtx, template.API, e.Lister)
		defer func() {
			cancel()
			fl.stop()
		}()
		oneWrite := &fleetMover{runner: &template, waitReady: e.WaitReady, fleet: fl, fresh: e.FreshTrigger}
		if mover = oneWrite; delegates {
			// The workloads the mover leaves to one write share the
			// batch's lists and watches, as they would without it.
			mover = e.Handover.WithOneWriteMover(oneWrite, oneWrite)
		}
	case mover == nil:
		mover = &BindingMover{Runner: &template, WaitReady: e.WaitReady, FreshTrigger: e.FreshTrigger}
	}
	res, err := e.Run(ctx, mover, targets, ledger)
	e.Last = res
	if res != nil && runner.Clock != nil && res.Pending == 0 && template.DryRun == rebalance.DryRunNone {
		if now, ok := runner.Clock.Now(); ok {
			finish := metav1.NewTime(now)
			res.FinishTime = &finish
		}
	}
	return res.Result, err
}

// WatchedBindings is a one-write mover that follows the bindings of a run
// with a list and a watch per namespace (the mover of a batch above
// FleetThreshold): Watched returns t's binding as the watch last showed
// it, listing its namespace first if no workload did, or false when it
// holds none it can vouch for (not found, or its write was refused and the
// next read goes to the server).
type WatchedBindings interface {
	Watched(ctx context.Context, t rebalance.Target) (*rebalance.Binding, bool)
	// Wrote tells the mover of a write another writer of the run made to a
	// binding (a make-before-break move lifting its hold before it hands
	// the workload over): the mover reads that binding as written from now
	// on, not as its watch last showed it.
	Wrote(b *rebalance.Binding)
}

// slot is the state of one workload in a run.
type slot struct {
	target  rebalance.Target
	row     rebalance.Row
	started bool
	// startedAt is when its move started.
	startedAt time.Time
	// finished is set once the workload's move returned.
	finished bool
	failed   bool
	// triggered is set once the trigger's fate was known.
	triggered bool
}

// finishedMove is a move that returned.
type finishedMove struct {
	index int
	row   rebalance.Row
	err   error
	// late is set when the workload's own deadline ended the move.
	late bool
}

// Run moves targets with mover, at most MaxInFlight at a time, in order.
// Duplicate targets collapse into one workload. ledger, when set, gets the
// rows whose trigger was written. The error is the first one no retry can
// fix; the result is complete in any case: unstarted workloads are pending
// rows that say why they were not started.
func (e *Engine) Run(ctx context.Context, mover Mover, targets []rebalance.Target, ledger func(*rebalance.Result) error) (*Result, error) {
	slots := e.slots(targets)
	maxInFlight := max(e.MaxInFlight, 1)
	status := Status{Total: len(slots), Pending: len(slots), Started: time.Now()}
	spent := e.FailuresSpent
	report := func() {
		if e.Progress == nil {
			return
		}
		status.Moving = status.Moving[:0:0]
		for _, s := range slots {
			if s.started && !s.finished {
				status.Moving = append(status.Moving, Moving{Workload: s.target.Workload, Since: s.startedAt})
			}
		}
		e.Progress(status)
	}
	report()

	var mu sync.Mutex // guards the slots' rows and triggered flags, shared with the ledger
	gone := make(chan string, 1)
	ledgerDone := e.startLedger(ctx, &mu, slots, ledger, gone)

	runCtx, cancelAll := context.WithCancel(ctx)
	defer cancelAll()
	done := make(chan finishedMove)
	var wg sync.WaitGroup
	start := func(i int) {
		s := slots[i]
		s.started, s.startedAt = true, time.Now()
		status.Pending--
		status.InFlight++
		wg.Add(1)
		go func() {
			defer wg.Done()
			moveCtx, cancel := runCtx, context.CancelFunc(func() {})
			if e.ProgressDeadline > 0 {
				moveCtx, cancel = context.WithTimeout(runCtx, e.ProgressDeadline)
			}
			defer cancel()
			row, err := mover.Move(moveCtx, s.target, func(row rebalance.Row) {
				mu.Lock()
				defer mu.Unlock()
				s.row, s.triggered = row, true
			})
			late := errors.Is(moveCtx.Err(), context.DeadlineExceeded) && runCtx.Err() == nil
			done <- finishedMove{index: i, row: row, err: err, late: late}
		}()
	}

	var (
		next     int
		resting  []time.Time
		firstErr error
		result   = &Result{}
		timer    *time.Timer
	)
	stop := func(reason StopReason, message string) {
		if result.Stop == StopNone {
			result.Stop, result.StopMessage = reason, message
			result.InFlightAtStop = status.InFlight
			status.Stop = reason
		}
	}
	if e.MaxFailures > 0 && spent >= e.MaxFailures {
		stop(StopFailureBudget, budgetMessage(0, spent, e.MaxFailures))
	}
	gate := 0
	gated := func() bool {
		for gate < len(e.Gates) && e.Approve != nil && e.Gates[gate] < next {
			gate++ // passed already (a gate inside a step of one)
		}
		return gate < len(e.Gates) && e.Approve != nil && next >= e.Gates[gate] && next < len(slots)
	}
	for {
		now := time.Now()
		resting = slices.DeleteFunc(resting, func(until time.Time) bool { return !until.After(now) })
		for result.Stop == StopNone && next < len(slots) && status.InFlight+len(resting) < maxInFlight && !gated() {
			start(next)
			next++
			report()
		}
		if result.Stop == StopNone && status.InFlight == 0 && gated() && ctx.Err() == nil {
			// Every workload of the step is done: wait for a person.
			status.Paused = true
			report()
			err := e.Approve(ctx, gate)
			status.Paused = false
			if err == nil {
				gate++
				report()
				continue
			}
			if ctx.Err() == nil {
				stop(StopError, err.Error())
				if firstErr == nil {
					firstErr = err
				}
			}
			report()
		}
		if status.InFlight == 0 && (next == len(slots) || result.Stop != StopNone) {
			break
		}
		var wake <-chan time.Time
		if len(resting) > 0 && result.Stop == StopNone && next < len(slots) {
			if timer != nil {
				timer.Stop()
			}
			timer = time.NewTimer(time.Until(slices.MinFunc(resting, func(a, b time.Time) int { return a.Compare(b) })))
			wake = timer.C
		}
		var ctxDone <-chan struct{}
		if result.Stop == StopNone {
			ctxDone = ctx.Done()
		}
		select {
		case <-ctxDone:
			var aborted *AbortError
			if errors.As(context.Cause(ctx), &aborted) {
				stop(StopAborted, aborted.Message)
			} else {
				stop(StopInterrupted, interruptMessage(ctx))
			}
			report()
		case <-wake:
		case why := <-gone:
			stop(StopLedgerGone, why)
			report()
		case f := <-done:
			status.InFlight--
			s := slots[f.index]
			mu.Lock()
			s.row, s.finished = e.judge(f, ctx), true
			if s.row.Result != "" {
				s.triggered = true
			}
			s.failed = isFailure(s.row)
			mu.Unlock()
			if s.failed {
				status.Failed++
			} else if e.isFinal(s.row) {
				status.Done++
			}
			if f.err != nil && firstErr == nil {
				firstErr = f.err
				stop(StopError, f.err.Error())
				cancelAll()
			}
			if e.MaxFailures > 0 && status.Failed+spent >= e.MaxFailures {
				stop(StopFailureBudget, budgetMessage(status.Failed, spent, e.MaxFailures))
			}
			if e.Pause > 0 {
				resting = append(resting, time.Now().Add(e.Pause))
			}
			if e.Finished != nil {
				e.Finished(s.row)
			}
			report()
		}
	}
	if timer != nil {
		timer.Stop()
	}
	wg.Wait()
	ledgerDone()

	result.Result = &rebalance.Result{Rows: make([]rebalance.Row, 0, len(slots))}
	for _, s := range slots {
		row := s.row
		if !s.started {
			row.Message = "not started: " + notStartedWhy(result.Stop)
			result.NotStarted++
		}
		result.Rows = append(result.Rows, row)
		if row.Result == appsv1alpha1.RebalanceSuccessful && row.TriggeredAt != nil {
			if result.TriggerTime.IsZero() || row.TriggeredAt.Before(&result.TriggerTime) {
				result.TriggerTime = *row.TriggeredAt
			}
		}
	}
	result.Written = countWritten(result.Rows)
	result.Failed, result.Pending = rebalance.CountRows(result.Rows)
	return result, firstErr
}

// slots makes one slot per distinct target, in the run's order.
func (e *Engine) slots(targets []rebalance.Target) []*slot {
	seen := make(map[rebalance.Workload]*slot, len(targets))
	slots := make([]*slot, 0, len(targets))
	for _, t := range targets {
		if s, ok := seen[t.Workload]; ok {
			if s.target.UID == "" {
				s.target.UID = t.UID
			}
			continue
		}
		s := &slot{target: t, row: rebalance.Row{Workload: t.Workload, Binding: rebalance.BindingNameFor(t.Workload)}}
		seen[t.Workload] = s
		slots = append(slots, s)
	}
	order := e.Order
	if order == nil {
		order = rebalance.CompareWorkloads
	}
	slices.SortStableFunc(slots, func(a, b *slot) int { return order(a.target.Workload, b.target.Workload) })
	return slots
}

// judge turns a finished move into the workload's row: a move its own
// deadline cut short is a failure; one the run's end cut short is left as
// it was, pending.
func (e *Engine) judge(f finishedMove, runCtx context.Context) rebalance.Row {
	row := f.row
	if f.err != nil {
		return row
	}
	if f.late && !e.isFinal(row) {
		deadline := e.ProgressDeadline.String()
		switch {
		case row.Result == "":
			row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeDeadlineExceeded, Reason: ReasonNotTriggered,
				Message: fmt.Sprintf("the trigger could not be written within %s (--progress-deadline)", deadline)}
		case row.Observation.Outcome == rebalance.OutcomeScheduled:
			row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeDeadlineExceeded, Reason: ReasonNotReady,
				Message: fmt.Sprintf("rescheduled, but the replicas were not ready within %s (--progress-deadline)", deadline)}
		default:
			row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeDeadlineExceeded, Reason: ReasonNotScheduled,
				Message: fmt.Sprintf("the scheduler did not answer the trigger within %s (--progress-deadline)", deadline)}
		}
		return row
	}
	if runCtx.Err() != nil && e.WaitReady && row.Observation.Outcome == rebalance.OutcomeScheduled && !seenReady(row) {
		// Stopped while waiting for the replicas: neither done nor failed.
		row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeWaiting, Reason: ReasonAwaitingReady,
			Message: "rescheduled; the run stopped before the replicas were ready"}
	}
	return row
}

// isFinal reports whether a row needs nothing more: done or failed for good.
func (e *Engine) isFinal(row rebalance.Row) bool {
	switch {
	case row.Result == appsv1alpha1.RebalanceFailed:
		return true
	case row.Observation.Outcome == rebalance.OutcomeSchedulingFailed, row.Observation.Outcome == rebalance.OutcomeIgnored:
		return true
	case row.Observation.Outcome == rebalance.OutcomeScheduled:
		return !e.WaitReady || seenReady(row)
	}
	return false
}

// isFailure reports whether a finished row counts against the failure budget.
func isFailure(row rebalance.Row) bool {
	failed, _ := rebalance.CountRows([]rebalance.Row{row})
	return failed > 0
}

// seenReady tells a row whose replicas were seen ready (see waitReady).
func seenReady(row rebalance.Row) bool {
	return row.Readiness != nil && row.Readiness.Ready
}

// countWritten counts the rows whose trigger this run wrote.
func countWritten(rows []rebalance.Row) int {
	n := 0
	for _, row := range rows {
		if row.Result == appsv1alpha1.RebalanceSuccessful && row.TriggeredAt != nil {
			n++
		}
	}
	return n
}

// budgetMessage says that the failure budget is used up, counting the
// failures of earlier runs of a resumed record.
func budgetMessage(failed, spent, maxFailures int) string {
	if spent == 0 {
		return fmt.Sprintf("%d workload(s) failed, which reached --max-failures %d; no further workload was started", failed, maxFailures)
	}
	return fmt.Sprintf("%d workload(s) failed in this run and %d in earlier runs of the record, which reached --max-failures %d; no further workload was started", failed, spent, maxFailures)
}

// interruptMessage says why ctx ended.
func interruptMessage(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "the timeout expired; no further workload was started"
	}
	return "interrupted; no further workload was started"
}

// AbortError, as the cause of a run's context, says that someone aborted
// the run: the waves stop starting workloads, as on Ctrl-C, and say why.
type AbortError struct{ Message string }

func (e *AbortError) Error() string { return e.Message }

// notStartedWhy says why a workload was left unstarted.
func notStartedWhy(stop StopReason) string {
	switch stop {
	case StopFailureBudget:
		return "the failure budget (--max-failures) was used up"
	case StopInterrupted:
		return "the run was interrupted"
	case StopError:
		return "the run stopped on an error"
	case StopLedgerGone:
		return "the run's workloadrebalancer was deleted"
	case StopAborted:
		return "the run was aborted"
	}
	return "the run stopped"
}

// startLedger hands the rows whose trigger was written to ledger at most
// every LedgerInterval, from a goroutine of its own so that a slow status
// write never holds up the waves. The function returned stops it after one
// last hand-over of what changed.
func (e *Engine) startLedger(ctx context.Context, mu *sync.Mutex, slots []*slot, ledger func(*rebalance.Result) error, gone chan<- string) func() {
	if ledger == nil {
		return func() {}
	}
	interval := e.LedgerInterval
	if interval <= 0 {
		interval = time.Second
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	handed, handedFailed := 0, 0
	flush := func() {
		mu.Lock()
		rows := make([]rebalance.Row, 0, len(slots))
		failed := 0
		for _, s := range slots {
			if s.triggered && s.row.Result != "" {
				rows = append(rows, s.row)
			}
			if s.failed {
				failed++
			}
		}
		mu.Unlock()
		// A failure is handed over too, so that a resumed record knows the
		// budget already spent.
		if len(rows) == handed && failed == handedFailed {
			return
		}
		handed, handedFailed = len(rows), failed
		var lost *LedgerGoneError
		if err := ledger(&rebalance.Result{Rows: rows}); errors.As(err, &lost) {
			select {
			case gone <- lost.Message:
			default:
			}
		}
	}
	go func() {
		defer close(finished)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-quit:
				if ctx.Err() == nil {
					flush()
				}
				return
			case <-ctx.Done():
				// The caller records the final state itself.
				return
			case <-ticker.C:
				flush()
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}
