package run

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"golang.org/x/sync/errgroup"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// recordMover is the mover of a recorded run's workloads (the
// make-before-break move), nil when they are triggered in one write: a
// server-side run leaves the triggers to Karmada's controller.
func (r Request) recordMover() waves.MakeBeforeBreak {
	switch {
	case r.Record.ServerSide || r.DryRun != rebalance.DryRunNone:
		return nil
	case r.waved():
		return r.Waves.Mover
	}
	return r.Mover
}

// heldTargets are the workloads of a record about to be created whose
// bindings are held first: Karmada's workloadRebalancer controller
// triggers what a new record lists at its creationTimestamp, and on a held
// binding that trigger moves nothing; each workload's move carries on from
// its hold and releases it with its own, later trigger. A waved record, or
// one all at once that lists more workloads than the run starts together,
// is created with its first workload only (it grows as the moves release),
// so only that one is held ahead and every other move holds its binding
// when it starts; a record all at once whose moves all start together
// lists, and holds, them all.
type heldTargets struct {
	mover   waves.MakeBeforeBreak
	targets []rebalance.Target
	held    []rebalance.Target
	// workers bounds the holds taken or lifted at once.
	workers int
}

// holdRecorded returns the holds of plan's record, nil when the run's
// workloads do not move make-before-break.
func holdRecorded(mover waves.MakeBeforeBreak, plan *recordPlan, known map[rebalance.Workload]rebalance.Target, workers int) *heldTargets {
	if mover == nil {
		return nil
	}
	ws := plan.desired.Spec.Workloads
	if len(plan.grow) > 0 {
		ws = plan.grow[:1]
	}
	return &heldTargets{mover: mover, workers: workers, targets: recordTargets(rebalance.DistinctWorkloads(recordTargets(ws, known)), known)}
}

// take holds the bindings, up to h.workers at a time (the run's rate limit
// paces the writes); one that is not held (missing, suspended by someone
// else, nothing to keep) is left to its move. On an error, the holds taken
// are kept in held for lift.
func (h *heldTargets) take(ctx context.Context) error {
	if h == nil {
		return nil
	}
	took := make([]bool, len(h.targets))
	var g errgroup.Group
	g.SetLimit(rebalance.WorkersOr(h.workers))
	for i, t := range h.targets {
		g.Go(func() error {
			held, err := h.mover.Hold(ctx, t)
			took[i] = held
			return err
		})
	}
	err := g.Wait()
	for i, t := range h.targets {
		if took[i] {
			h.held = append(h.held, t)
		}
	}
	return err
}

