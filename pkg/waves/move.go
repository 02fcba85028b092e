package waves

import (
	"context"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Mover moves one workload: it writes the trigger, tells triggered once
// the trigger's fate is known (written, or not to be written), and returns
// once the workload is done, failed, or ctx ended. The error is one no
// retry can fix (a *rebalance.RequestError); it stops the whole run.
type Mover interface {
	Move(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row)) (rebalance.Row, error)
}

// MakeBeforeBreak is a make-before-break move (package handover's Mover)
// as the runs and the waves call it. Every capability they use is declared
// here, so that none is discovered by a type assertion: the command builds
// it and hands it to run.Request and Engine.Handover typed.
type MakeBeforeBreak interface {
	Mover
	// WithOneWriteMover returns a copy that moves the workloads it leaves
	// to one write (nothing to start first, a kind without a ready count)
	// with m. watched, when not nil, is the run's bindings as m follows
	// them (the fleet's mover): the copy may judge its workloads from them.
	WithOneWriteMover(m Mover, watched WatchedBindings) MakeBeforeBreak
	// WithObserver returns a copy whose moves show observe the binding
	// each starts from, as read (a run notes there what it warns about
	// afterwards).
	WithObserver(observe func(*workv1alpha2.ResourceBinding)) MakeBeforeBreak
	// Hold suspends t's binding ahead of its move, and reports whether it
	// did (a binding missing, or suspended by someone else, is left to the
	// move); Unhold lifts a hold no move took over.
	Hold(ctx context.Context, t rebalance.Target) (bool, error)
	Unhold(ctx context.Context, t rebalance.Target) error
	// LeftSuspended reports whether an earlier move of this tool left t's
	// binding held, so that moving it again recovers it.
	LeftSuspended(ctx context.Context, t rebalance.Target) (bool, error)
}

// BindingMover moves a workload with a rebalance.Runner, one target per
// run, and then, with WaitReady, follows the binding until the replicas of
// the new placement are ready.
type BindingMover struct {
	// Runner is the template of each workload's run: its API, clock,
	// failure events, dry run and trigger time are used as they are.
	Runner *rebalance.Runner
	// WaitReady makes a workload done only once its replicas are ready.
	WaitReady bool
	// FreshTrigger, when set, selects the workloads triggered at the
	// server's time when they start rather than at the runner's TriggerAt.
	FreshTrigger func(rebalance.Workload) bool
}

// Move implements Mover.
func (m *BindingMover) Move(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row)) (rebalance.Row, error) {
	runner := *m.Runner
	if m.FreshTrigger != nil && m.FreshTrigger(t.Workload) {
		runner.TriggerAt = nil
	}
	runner.Progress = nil
	// A workload is followed further below; lingering for a second pass of
	// the scheduler would only hold its slot.
	runner.Settle = 0
	runner.Triggered = func(result *rebalance.Result) {
		if len(result.Rows) == 1 {
			triggered(result.Rows[0])
		}
	}
	result, err := runner.Run(ctx, []rebalance.Target{t})
	row := rebalance.Row{Workload: t.Workload, Binding: rebalance.BindingNameFor(t.Workload)}
	if result != nil && len(result.Rows) == 1 {
		row = result.Rows[0]
	}
	if err != nil || !m.WaitReady || !runner.Wait || runner.DryRun != rebalance.DryRunNone ||
		row.Observation.Outcome != rebalance.OutcomeScheduled {
		return row, err
	}
	m.waitReady(ctx, &row)
	return row, nil
}

// waitReady follows the binding of row until the replicas of its placement
// are ready or ctx ends, and records what it saw on the row: the placement
// and, in the message, the ready counts. It reads the binding once, then
// watches it; a watch that cannot be made is replaced by reads at a growing
// interval.
func (m *BindingMover) waitReady(ctx context.Context, row *rebalance.Row) {
	api := m.Runner.API
	ns := row.Workload.Namespace
	scope := rebalance.Scope{ClusterScoped: ns == "", Namespace: ns, Name: row.Binding}
	interval := time.Second
	var w watch.Interface
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	check := func(b *rebalance.Binding) bool {
		row.After = b.Spec.Clusters
		r := rebalance.CheckReady(b.Spec, b.Status)
		row.Readiness = &r
		row.Message = readyPrefix + r.Detail
		if !r.Ready {
			row.Message = "waiting for replicas to be ready: " + r.Detail
		}
		return r.Ready
	}
	for ctx.Err() == nil {
		b, err := api.Get(ctx, ns, row.Binding)
		switch {
		case apierrors.IsNotFound(err):
			row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeIgnored, Reason: rebalance.ReasonBindingDeleted,
				Message: "the binding was deleted before its replicas were ready"}
			return
		case err != nil:
			if sleep(ctx, interval) != nil {
				return
			}
			interval = min(2*interval, 10*time.Second)
			continue
		}
		if check(b) {
			return
		}
		w, err = api.Watch(ctx, scope, b.ResourceVersion)
		if err != nil {
			w = nil
			if sleep(ctx, interval) != nil {
				return
			}
			interval = min(2*interval, 10*time.Second)
			continue
		}
		for done := false; !done; {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					done = true
					break
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					if b := bindingOf(ev); b != nil && check(b) {
						return
					}
				case watch.Deleted:
					row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeIgnored, Reason: rebalance.ReasonBindingDeleted,
						Message: "the binding was deleted before its replicas were ready"}
					return
				case watch.Error:
					done = true
				}
			}
		}
		w.Stop()
		w = nil
	}
}

// readyPrefix starts the message of a row whose replicas were seen ready.
const readyPrefix = "replicas ready: "

// bindingOf reads a watched binding; nil for anything else.
func bindingOf(ev watch.Event) *rebalance.Binding {
	return rebalance.BindingFromObject(ev.Object)
}

// sleep waits for d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	return rebalance.SleepContext(ctx, d)
}
