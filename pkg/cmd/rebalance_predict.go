package cmd

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
)

// predictionOptions are the flags of kubectl rebalance that need a prediction
// before the run: --clusters, --changed-only and the report outputs.
type predictionOptions struct {
	Selection predict.Selection
	// predictions, by workload, are those made before the run; nil when
	// nothing asked for them.
	predictions map[rebalance.Workload]predict.Prediction
}

// isReport reports whether -o asks for the machine-readable report.
func isReport(format string) bool {
	return format == rbprinters.OutputReportJSON || format == rbprinters.OutputReportYAML
}

// needsPrediction reports whether the run has to predict first. A plain run
// does not: it costs no request more than the triggers need.
func (o *RebalanceOptions) needsPrediction() bool {
	return !o.Selection.IsZero() || isReport(o.OutputFormat)
}

// selectTargets predicts the targets and, with a selection (--clusters,
// --changed-only), keeps only the selected ones; it says on stderr how many
// were selected. It returns the predictions of all, by workload.
func (o *targetOptions) selectTargets(ctx context.Context, resolved *rebalance.Resolved, sel predict.Selection) (map[rebalance.Workload]predict.Prediction, error) {
	if len(resolved.Rebalancers) > 0 && !sel.IsZero() {
		return nil, withExitCode(ExitError, fmt.Errorf("--clusters and --changed-only cannot narrow a WorkloadRebalancer manifest (%s): its spec.workloads are rebalanced as written; "+
			"run 'kubectl rebalance plan -f FILE --clusters ... -o yaml' to write a narrowed manifest", resolved.Rebalancers[0].Name))
	}
	predictions, _, err := o.predict(ctx, resolved.Targets, sel, predict.EstimatorMode(o.Estimator), predict.Options{})
	if err != nil {
		return nil, err
	}
	byWorkload := make(map[rebalance.Workload]predict.Prediction, len(predictions))
	for _, p := range predictions {
		byWorkload[p.Workload] = p
	}
	for i, t := range resolved.Targets {
		// The run reports this read as the placement before the move when
		// Karmada's controller triggers and the scheduler answers first.
		if p, ok := byWorkload[t.Workload]; ok && p.Division != "" {
			resolved.Targets[i].Before = p.Before
		}
	}
	if sel.IsZero() {
		return byWorkload, nil
	}
	warnUnestimated(o.ErrOut, predictions)
	selected := predict.Select(predictions, sel)
	keep := make(map[rebalance.Workload]bool, len(selected))
	for _, p := range selected {
		keep[p.Workload] = true
	}
	targets := resolved.Targets[:0:0]
	for _, t := range resolved.Targets {
		if keep[t.Workload] {
			targets = append(targets, t)
		}
	}
	resolved.Targets = targets
	fmt.Fprintf(o.ErrOut, "%d of %d workload(s) selected by %s\n", len(selected), len(predictions), selectionText(sel))
	return byWorkload, nil
}

// selectionText names the selection flags given.
func selectionText(sel predict.Selection) string {
	var by []string
	if len(sel.Clusters) > 0 {
		by = append(by, "--clusters "+strings.Join(sel.Clusters, ","))
	}
	if sel.ChangedOnly {
		by = append(by, "--changed-only")
	}
	return strings.Join(by, " ")
}

// warnUnchangeable warns about workloads whose placement a fresh reschedule
// cannot change, which the scheduler reports as Scheduled all the same.
func warnUnchangeable(w io.Writer, rows []rebalance.Row) {
	var names []string
	for _, row := range rows {
		if row.Unchangeable != "" && row.Observation.Outcome != rebalance.OutcomeIgnored {
			names = append(names, fmt.Sprintf("%s (%s)", rbprinters.WorkloadName(row.Workload), row.Unchangeable))
		}
	}
	if len(names) == 0 {
		return
	}
	const most = 5
	more := ""
	if len(names) > most {
		more = fmt.Sprintf(" and %d more", len(names)-most)
		names = names[:most]
	}
	fmt.Fprintf(w, "Warning: a fresh reschedule cannot change the placement of %s%s: it does not follow free capacity, so the trigger only repeats an ordinary scheduling pass; 'kubectl rebalance plan' shows which workloads would move\n",
		strings.Join(names, ", "), more)
}

// printReport writes the report of a finished (or dry) run.
func (o *RebalanceOptions) printReport(result *run.Result) error {
	report := rbprinters.RebalanceReport(result.Rows, o.predictions, o.Selection, o.DryRun != rebalance.DryRunNone, string(o.DryRun))
	return rbprinters.PrintReport(o.Out, report, o.OutputFormat)
}

// warnUnestimated says, once per distinct reason, that workloads were left
// out of a selection because a member's karmada-scheduler-estimator could
// not be answered for: the message names the member and what fixes it.
func warnUnestimated(w io.Writer, predictions []predict.Prediction) {
	counts := map[string]int{}
	var order []string
	for _, p := range predictions {
		if p.Verdict != predict.CannotPredict || p.Reason != predict.ReasonSchedulerEstimator {
			continue
		}
		if counts[p.Message] == 0 {
			order = append(order, p.Message)
		}
		counts[p.Message]++
	}
	for _, m := range order {
		fmt.Fprintf(w, "warning: %d workload(s) not selected: %s\n", counts[m], m)
	}
}
