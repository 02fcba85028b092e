package watch

import (
	"fmt"
	"slices"
	"strings"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
)

// State is where one workload of a recorded run stands.
type State string

const (
	// StateWaiting: not started yet (listed without a result and its
	// binding not held, or planned and not listed yet).
	StateWaiting State = "waiting"
	// StateHeld: scheduling suspended ahead of its move (ledger phase Held).
	StateHeld State = "held"
	// StateStaging: the replicas the move adds are starting (Staging).
	StateStaging State = "staging"
	// StateSettling: the new placement is written and the clusters losing
	// replicas scale down (Settling).
	StateSettling State = "settling"
	// StateReleased: the record holds it Successful (its trigger written)
	// and karmada-scheduler has not answered yet.
	StateReleased State = "released"
	// StateDone: karmada-scheduler rescheduled it after its trigger.
	StateDone State = "done"
	// StateFailed: recorded Failed, or the scheduler failed it.
	StateFailed State = "failed"
	// StateIgnored: the scheduler does not act on its trigger (scheduling
	// suspended by someone else, another scheduler, never scheduled).
	StateIgnored State = "ignored"
)

// States lists the states in the order a workload goes through them, the
// order totals are printed in.
var States = []State{StateWaiting, StateHeld, StateStaging, StateSettling, StateReleased, StateDone, StateFailed, StateIgnored}

// moving reports the states of a workload whose move is under way.
func (s State) moving() bool {
	return s == StateHeld || s == StateStaging || s == StateSettling || s == StateReleased
}

// Entry is what a record says of one workload.
type Entry struct {
	Workload rebalance.Workload
	// Listed is set when spec.workloads or the status lists it; a workload
	// only planned (a waved run's, not started yet) is not.
	Listed bool
	Result appsv1alpha1.RebalanceResult
	Reason appsv1alpha1.RebalanceFailedReason
	// Since is the record's creationTimestamp: a trigger at or after it
	// was written for this run (by the run, or by Karmada's controller at
	// that very time), even before the record lists its result.
	Since metav1.Time
}

// Row is one workload as the view shows it.
type Row struct {
	Workload rebalance.Workload
	State    State
	// Before is the placement before the move, After the one it heads for
	// (the prediction while it moves) or got; nil when not known.
	Before, After []workv1alpha2.TargetCluster
	// Ready is ready/wanted replicas on the clusters a staging move adds
	// replicas to, e.g. "member2 1/3".
	Ready string
	// Reason says why the workload is in its state.
	Reason string
	// Listed is the entry's: false for a workload only planned.
	Listed bool
}

// Classify tells the state of one workload from its record entry and its
// binding (nil when it has none, or none was seen). before is the
// placement seen before its move, when the caller remembers one (a ledger
// is dropped when the move ends, and with it the original placement).
//
// The ledger comes first: Karmada's workloadRebalancer controller records
// a held binding Successful at once (its trigger moves nothing while the
// binding is suspended), so only the ledger tells that the move is still
// under way.
func Classify(e Entry, b *workv1alpha2.ResourceBinding, before []workv1alpha2.TargetCluster) Row {
	row := Row{Workload: e.Workload, Before: before, Listed: e.Listed}
	if b != nil {
		l, err := handover.ReadLedger(b)
		switch {
		case err != nil:
			row.State, row.Reason = StateHeld, err.Error()
			return row
		case l != nil:
			return classifyMove(row, b, l)
		}
	}
	if e.Result == "" && b != nil && b.Spec.RescheduleTriggeredAt != nil && !e.Since.IsZero() && !b.Spec.RescheduleTriggeredAt.Before(&e.Since) {
		// A waved run lists a workload once its trigger is written, and
		// writes the status about once a second: the binding tells first.
		e.Result, e.Listed = appsv1alpha1.RebalanceSuccessful, true
	}
	switch {
	case e.Result == appsv1alpha1.RebalanceFailed:
		row.State, row.Reason = StateFailed, string(e.Reason)
		if row.Reason == "" {
			row.Reason = "recorded Failed"
		}
		return row
	case !e.Listed:
		row.State, row.Reason = StateWaiting, "not started yet"
		return row
	case e.Result != appsv1alpha1.RebalanceSuccessful:
		row.State, row.Reason = StateWaiting, "listed, no result yet"
		if b == nil {
			row.Reason += "; its binding is not there (yet)"
		}
		return row
	case b == nil:
		row.State, row.Reason = StateDone, "recorded Successful; its binding is gone"
		return row
	}
	row.After = b.Spec.Clusters
	trigger := b.Spec.RescheduleTriggeredAt
	if trigger == nil {
		// Karmada's controller records a held binding Successful; an undone
		// hold takes its trigger back. The run's own move releases it later.
		row.State, row.Reason = StateWaiting, "recorded Successful; no trigger written yet"
		return row
	}
	// Written as 0: a later write to the binding by anyone (the scheduler's
	// own, a controller's) must not make an answered trigger look pending.
	obs := rebalance.ClassifyOutcome(b.Generation, b.Spec, b.Status, 0, *trigger)
	switch obs.Outcome {
	case rebalance.OutcomeScheduled:
		row.State = StateDone
		ready := rebalance.CheckReady(b.Spec, b.Status)
		row.Reason = "rescheduled"
		if ready.Detail != "" {
			if ready.Ready {
				row.Reason += "; ready: " + ready.Detail
			} else {
				row.Reason += "; not ready yet: " + ready.Detail
			}
		}
	case rebalance.OutcomeSchedulingFailed:
		row.State, row.Reason = StateFailed, joinReason(obs.Reason, obs.Message)
	case rebalance.OutcomeIgnored:
		row.State, row.Reason = StateIgnored, joinReason(obs.Reason, obs.Message)
	default:
		row.State = StateReleased
		row.Reason = "released at " + rebalance.FormatTime(trigger.Time) + "; waiting for karmada-scheduler"
	}
	return row
}

