package run

import (
	"context"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// moved reports whether a plain run all at once hands each workload to the
// request's Mover instead of writing every trigger in one batch.
func (r Request) moved() bool {
	return r.Mover != nil && !r.waved() && r.DryRun == rebalance.DryRunNone
}

// allAtOnceEngine is the engine of a run all at once, plain or recorded,
// whose workloads move with mover: every workload in flight at once, up to
// Workers, in the order given.
func (e *Engine) allAtOnceEngine(req Request, mover waves.MakeBeforeBreak) *waves.Engine {
	workers := rebalance.WorkersOr(req.Workers)
	rank := make(map[rebalance.Workload]int, len(req.Targets))
	for i, t := range req.Targets {
		if _, ok := rank[t.Workload]; !ok {
			rank[t.Workload] = i
		}
	}
	return &waves.Engine{Handover: mover, Options: waves.Options{
		MaxInFlight: workers,
		Order:       func(a, b rebalance.Workload) int { return rank[a] - rank[b] },
	}}
}

// movedEngine is the engine of a plain run all at once whose workloads
// move with req.Mover. A batch above the fleet threshold reads and follows
// the bindings it leaves to one write with a list and a watch per
// namespace (waves.Engine.Handover), as a run all at once without the
// mover does.
func (e *Engine) movedEngine(req Request) *waves.Engine {
	engine := e.allAtOnceEngine(req, req.Mover)
	engine.Lister = waves.NewBindingLister(e.Karmada)
	return engine
}

// runMoved moves every distinct target with req.Mover, at most Workers at
// a time, and gathers the rows as a batch run would: a record run again
// moves with it the workloads an earlier run left suspended
// (findLeftovers). The mover reads the bindings itself, and shows them to
// the run's clusterAffinities notes (affinityNotes.observing).
func runMoved(ctx context.Context, req Request) (*rebalance.Result, error) {
	workloads := rebalance.DistinctWorkloads(req.Targets)
	targets := make(map[rebalance.Workload]rebalance.Target, len(workloads))
	for _, t := range req.Targets {
		if _, ok := targets[t.Workload]; !ok || t.UID != "" {
			targets[t.Workload] = t
		}
	}
	workers := rebalance.WorkersOr(req.Workers)
	rows := make([]rebalance.Row, len(workloads))
	var g errgroup.Group
	g.SetLimit(workers)
	for i, w := range workloads {
		if ctx.Err() != nil {
			// Interrupted: the workloads not started yet stay pending.
			rows[i] = rebalance.Row{Workload: w, Binding: rebalance.BindingNameFor(w)}
			continue
		}
		g.Go(func() error {
			row, err := req.Mover.Move(ctx, targets[w], func(rebalance.Row) {})
			rows[i] = row
			return err
		})
	}
	firstEr := g.Wait()
	rebalance.SortRows(rows)
	res := &rebalance.Result{Rows: rows}
	for _, row := range rows {
		if row.Result == appsv1alpha1.RebalanceSuccessful && row.TriggeredAt != nil {
			res.Written++
			if res.TriggerTime.IsZero() || row.TriggeredAt.Before(&res.TriggerTime) {
				res.TriggerTime = *row.TriggeredAt
			}
		}
	}
	res.Failed, res.Pending = rebalance.CountRows(rows)
	if res.Pending == 0 {
		now := metav1.Now()
		res.FinishTime = &now
	}
	return res, firstEr
}
