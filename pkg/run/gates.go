package run

import (
	"context"
	"fmt"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// stepGates places the approval gates of a recorded run's --steps on the
// wave engine for one pass over pending of the run's total workloads. The
// steps count over every workload of the run, so a resumed run (fewer
// pending) skips the gates behind it; a step approved on the record, by
// an approve the process that paused there did not live to see, is not
// asked again.
type stepGates struct {
	engine  *Engine
	name    string
	steps   []waves.Step
	total   int
	watched *recordWatch
	events  *runEvents
	notice  func(string)
}

// place sets engine's gates for a pass over pending workloads.
func (g *stepGates) place(engine *waves.Engine, pending int) {
	bounds := waves.Boundaries(g.steps, g.total)
	offset := g.total - pending
	var gates, stepOf, movedAt []int
	for i, b := range bounds {
		if b < offset {
			continue
		}
		gates = append(gates, b-offset)
		stepOf = append(stepOf, i+1)
		movedAt = append(movedAt, b)
	}
	engine.Gates = gates
	engine.Approve = func(ctx context.Context, gate int) error {
		next := g.total
		if gate+1 < len(movedAt) {
			next = movedAt[gate+1]
		}
		return g.approve(ctx, stepOf[gate], len(bounds)+1, movedAt[gate], next)
	}
}

// approve pauses the run after step (of steps; moved workloads done so
// far) until the record says it is approved.
func (g *stepGates) approve(ctx context.Context, step, steps, moved, next int) error {
	rb, err := g.watched.wait(ctx, func(*appsv1alpha1.WorkloadRebalancer) bool { return true })
	if err != nil {
		return err
	}
	if a, ok := record.Approved(rb, step); ok {
		g.notice(fmt.Sprintf("workloadrebalancer %s: %s; going on", g.name, a))
		return nil
	}
	if err := g.patch(ctx, func() ([]byte, error) { return record.PausePatch(step) }); err != nil {
		return fmt.Errorf("cannot mark workloadrebalancer %s paused after step %d: %w", g.name, step, g.engine.explain(err))
	}
	g.notice(fmt.Sprintf("paused after step %d of %d (%d of %d workloads): run `kubectl rebalance approve %s` to go on with step %d (up to %d workloads), `kubectl rebalance abort %s` to stop; `kubectl rebalance get %s -w` shows the workloads",
		step, steps, moved, g.total, g.name, step+1, next, g.name, g.name))
	g.events.note(ReasonPaused, fmt.Sprintf("Paused after step %d of %d (%d of %d workloads); waiting for `kubectl rebalance approve %s`", step, steps, moved, g.total, g.name))
	rb, err = g.watched.wait(ctx, func(rb *appsv1alpha1.WorkloadRebalancer) bool {
		_, ok := record.Approved(rb, step)
		return ok
	})
	if err != nil {
		return err
	}
	a, _ := record.Approved(rb, step)
	g.notice(fmt.Sprintf("workloadrebalancer %s: %s; going on with step %d (up to %d workloads)", g.name, a, step+1, next))
	g.events.note(ReasonApproved, fmt.Sprintf("Step %d approved by %s; going on with step %d of %d (up to %d workloads)", step, record.AbortMark{By: a.By, At: a.At}, step+1, steps, next))
	if _, paused := record.PausedAt(rb); paused {
		// approve removes the mark itself; this is for an approval
		// written by other means.
		if err := g.patch(ctx, record.ResumedPatch); err != nil {
			g.notice(fmt.Sprintf("warning: cannot clear the pause of workloadrebalancer %s: %v", g.name, g.engine.explain(err)))
		}
	}
	return nil
}

// patch writes the merge patch made writes on the record.
func (g *stepGates) patch(ctx context.Context, makePatch func() ([]byte, error)) error {
	data, err := makePatch()
	if err != nil {
		return err
	}
	writeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = g.engine.Karmada.AppsV1alpha1().WorkloadRebalancers().Patch(writeCtx, g.name, types.MergePatchType, data, metav1.PatchOptions{})
	if err != nil {
		return &rebalance.RequestError{Verb: "patch", Resource: record.RebalancerResource, Name: g.name, Err: err}
	}
	return nil
}
