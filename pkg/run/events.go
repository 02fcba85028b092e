package run

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	eventrecord "k8s.io/client-go/tools/record"

	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// Reasons of the events a recorded run writes on its WorkloadRebalancer, so
// that `kubectl describe workloadrebalancer NAME` tells its history.
const (
	// ReasonStarted: the run created or continued the record.
	ReasonStarted = "RebalanceStarted"
	// ReasonRescheduled: a workload was rescheduled (and, when the run
	// waits for it, its replicas were ready).
	ReasonRescheduled = "WorkloadRescheduled"
	// ReasonTriggered: a workload's trigger was written, but the run did
	// not see the scheduler's answer (--wait=false, or the run ended first).
	ReasonTriggered = "WorkloadTriggered"
	// ReasonFailed: a workload failed; the message says why.
	ReasonFailed = "WorkloadFailed"
	// ReasonInterrupted: the run stopped before every workload was done
	// (Ctrl-C, SIGTERM, --timeout, the failure budget, an error).
	ReasonInterrupted = "RebalanceInterrupted"
	// ReasonFinished: every workload of the record has its result.
	ReasonFinished = "RebalanceFinished"
	// ReasonPaused: the run waits at an approval gate (--steps).
	ReasonPaused = "RebalancePaused"
	// ReasonApproved: a step was approved and the run goes on.
	ReasonApproved = "RebalanceApproved"
)

// runEvents writes the events of one recorded run on its record. A nil
// *runEvents writes nothing.
type runEvents struct {
	recorder eventrecord.EventRecorder
	mu       sync.Mutex
	record   *appsv1alpha1.WorkloadRebalancer
	// told holds the workloads whose event this pass wrote already (as
	// their move ended, in waves); the pass's end writes the others.
	told map[rebalance.Workload]bool
}

// newRunEvents returns the events of a run; nil without a recorder.
func newRunEvents(recorder eventrecord.EventRecorder) *runEvents {
	if recorder == nil {
		return nil
	}
	return &runEvents{recorder: recorder, told: map[rebalance.Workload]bool{}}
}

// started says that the run created (or continued) the record obj.
func (ev *runEvents) started(obj *appsv1alpha1.WorkloadRebalancer, req Request, created bool, engine *waves.Engine) {
	if ev == nil || obj == nil {
		return
	}
	ev.mu.Lock()
	ev.record = obj
	ev.mu.Unlock()
	n := len(rebalance.DistinctWorkloads(req.Targets))
	how := "all at once"
	switch {
	case req.Record.ServerSide:
		how = "server-side: Karmada's workloadRebalancer controller writes the triggers"
	case req.waved() && engine != nil:
		how = fmt.Sprintf("in waves of at most %d in flight", engine.MaxInFlight)
		if engine.MaxFailures > 0 {
			how += fmt.Sprintf(", stopping after %d failure(s)", engine.MaxFailures)
		}
	}
	what := fmt.Sprintf("Rebalancing %s, %s", plural(n, "workload"), how)
	if !created {
		what = fmt.Sprintf("Continuing the record: its pending workloads of %s, %s; none is triggered twice", plural(n, "workload"), how)
	}
	ev.recorder.Event(obj, corev1.EventTypeNormal, ReasonStarted, what)
}