// classifyMove is a workload whose binding carries a move's ledger.
func classifyMove(row Row, b *workv1alpha2.ResourceBinding, l *handover.Ledger) Row {
	row.Before, row.After = l.Original, l.Target
	owner := ""
	if l.Owner != "" {
		owner = " by " + l.Owner
	}
	switch l.CurrentPhase() {
	case handover.PhaseHeld:
		row.State = StateHeld
		row.Reason = "scheduling suspended ahead of its move" + owner
	case handover.PhaseSettling:
		row.State = StateSettling
		row.After = b.Spec.Clusters
		row.Reason = "the new replicas took over; the clusters losing replicas scale down" + owner
	default:
		row.State = StateStaging
		staged := l.Staged
		if staged == nil {
			staged = b.Spec.Clusters
		}
		row.Ready = gainingReady(l.Original, staged, rebalance.ReadyReplicas(b.Spec, b.Status))
		row.Reason = "starting the replicas it adds" + owner
		if row.Ready != "" {
			row.Reason += ": " + row.Ready + " ready"
		}
	}
	if l.Deadline != nil {
		row.Reason += ", deadline " + rebalance.FormatTime(l.Deadline.Time)
	}
	return row
}

// gainingReady is ready/wanted on each cluster staged holds more replicas
// on than original: "member2 1/3, member3 0/2". A cluster whose member
// status reports no count reads "?".
func gainingReady(original, staged []workv1alpha2.TargetCluster, ready map[string]int32) string {
	had := map[string]int32{}
	for _, c := range original {
		had[c.Name] += c.Replicas
	}
	var parts []string
	for _, c := range staged {
		if c.Replicas <= had[c.Name] {
			continue
		}
		n, ok := ready[c.Name]
		count := "?"
		if ok {
			count = fmt.Sprint(n)
		}
		parts = append(parts, fmt.Sprintf("%s %s/%d", c.Name, count, c.Replicas))
	}
	return strings.Join(parts, ", ")
}

func joinReason(reason, message string) string {
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}

// Entries lists the workloads of a record: its status entries (with the
// spec not reconciled yet brought in, as the next pass will see it), then
// those only planned (a waved run's, not started yet), in the plan's order.
func Entries(rb *appsv1alpha1.WorkloadRebalancer) []Entry {
	status := rb.Status
	if status.ObservedGeneration < rb.Generation {
		status = record.SyncStatus(rb.Status, rb.Spec, rb.Generation)
	}
	seen := map[rebalance.Workload]bool{}
	var out []Entry
	for _, o := range status.ObservedWorkloads {
		if seen[o.Workload] {
			continue
		}
		seen[o.Workload] = true
		out = append(out, Entry{Workload: o.Workload, Listed: true, Result: o.Result, Reason: o.Reason, Since: rb.CreationTimestamp})
	}
	for _, w := range rb.Spec.Workloads {
		if !seen[w] {
			seen[w] = true
			out = append(out, Entry{Workload: w, Listed: true, Since: rb.CreationTimestamp})
		}
	}
	if planned, ok := record.Planned(rb); ok {
		for _, w := range planned {
			if !seen[w] {
				seen[w] = true
				out = append(out, Entry{Workload: w, Since: rb.CreationTimestamp})
			}
		}
	}
	return out
}

