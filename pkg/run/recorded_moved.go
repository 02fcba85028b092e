package run

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// recordMover is the mover of a recorded run's workloads (the
// make-before-break move), nil when they are triggered in one write: a
// server-side run leaves the triggers to Karmada's controller.
func (r Request) recordMover() waves.Mover {
	switch {
	case r.Record.ServerSide || r.DryRun != rebalance.DryRunNone:
		return nil
	case r.waved():
		return r.Waves.Mover
	}
	return r.Mover
}

// movedRecordEngine is the engine of a recorded run all at once whose
// workloads move with mover: every workload in flight at once, up to
// Workers, in the order given.
func (e *Engine) movedRecordEngine(req Request, mover waves.Mover) *waves.Engine {
	workers := req.Workers
	if workers <= 0 {
		workers = 16
	}
	rank := make(map[rebalance.Workload]int, len(req.Targets))
	for i, t := range req.Targets {
		if _, ok := rank[t.Workload]; !ok {
			rank[t.Workload] = i
		}
	}
	return &waves.Engine{Mover: mover, Options: waves.Options{
		MaxInFlight: workers,
		Order:       func(a, b rebalance.Workload) int { return rank[a] - rank[b] },
	}}
}

// holder is a mover that can suspend a binding's scheduling ahead of its
// move (handover.Mover).
type holder interface {
	Hold(ctx context.Context, t rebalance.Target) (bool, error)
	Unhold(ctx context.Context, t rebalance.Target) error
}

// heldTarget is the first workload of a growing record, whose binding is
// held before the record is created: Karmada's workloadRebalancer
// controller triggers what a new record lists at its creationTimestamp, and
// on a held binding that trigger moves nothing; the workload's move carries
// on from the hold and releases it with its own trigger.
type heldTarget struct {
	mover  holder
	target rebalance.Target
	held   bool
}

// holdFirst returns the hold of plan's first workload, nil when the run's
// mover cannot hold or the record does not grow.
func holdFirst(mover waves.Mover, plan *recordPlan, uids map[rebalance.Workload]types.UID) *heldTarget {
	h, ok := mover.(holder)
	if !ok || len(plan.grow) == 0 {
		return nil
	}
	w := plan.grow[0]
	return &heldTarget{mover: h, target: rebalance.Target{Workload: w, UID: uids[w]}}
}

// take holds the binding; nil (nothing held) is fine.
func (h *heldTarget) take(ctx context.Context) error {
	if h == nil {
		return nil
	}
	held, err := h.mover.Hold(ctx, h.target)
	h.held = held
	return err
}

// lift lifts the hold unless a move took it over, and tells notice when
// it could not: the next run's move of the workload carries on from it.
func (h *heldTarget) lift(ctx context.Context, notice func(string)) {
	if h == nil || !h.held {
		return
	}
	liftCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := h.mover.Unhold(liftCtx, h.target); err != nil {
		notice(fmt.Sprintf("warning: %s stays suspended ahead of its move (%v); running the same command again moves it", rebalance.BindingRef(h.target.Workload), err))
	}
}