// note writes an event of the run itself (paused, approved).
func (ev *runEvents) note(reason, message string) {
	if ev == nil {
		return
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.record == nil {
		return
	}
	ev.recorder.Event(ev.record, corev1.EventTypeNormal, reason, message)
}

// workload writes the event of a workload whose move ended (the waves'
// Finished hook).
func (ev *runEvents) workload(row rebalance.Row) {
	if ev == nil {
		return
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.writeLocked(row)
}

// pass writes the events of the rows a pass ran that were not told yet
// (a run all at once learns them only at its end), and starts the next
// pass afresh.
func (ev *runEvents) pass(rows []rebalance.Row, ran func(rebalance.Workload) bool) {
	if ev == nil {
		return
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, row := range rows {
		if ran(row.Workload) && !ev.told[row.Workload] {
			ev.writeLocked(row)
		}
	}
	clear(ev.told)
}

func (ev *runEvents) writeLocked(row rebalance.Row) {
	if ev.record == nil {
		return
	}
	eventType, reason, message, ok := workloadEvent(row)
	if !ok {
		return
	}
	ev.told[row.Workload] = true
	ev.recorder.Event(ev.record, eventType, reason, message)
}

// ended says how the run ended: stopped is why it stopped before every
// workload was done ("" when it did not), rows are the record's.
func (ev *runEvents) ended(obj *appsv1alpha1.WorkloadRebalancer, rows []rebalance.Row, stopped string) {
	if ev == nil || obj == nil {
		return
	}
	summary := rbprinters.Summarize(rows).String()
	failed, pending := rebalance.CountRows(rows)
	if stopped != "" {
		next := ""
		if pending > 0 {
			next = fmt.Sprintf("; run `kubectl rebalance workloadrebalancer/%s` to finish (nothing is triggered twice)", obj.Name)
		}
		ev.recorder.Event(obj, corev1.EventTypeWarning, ReasonInterrupted, fmt.Sprintf("Stopped early: %s. %s%s", stopped, summary, next))
		return
	}
	eventType := corev1.EventTypeNormal
	if failed > 0 || pending > 0 {
		eventType = corev1.EventTypeWarning
	}
	ev.recorder.Event(obj, eventType, ReasonFinished, "Finished: "+summary)
}

// workloadEvent is the event of a workload's row: rescheduled, failed, or
// triggered without an answer seen; none for a workload not triggered.
func workloadEvent(row rebalance.Row) (eventType, reason, message string, ok bool) {
	name := workloadText(row.Workload)
	if failed, _ := rebalance.CountRows([]rebalance.Row{row}); failed > 0 {
		return corev1.EventTypeWarning, ReasonFailed, fmt.Sprintf("%s failed: %s", name, rowProblem(row)), true
	}
	if row.Result != appsv1alpha1.RebalanceSuccessful {
		return "", "", "", false
	}
	switch row.Observation.Outcome {
	case rebalance.OutcomeScheduled:
		msg := fmt.Sprintf("%s rescheduled: %s -> %s", name, rebalance.FormatPlacement(row.Before), rebalance.FormatPlacement(row.After))
		if len(row.Staged) > 0 {
			msg += fmt.Sprintf(", made before break (staged %s first)", rebalance.FormatPlacement(row.Staged))
		} else if row.OneWrite != "" {
			msg += ", in one write (" + row.OneWrite + ")"
		}
		if row.Readiness != nil && row.Readiness.Ready {
			msg += "; replicas ready"
		}
		return corev1.EventTypeNormal, ReasonRescheduled, msg, true
	case rebalance.OutcomeWaiting:
		return corev1.EventTypeNormal, ReasonTriggered, fmt.Sprintf("%s: trigger written; not done when the run ended: %s", name, orText(row.Observation.Message, row.Observation.Reason)), true
	}
	return corev1.EventTypeNormal, ReasonTriggered, fmt.Sprintf("%s: trigger written; the run did not wait for the scheduler's answer", name), true
}

// workloadText names a workload in an event: kind, namespace/name.
func workloadText(w rebalance.Workload) string {
	if w.Namespace == "" {
		return w.Kind + " " + w.Name
	}
	return w.Kind + " " + w.Namespace + "/" + w.Name
}

// rowProblem says why a row failed, from its most telling fields.
func rowProblem(row rebalance.Row) string {
	var parts []string
	for _, s := range []string{string(row.Reason), row.ClientReason, string(row.Observation.Outcome), row.Observation.Reason, row.Observation.Message, row.Message} {
		if s != "" && !slices.Contains(parts, s) {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "failed"
	}
	return strings.Join(parts, ": ")
}

func orText(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
