package run

import (
	"context"
	"fmt"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// runPlain runs a rebalance that is not recorded: all at once, or in waves.
func (e *Engine) runPlain(ctx context.Context, req Request) (*Result, error) {
	api := rebalance.NewBindingAPI(e.Karmada)
	if !req.waved() {
		// A large batch all at once reads its bindings with a list per
		// namespace; waves have their own (see waves.Engine.Lister).
		api = waves.ListedReads(api, waves.NewBindingLister(e.Karmada), req.Targets, 0)
	}
	notes := newAffinityNotes(api)
	runner := e.runner(req, notes)
	// The make-before-break mover reads its bindings itself: it shows them
	// to the notes too.
	req.Mover = notes.observing(req.Mover)
	if req.Waves != nil {
		waved := *req.Waves
		waved.Mover = notes.observing(waved.Mover)
		req.Waves = &waved
	}

	runCtx, cancel := e.withDeadline(ctx, req.Deadline)
	defer cancel()
	var (
		res    *rebalance.Result
		waved  *waves.Result
		runErr error
	)
	switch {
	case req.moved():
		res, runErr = e.movedEngine(req).Execute(runCtx, runner, req.Targets)
		if res != nil {
			// Started in the order given; reported, like any run all at
			// once, in the WorkloadRebalancer's order.
			rebalance.SortRows(res.Rows)
		}
	case req.waved():
		engine := e.waveEngine(req)
		res, runErr = engine.Execute(runCtx, runner, req.Targets)
		waved = engine.Last
	default:
		res, runErr = runner.Run(runCtx, req.Targets)
	}
	interrupted := ctx.Err() != nil
	if interrupted {
		runErr = nil // the interruption, not an error of the API: the rows say what was done
	}
	if runErr != nil && res.Written == 0 {
		// Nothing was written: the error says it all.
		return nil, e.explain(runErr)
	}

	result := &Result{
		Rows:        res.Rows,
		TriggerTime: res.TriggerTime,
		FinishTime:  res.FinishTime,
		Written:     res.Written,
		Failed:      res.Failed,
		Pending:     res.Pending,
		Waves:       waved,
		Interrupted: interrupted,
	}
	if req.Hooks.Rows != nil {
		if err := req.Hooks.Rows(result); err != nil {
			return result, err
		}
	}
	notes.report(req.Hooks.notice, e.Release)
	if runErr != nil {
		return result, fmt.Errorf("%w; the table shows the %d binding(s) already triggered", e.explain(runErr), res.Written)
	}
	if line := WaveStop(waved, ""); line != "" {
		req.Hooks.notice(line)
	}
	return result, nil
}

// WaveStop says plainly why a waved run left workloads unstarted, and what
// to do next; "" when it did not. recorded names the run's record, if any.
func WaveStop(res *waves.Result, recorded string) string {
	if res == nil || res.Stop == waves.StopNone {
		return ""
	}
	next := "run the same command again to rebalance them (workloads already triggered are rebalanced again: give --name to record the run and continue where it stopped)"
	if recorded != "" {
		next = fmt.Sprintf("run the same command again to continue with them; workloadrebalancer %s records which workloads were triggered, and none is triggered twice", recorded)
	}
	if res.Stop == waves.StopAborted && recorded != "" {
		next = fmt.Sprintf("`kubectl rebalance resume %s` continues with them; workloadrebalancer %s records which workloads were triggered, and none is triggered twice", recorded, recorded)
	}
	if res.Stop == waves.StopLedgerGone {
		next = "the triggers already written stay; the run's record is gone, so running the same command again starts every workload again under a new one"
	}
	inFlight := "none was in flight then"
	if res.InFlightAtStop > 0 {
		inFlight = fmt.Sprintf("%d workload(s) were in flight then (see the table)", res.InFlightAtStop)
	}
	return fmt.Sprintf("stopped: %s; %s, %d not started (pending): %s", res.StopMessage, inFlight, res.NotStarted, next)
}