// lift lifts the holds no move took over, up to h.workers at a time, and
// tells notice of one it could not lift: it stays held until its deadline,
// when the daemons, kubectl rebalance recover or the next run of the same
// workload lift it.
func (h *heldTargets) lift(ctx context.Context, notice func(string)) {
	if h == nil || len(h.held) == 0 {
		return
	}
	liftCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(rebalance.WorkersOr(h.workers))
	for _, t := range h.held {
		g.Go(func() error {
			if err := h.mover.Unhold(liftCtx, t); err != nil {
				mu.Lock()
				notice(fmt.Sprintf("warning: %s stays suspended ahead of its move (%v); `kubectl rebalance recover` or running the same command again lifts it", rebalance.BindingRef(t.Workload), err))
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
}

// recordMoves is the mover of one pass of a recorded run: the workloads
// this run held before creating the record, or starts beyond it (fresh),
// move make-before-break; every other one was listed in the record before
// (a spec edit, a record run again), so Karmada's controller has triggered
// it at the creationTimestamp already, and the run triggers it as the
// record's own, as does a workload the handover leaves to one write. A
// listed workload an earlier run left suspended (left) moves too.
func recordMoves(m waves.MakeBeforeBreak, runner *rebalance.Runner, waitReady bool, fresh func(rebalance.Workload) bool, hold *heldTargets, left *leftovers) waves.MakeBeforeBreak {
	template := *runner
	template.Triggered = nil
	oneWrite := &waves.BindingMover{Runner: &template, WaitReady: waitReady, FreshTrigger: fresh}
	return passMover{MakeBeforeBreak: m.WithOneWriteMover(oneWrite, nil), oneWrite: oneWrite, moves: func(w rebalance.Workload) bool {
		return fresh(w) || hold.has(w) || left.has(w)
	}}
}

// passMover sends the workloads moves selects to the make-before-break
// move it embeds, the others to oneWrite; it holds, lifts holds and finds
// leftovers as that move does.
type passMover struct {
	waves.MakeBeforeBreak
	oneWrite waves.Mover
	moves    func(rebalance.Workload) bool
}

// WithOneWriteMover implements waves.MakeBeforeBreak: both the workloads
// the make-before-break move leaves to one write and those it never sees
// go to oneWrite.
func (p passMover) WithOneWriteMover(oneWrite waves.Mover, watched waves.WatchedBindings) waves.MakeBeforeBreak {
	return passMover{MakeBeforeBreak: p.MakeBeforeBreak.WithOneWriteMover(oneWrite, watched), oneWrite: oneWrite, moves: p.moves}
}

// WithObserver implements waves.MakeBeforeBreak: only the make-before-break
// moves read their bindings themselves.
func (p passMover) WithObserver(observe func(*workv1alpha2.ResourceBinding)) waves.MakeBeforeBreak {
	return passMover{MakeBeforeBreak: p.MakeBeforeBreak.WithObserver(observe), oneWrite: p.oneWrite, moves: p.moves}
}

func (p passMover) Move(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row)) (rebalance.Row, error) {
	if p.moves(t.Workload) {
		return p.MakeBeforeBreak.Move(ctx, t, triggered)
	}
	return p.oneWrite.Move(ctx, t, triggered)
}

// has reports whether w's binding was held.
func (h *heldTargets) has(w rebalance.Workload) bool {
	if h == nil {
		return false
	}
	for _, t := range h.held {
		if t.Workload == w {
			return true
		}
	}
	return false
}

// leftovers are the workloads an existing record lists whose bindings an
// earlier run's hold or move left suspended: a process killed (SIGKILL, a
// lost machine) or a daemon that lost its Lease before it released or undid
// them. Karmada's controller may have recorded such a workload Successful
// already (its trigger landed on the held binding), so the record alone
// would never move it again and the binding would stay suspended: the run
// moves it again, make-before-break, carrying on from the hold or undoing
// the staged move first.
type leftovers struct {
	// pending are listed without a result: the pass moves them.
	pending map[rebalance.Workload]bool
	// done are listed with a result: the run moves them before its pass.
	done []rebalance.Target
}

// findLeftovers reads the bindings of the workloads obj lists, at most
// workers at a time; nil when nothing is left (or the run's workloads do
// not move make-before-break).
func findLeftovers(ctx context.Context, mover waves.MakeBeforeBreak, obj *appsv1alpha1.WorkloadRebalancer, known map[rebalance.Workload]rebalance.Target, workers int) (*leftovers, error) {
	if mover == nil || obj == nil {
		return nil, nil
	}
	result := map[rebalance.Workload]appsv1alpha1.RebalanceResult{}
	for _, entry := range obj.Status.ObservedWorkloads {
		result[entry.Workload] = entry.Result
	}
	targets := recordTargets(rebalance.DistinctWorkloads(recordTargets(obj.Spec.Workloads, known)), known)
	left := make([]bool, len(targets))
	var g errgroup.Group
	g.SetLimit(rebalance.WorkersOr(workers))
	for i, t := range targets {
		g.Go(func() error {
			has, err := mover.LeftSuspended(ctx, t)
			left[i] = has
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out *leftovers
	for i, t := range targets {
		if !left[i] {
			continue
		}
		if out == nil {
			out = &leftovers{pending: map[rebalance.Workload]bool{}}
		}
		if result[t.Workload] == "" {
			out.pending[t.Workload] = true
		} else {
			out.done = append(out.done, t)
		}
	}
	return out, nil
}

// has reports whether w is a pending leftover.
func (l *leftovers) has(w rebalance.Workload) bool {
	return l != nil && l.pending[w]
}

// resume moves the leftovers the record already has a result for, and
// tells notice what each move did (the record keeps its result).
func (l *leftovers) resume(ctx context.Context, mover waves.MakeBeforeBreak, workers int, notice func(string)) {
	if l == nil || len(l.done) == 0 {
		return
	}
	res, err := runMoved(ctx, Request{Targets: l.done, Mover: mover, Workers: workers})
	if res != nil {
		for _, row := range res.Rows {
			notice(fmt.Sprintf("%s was left suspended by an interrupted move of an earlier run: moved again (%s)", rebalance.BindingRef(row.Workload), leftoverOutcome(row)))
		}
	}
	if err != nil {
		notice(fmt.Sprintf("warning: moving again the workloads an earlier run left suspended: %v", err))
	}
}

// leftoverOutcome says in a few words how the move of a leftover ended.
func leftoverOutcome(row rebalance.Row) string {
	what := "not released"
	if row.TriggeredAt != nil {
		what = "released, trigger " + row.TriggeredAt.UTC().Format(time.RFC3339)
	}
	if row.Message != "" {
		what += ": " + row.Message
	}
	return what
}
