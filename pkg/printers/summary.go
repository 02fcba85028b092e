package printers

import (
	"fmt"
	"io"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Summary counts rows by CRD result and by scheduling outcome.
type Summary struct {
	// Workloads is the number of rows.
	Workloads int
	// Successful, Failed and Pending count CRD results; Pending includes any
	// result the controller would still retry.
	Successful, Failed, Pending int
	// Rescheduled, SchedulingFailed, Ignored, Waiting and DeadlineExceeded
	// count outcomes.
	Rescheduled, SchedulingFailed, Ignored, Waiting, DeadlineExceeded int
}

// Summarize counts rows.
func Summarize(rows []rebalance.Row) Summary {
	s := Summary{Workloads: len(rows)}
	for _, row := range rows {
		switch row.Result {
		case appsv1alpha1.RebalanceSuccessful:
			s.Successful++
		case appsv1alpha1.RebalanceFailed:
			s.Failed++
		default:
			s.Pending++
		}
		switch row.Observation.Outcome {
		case rebalance.OutcomeScheduled:
			s.Rescheduled++
		case rebalance.OutcomeSchedulingFailed:
			s.SchedulingFailed++
		case rebalance.OutcomeIgnored:
			s.Ignored++
		case rebalance.OutcomeWaiting:
			s.Waiting++
		case rebalance.OutcomeDeadlineExceeded:
			s.DeadlineExceeded++
		}
	}
	return s
}

// String renders the summary on one line, e.g.
// "3 workloads: 2 successful, 1 failed, 0 pending; 2 rescheduled, 0 ignored".
// Scheduling failures, waiting workloads and workloads past their progress
// deadline are added only when there are some.
func (s Summary) String() string {
	noun := "workloads"
	if s.Workloads == 1 {
		noun = "workload"
	}
	line := fmt.Sprintf("%d %s: %d successful, %d failed, %d pending; %d rescheduled, %d ignored",
		s.Workloads, noun, s.Successful, s.Failed, s.Pending, s.Rescheduled, s.Ignored)
	if s.SchedulingFailed > 0 {
		line += fmt.Sprintf(", %d scheduling failed", s.SchedulingFailed)
	}
	if s.Waiting > 0 {
		line += fmt.Sprintf(", %d waiting", s.Waiting)
	}
	if s.DeadlineExceeded > 0 {
		line += fmt.Sprintf(", %d past the progress deadline", s.DeadlineExceeded)
	}
	return line
}

// PrintSummary writes the one-line summary of rows, ending in a newline.
func PrintSummary(w io.Writer, rows []rebalance.Row) error {
	if _, err := fmt.Fprintln(w, Summarize(rows).String()); err != nil {
		return fmt.Errorf("printing the rebalance summary failed: %w", err)
	}
	return nil
}
