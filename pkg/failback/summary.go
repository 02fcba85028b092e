package failback

import (
	"fmt"
	"log/slog"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// summary is what a finished failback says: the counts of its rows, its
// result, and the log line, metrics and events that tell it. summarize
// computes it without writing anything; Controller.write writes it.
type summary struct {
	req    Request
	result string
	// earlier counts the workloads a resumed failback found triggered by
	// the run it resumes (before a restart or a lost Lease): not this run's
	// doing, and not seen to be done.
	done, failed, pending, earlier int
	isDryRun                       bool
	// dryRun lists what a dry run would rebalance, one log line each.
	dryRun []dryRunLine
	// bindings are the events on the bindings of the workloads.
	bindings []bindingEvent
	// level, logMessage and attrs make the log line.
	level      slog.Level
	logMessage string
	attrs      []any
	// event is the one on the Cluster; nil for a dry run.
	event *clusterEvent
}

type dryRunLine struct{ workload, binding string }

type bindingEvent struct {
	ref                        *corev1.ObjectReference
	eventType, reason, message string
}

type clusterEvent struct{ eventType, reason, message string }

// summarize sums up the failback of req from its report, its error and why
// it was cut short (aborted, empty when it was not).
func summarize(req Request, report *Report, err error, aborted string) summary {
	s := summary{req: req, isDryRun: report.DryRun}
	s.countRows(report)
	if !req.Resume && aborted != "" {
		// A failback cut short before it resumed anything: a workload
		// triggered without this run's time is its record's first, which
		// Karmada's controller triggered at the record's creation
		// (docs/waves.md), still in flight when the run stopped.
		s.pending, s.earlier = s.pending+s.earlier, 0
	}
	s.result = failbackResult(report, err, aborted, s.failed, s.pending)
	s.attrs = []any{"result", s.result, "workloads", len(report.Rows), "done", s.done, "failed", s.failed, "pending", s.pending}
	before := ""
	if s.earlier > 0 {
		s.attrs = append(s.attrs, "triggeredBefore", s.earlier)
		before = fmt.Sprintf(" (%d more triggered before this failback was resumed)", s.earlier)
	}
	if report.Moves != "" {
		s.attrs = append(s.attrs, "moves", report.Moves)
	}
	if report.Stopped != "" {
		s.attrs = append(s.attrs, "stopped", report.Stopped)
	}
	if aborted != "" {
		s.attrs = append(s.attrs, "aborted", aborted)
	}
	var message string
	switch s.result {
	case ResultError:
		s.level, s.logMessage = slog.LevelError, "failback failed"
		s.attrs = append(s.attrs, "err", err)
		message = fmt.Sprintf("Failback to cluster %s stopped on an error: %v", req.Cluster, err)
	case ResultStopped:
		s.level, s.logMessage = slog.LevelWarn, "failback stopped"
		why := aborted
		if why == "" {
			why = reasonOr(report.Stopped, "interrupted")
		}
		message = fmt.Sprintf("Failback to cluster %s stopped: %s; %d workload(s) done, %d failed, %d pending%s in workloadrebalancer %s", req.Cluster, why, s.done, s.failed, s.pending, before, req.Name)
	case ResultFailed:
		s.level, s.logMessage = slog.LevelWarn, "failback finished with failures"
		message = fmt.Sprintf("Failback to cluster %s finished: %d workload(s) done, %d failed%s", req.Cluster, s.done, s.failed, before)
		if report.Stopped != "" {
			message += "; " + report.Stopped
		}
		message += "; see workloadrebalancer " + req.Name
	case ResultDryRun:
		s.level, s.logMessage = slog.LevelInfo, "dry run over"
		return s
	case ResultNothing:
		s.level, s.logMessage = slog.LevelInfo, "failback finished"
		what := "no workload displaced by its failure"
		if req.All {
			what = "no workload"
		}
		message = fmt.Sprintf("Failback to cluster %s: %s would gain replicas there from a fresh reschedule; nothing moved", req.Cluster, what)
	default:
		s.level, s.logMessage = slog.LevelInfo, "failback finished"
		message = fmt.Sprintf("Failback to cluster %s finished: %d workload(s) rebalanced%s, recorded as workloadrebalancer %s", req.Cluster, s.done, before, req.Name)
	}
	s.event = &clusterEvent{eventType: corev1.EventTypeNormal, reason: ReasonFinished, message: message}
	switch s.result {
	case ResultSucceeded, ResultNothing:
	case ResultFailed:
		s.event.eventType = corev1.EventTypeWarning
	default:
		s.event.eventType, s.event.reason = corev1.EventTypeWarning, ReasonStopped
	}
	return s
}

// countRows counts the report's rows and lists, per row, the dry run's log
// line or the event on its binding.
func (s *summary) countRows(report *Report) {
	for _, row := range report.Rows {
		f, p := rebalance.CountRows([]rebalance.Row{row})
		switch {
		case f > 0:
			s.failed++
		case p > 0:
			s.pending++
		case row.Result == appsv1alpha1.RebalanceSuccessful && row.TriggeredAt == nil:
			// A trigger this run wrote, or found, always has its time.
			s.earlier++
		case row.Result != "":
			s.done++
		}
		if report.DryRun {
			s.dryRun = append(s.dryRun, dryRunLine{workload: workloadText(row.Workload), binding: row.Binding})
			continue
		}
		switch {
		case f > 0:
			s.bindings = append(s.bindings, bindingEvent{bindingReference(row), corev1.EventTypeWarning, ReasonFailed, fmt.Sprintf(
				"Failback to recovered cluster %s (workloadrebalancer %s) failed for this workload: %s", s.req.Cluster, s.req.Name, rowProblem(row))})
		case row.TriggeredAt != nil:
			s.bindings = append(s.bindings, bindingEvent{bindingReference(row), corev1.EventTypeNormal, ReasonTriggered, fmt.Sprintf(
				"Rescheduled afresh by kubectl-rebalance failback because cluster %s recovered (workloadrebalancer %s); placement %s -> %s",
				s.req.Cluster, s.req.Name, rebalance.FormatPlacement(row.Before), rebalance.FormatPlacement(row.After))})
		}
	}
}

// failbackResult is the result a failback is counted under.
func failbackResult(report *Report, err error, aborted string, failed, pending int) string {
	switch {
	case err != nil && aborted != "":
		return ResultStopped
	case err != nil:
		return ResultError
	case report.DryRun:
		return ResultDryRun
	case report.BudgetSpent, failed > 0 && pending == 0 && aborted == "":
		return ResultFailed
	case aborted != "" || pending > 0:
		return ResultStopped
	case len(report.Rows) == 0:
		return ResultNothing
	}
	return ResultSucceeded
}
