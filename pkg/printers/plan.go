package printers

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
)

// planColumns are the columns of `kubectl rebalance plan`; Priority 1 marks
// the wide-only ones.
var planColumns = []metav1.TableColumnDefinition{
	{Name: "Workload", Type: "string", Description: "The resource template, as kind.group/name."},
	{Name: "Verdict", Type: "string", Description: "WouldMove, Unchanged, CannotFit, CannotPredict or CannotChange."},
	{Name: "Before", Type: "string", Description: "The binding's clusters now."},
	{Name: "Predicted", Type: "string", Description: "The clusters a fresh reschedule would give it."},
	{Name: "Moves", Type: "integer", Description: "Replicas that would start on another cluster."},
	{Name: "Division", Type: "string", Priority: 1, Description: "How the placement divides replicas."},
	{Name: "Reason", Type: "string", Priority: 1, Description: "Why the verdict is what it is."},
	{Name: "Message", Type: "string", Priority: 1, Description: "Details for a human."},
}

// PlanPrintOptions selects how PrintPlan lays out the table.
type PlanPrintOptions struct {
	Wide, NoHeaders, WithNamespace bool
}

// PrintPlan writes one row per prediction as a kubectl-style table.
func PrintPlan(w io.Writer, predictions []predict.Prediction, opts PlanPrintOptions) error {
	withNamespace := opts.WithNamespace || SpansNamespaces(predictions, func(p predict.Prediction) string { return p.Workload.Namespace })
	table := NewTable(planColumns, WorkloadNamespaceColumn, withNamespace)
	for _, p := range predictions {
		predicted := placementText(p.Predicted)
		if p.Alternative != nil {
			predicted += " or " + placementText(p.Alternative)
		}
		if p.Verdict != predict.CannotPredict {
			// A prediction that holds unless the members report the batch's
			// other moves first: the likely placement, then the others.
			for _, other := range p.Possible[min(1, len(p.Possible)):] {
				predicted += " or " + placementText(other)
			}
		}
		table.AddRow(p.Workload.Namespace,
			WorkloadName(p.Workload),
			string(p.Verdict),
			placementText(p.Before),
			predicted,
			int64(p.Moves),
			orNone(string(p.Division)),
			orNone(p.Reason),
			orNone(p.Message),
		)
	}
	if err := table.Print(w, opts.Wide, opts.NoHeaders); err != nil {
		return fmt.Errorf("printing the plan failed: %w", err)
	}
	return nil
}

// ClusterLines renders the per-cluster summary, one line per cluster:
// "member1: 0 -> 200 (+200)".
func ClusterLines(changes []predict.ClusterChange) []string {
	out := make([]string, 0, len(changes))
	for _, c := range changes {
		delta := strconv.FormatInt(int64(c.Delta()), 10)
		if c.Delta() >= 0 {
			delta = "+" + delta
		}
		out = append(out, fmt.Sprintf("%s: %d -> %d (%s)", c.Name, c.Before, c.Predicted, delta))
	}
	return out
}

// CountsLine renders the verdict counts on one line, with the reasons of
// each: "3 workloads: 1 would move, 1 unchanged, 0 cannot fit, 1 cannot
// predict (SchedulerEstimator: 1), 0 cannot change".
func CountsLine(predictions []predict.Prediction) string {
	noun := "workloads"
	if len(predictions) == 1 {
		noun = "workload"
	}
	parts := make([]string, 0, len(predict.Verdicts))
	for _, c := range predict.Counts(predictions) {
		part := fmt.Sprintf("%d %s", c.Total, verdictWords(c.Verdict))
		if c.Verdict != predict.WouldMove && c.Verdict != predict.Unchanged && len(c.ByReason) > 0 {
			reasons := make([]string, 0, len(c.ByReason))
			for r, n := range c.ByReason {
				reasons = append(reasons, fmt.Sprintf("%s: %d", r, n))
			}
			slices.Sort(reasons)
			part += " (" + strings.Join(reasons, ", ") + ")"
		}
		parts = append(parts, part)
	}
	return fmt.Sprintf("%d %s: %s", len(predictions), noun, strings.Join(parts, ", "))
}

// verdictWords spells a verdict for the summary line.
func verdictWords(v predict.Verdict) string {
	switch v {
	case predict.WouldMove:
		return "would move"
	case predict.Unchanged:
		return "unchanged"
	case predict.CannotFit:
		return "cannot fit"
	case predict.CannotPredict:
		return "cannot predict"
	case predict.CannotChange:
		return "cannot change"
	}
	return string(v)
}