// Summary is a run as a whole.
type Summary struct {
	Name string
	// Counts has the workloads in each state.
	Counts map[State]int
	Total  int
	// FailuresSpent are the failures its runs counted so far, against
	// MaxFailures (0: no budget, or not known).
	FailuresSpent, MaxFailures int
	// Aborted is set once someone aborted the run.
	Aborted *record.AbortMark
	// PausedAt is the step whose end the run waits at for an approval
	// (--steps); 0 when it does not wait.
	PausedAt int
	// Approvals are the steps approved so far.
	Approvals []record.Approval
	// WaitingFor says what the run waits for now.
	WaitingFor string
	// Finished is set when nothing is left to happen: status.finishTime is
	// set for the latest generation, no entry is pending, no move is under
	// way or unanswered, and every planned workload is listed or the run
	// recorded that it stopped (UnstartedAnnotation).
	Finished bool
}

// Summarize sums up the rows of rb (Classify of each of Entries(rb)).
func Summarize(rb *appsv1alpha1.WorkloadRebalancer, rows []Row) Summary {
	s := Summary{Name: rb.Name, Counts: map[State]int{}, Total: len(rows), FailuresSpent: record.FailuresSpent(rb)}
	if opts, ok := record.Options(rb); ok {
		s.MaxFailures = opts.MaxFailures
	}
	if mark, ok := record.Aborted(rb); ok {
		s.Aborted = &mark
	}
	s.PausedAt, _ = record.PausedAt(rb)
	s.Approvals = record.Approvals(rb)
	var moving, waiting []Row
	for _, row := range rows {
		s.Counts[row.State]++
		switch {
		case row.State.moving():
			moving = append(moving, row)
		case row.State == StateWaiting:
			waiting = append(waiting, row)
		}
	}
	_, stopped := rb.Annotations[record.UnstartedAnnotation]
	unlisted := slices.ContainsFunc(rows, func(r Row) bool { return !r.Listed })
	s.Finished = rb.Status.FinishTime != nil && rb.Status.ObservedGeneration >= rb.Generation && !record.HasPending(rb.Status) &&
		len(moving) == 0 && (!unlisted || stopped)
	switch {
	case s.Finished:
		s.WaitingFor = "nothing: the run is finished"
		if n := len(waiting); n > 0 {
			s.WaitingFor = fmt.Sprintf("nothing: the run stopped with %d workload(s) not started", n)
		}
	case len(moving) > 0:
		s.WaitingFor = waitingFor(moving[0])
		if len(moving) > 1 {
			s.WaitingFor += fmt.Sprintf(" (and %d more in flight)", len(moving)-1)
		}
	case s.Aborted != nil:
		s.WaitingFor = "the aborted run to record that it stopped"
	case s.PausedAt > 0:
		s.WaitingFor = fmt.Sprintf("an approval of step %d: `kubectl rebalance approve %s`", s.PausedAt, s.Name)
	case len(waiting) > 0:
		s.WaitingFor = fmt.Sprintf("%d workload(s) to start", len(waiting))
	default:
		s.WaitingFor = "the record's status"
	}
	return s
}

func waitingFor(row Row) string {
	name := rbprinters.WorkloadName(row.Workload)
	switch row.State {
	case StateHeld:
		return name + " to start its move"
	case StateStaging:
		if row.Ready != "" {
			return fmt.Sprintf("%s to get its new replicas ready (%s)", name, row.Ready)
		}
		return name + " to get its new replicas ready"
	case StateSettling:
		return name + " to settle"
	}
	return "karmada-scheduler to reschedule " + name
}

// String is the summary line: totals, budget, abort, what it waits for.
func (s Summary) String() string {
	var parts []string
	for _, st := range States {
		if n := s.Counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	line := fmt.Sprintf("workloadrebalancer %s: %d %s", s.Name, s.Total, plural(s.Total, "workload", "workloads"))
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, ", ") + ")"
	}
	if s.MaxFailures > 0 {
		line += fmt.Sprintf("; failure budget %d/%d spent", s.FailuresSpent, s.MaxFailures)
	} else if s.FailuresSpent > 0 {
		line += fmt.Sprintf("; %d failure(s) counted", s.FailuresSpent)
	}
	if s.Aborted != nil {
		line += "; aborted by " + s.Aborted.String()
	}
	for _, a := range s.Approvals {
		line += "; " + a.String()
	}
	return line + "; waiting for " + s.WaitingFor
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
