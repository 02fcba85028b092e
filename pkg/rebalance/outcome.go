package rebalance

import (
	"fmt"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Outcome is what the Karmada scheduler did with a reschedule trigger.
type Outcome string

const (
	// OutcomeNone means no trigger was written or its effect was not checked.
	OutcomeNone Outcome = ""
	// OutcomeScheduled means the scheduler rescheduled the binding after the trigger.
	OutcomeScheduled Outcome = "Scheduled"
	// OutcomeSchedulingFailed means the scheduler tried after the trigger and failed.
	OutcomeSchedulingFailed Outcome = "SchedulingFailed"
	// OutcomeIgnored means the scheduler does not or will not act on the trigger.
	OutcomeIgnored Outcome = "Ignored"
	// OutcomeWaiting means the scheduler has not visibly acted on the trigger yet.
	OutcomeWaiting Outcome = "Waiting"
	// OutcomeDeadlineExceeded means a waved run gave up on the workload: it
	// was not triggered, scheduled or ready within its progress deadline.
	OutcomeDeadlineExceeded Outcome = "DeadlineExceeded"
)

// Reasons an Observation gives besides the reason of the binding's Scheduled
// condition, which is passed through for Scheduled and SchedulingFailed.
const (
	// ReasonSchedulingSuspended: spec.suspension.scheduling is true.
	ReasonSchedulingSuspended = "SchedulingSuspended"
	// ReasonForeignScheduler: spec.schedulerName names another scheduler.
	ReasonForeignScheduler = "ForeignScheduler"
	// ReasonNoPolicy: the binding carries no policy label, as for bindings that
	// only propagate dependencies, so the scheduler never looks at it.
	ReasonNoPolicy = "NoPolicy"
	// ReasonNotScheduledYet: status.lastScheduledTime is unset; the scheduler
	// only honours a trigger on a binding that was scheduled before.
	ReasonNotScheduledYet = "NotScheduledYet"
	// ReasonTriggerNotAfterLastSchedule: the trigger time is not strictly
	// after status.lastScheduledTime (same second, or a lagging clock).
	ReasonTriggerNotAfterLastSchedule = "TriggerNotAfterLastSchedule"
	// ReasonStaleRead: the binding read predates the write of the trigger.
	ReasonStaleRead = "StaleRead"
	// ReasonFailedBeforeTrigger: Scheduled=False was already set before the
	// trigger, so it cannot yet be told apart from a new failure.
	ReasonFailedBeforeTrigger = "FailedBeforeTrigger"
	// ReasonAwaitingScheduler: nothing in the binding shows the scheduler's
	// answer yet.
	ReasonAwaitingScheduler = "AwaitingScheduler"
)

// DefaultSchedulerName is the scheduler a binding with an empty
// spec.schedulerName belongs to.
const DefaultSchedulerName = "default-scheduler"

// Observation is what a binding shows about a trigger.
type Observation struct {
	// Outcome classifies the scheduler's reaction.
	Outcome Outcome
	// Reason is a short CamelCase word: one of the Reason constants, or the
	// reason of the binding's Scheduled condition.
	Reason string
	// Message explains the outcome for a human.
	Message string
}

// PreTriggerCheck reports, from a binding's labels, spec and status, whether
// the default scheduler would silently ignore a trigger at the given time. It
// returns an Ignored observation when it would, and the zero Observation when
// the trigger would lead to a fresh reschedule. The checks follow the
// scheduler's order: suspension, scheduler name, policy labels, then the
// comparison with status.lastScheduledTime.
func PreTriggerCheck(labels map[string]string, spec workv1alpha2.ResourceBindingSpec, status workv1alpha2.ResourceBindingStatus, at metav1.Time) Observation {
	if spec.SchedulingSuspended() {
		return ignored(ReasonSchedulingSuspended, "scheduling of the binding is suspended (spec.suspension.scheduling); resume it before rebalancing")
	}
	if !ownedByDefaultScheduler(spec) {
		return ignored(ReasonForeignScheduler, fmt.Sprintf("the binding belongs to scheduler %q, not %q; rebalance it with that scheduler's tools", spec.SchedulerName, DefaultSchedulerName))
	}
	if !hasSchedulingLabel(labels) {
		return ignored(ReasonNoPolicy, "the binding has no propagation policy label (it only propagates dependencies); rebalance the workload that depends on it instead")
	}
	if status.LastScheduledTime == nil {
		return ignored(ReasonNotScheduledYet, "the binding has never been scheduled successfully (status.lastScheduledTime is unset); wait for its first schedule")
	}
	if !truncate(at.Time).After(truncate(status.LastScheduledTime.Time)) {
		return ignored(ReasonTriggerNotAfterLastSchedule, fmt.Sprintf("trigger %s is not after lastScheduledTime %s; use a later server time",
			formatTime(at.Time), formatTime(status.LastScheduledTime.Time)))
	}
	return Observation{}
}

// PreTriggerIgnoreReason returns the reason PreTriggerCheck gives, or "" when
// the scheduler would act on the trigger.
func PreTriggerIgnoreReason(labels map[string]string, spec workv1alpha2.ResourceBindingSpec, status workv1alpha2.ResourceBindingStatus, at metav1.Time) string {
	return PreTriggerCheck(labels, spec, status, at).Reason
}

// ClassifyOutcome reads a binding after a write that set the trigger at and
// returned generation written; generation, spec and status are the binding as
// read now. The scheduler sets lastScheduledTime and schedulerObservedGeneration
// only on success, and on failure only the Scheduled condition, so:
//
//   - Scheduled: lastScheduledTime >= at, Scheduled=True and
//     schedulerObservedGeneration >= written;
//   - SchedulingFailed: Scheduled=False, turned False at or after at, or with
//     lastScheduledTime >= at (a later attempt failed);
//   - Ignored: the binding was suspended or handed to another scheduler, or the
//     scheduler observed the generation without ever having scheduled it;
//   - Waiting: anything else, including a read older than the write and a
//     failure that was already there before the trigger.
func ClassifyOutcome(generation int64, spec workv1alpha2.ResourceBindingSpec, status workv1alpha2.ResourceBindingStatus, written int64, at metav1.Time) Observation {
	if generation < written {
		return Observation{Outcome: OutcomeWaiting, Reason: ReasonStaleRead,
			Message: fmt.Sprintf("the binding read has generation %d, older than the trigger write (%d); read it again", generation, written)}
	}

	trigger := truncate(at.Time)
	lastScheduled := status.LastScheduledTime
	scheduledSinceTrigger := lastScheduled != nil && !truncate(lastScheduled.Time).Before(trigger)
	observedWrite := status.SchedulerObservedGeneration >= written
	condition := meta.FindStatusCondition(status.Conditions, workv1alpha2.Scheduled)

	if condition != nil && condition.Status == metav1.ConditionTrue && scheduledSinceTrigger && observedWrite {
		return Observation{Outcome: OutcomeScheduled, Reason: condition.Reason, Message: condition.Message}
	}
	if condition != nil && condition.Status == metav1.ConditionFalse {
		if scheduledSinceTrigger || !truncate(condition.LastTransitionTime.Time).Before(trigger) {
			return Observation{Outcome: OutcomeSchedulingFailed, Reason: condition.Reason, Message: condition.Message}
		}
		// A repeated failure leaves the condition untouched, so an old one may
		// or may not be the answer to this trigger.
		return Observation{Outcome: OutcomeWaiting, Reason: ReasonFailedBeforeTrigger,
			Message: fmt.Sprintf("scheduling has failed since %s, before the trigger (%s: %s); waiting for a newer result",
				formatTime(condition.LastTransitionTime.Time), condition.Reason, condition.Message)}
	}
	if spec.SchedulingSuspended() {
		return ignored(ReasonSchedulingSuspended, "scheduling of the binding was suspended after the trigger; resume it to let the trigger take effect")
	}
	if !ownedByDefaultScheduler(spec) {
		return ignored(ReasonForeignScheduler, fmt.Sprintf("the binding was handed to scheduler %q after the trigger; rebalance it with that scheduler's tools", spec.SchedulerName))
	}
	if lastScheduled == nil && observedWrite {
		return ignored(ReasonNotScheduledYet, "the scheduler saw the trigger on a binding it has never scheduled successfully; wait for its first schedule")
	}
	return Observation{Outcome: OutcomeWaiting, Reason: ReasonAwaitingScheduler,
		Message: fmt.Sprintf("waiting for the scheduler: trigger %s, lastScheduledTime %s, observed generation %d of %d",
			formatTime(at.Time), formatOptionalTime(lastScheduled), status.SchedulerObservedGeneration, written)}
}

// ignored builds an Ignored observation.
func ignored(reason, message string) Observation {
	return Observation{Outcome: OutcomeIgnored, Reason: reason, Message: message}
}

// ownedByDefaultScheduler reports whether the default scheduler picks up the binding.
func ownedByDefaultScheduler(spec workv1alpha2.ResourceBindingSpec) bool {
	return spec.SchedulerName == "" || spec.SchedulerName == DefaultSchedulerName
}

// hasSchedulingLabel reports whether the scheduler's event filter lets the
// binding through: it needs a policy permanent-id label or a managed-by label.
func hasSchedulingLabel(labels map[string]string) bool {
	return labels[policyv1alpha1.PropagationPolicyPermanentIDLabel] != "" ||
		labels[policyv1alpha1.ClusterPropagationPolicyPermanentIDLabel] != "" ||
		labels[workv1alpha2.BindingManagedByLabel] != ""
}

// formatTime prints a time the way the API server stores it.
func formatTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// formatOptionalTime prints an optional time, "<none>" when unset.
func formatOptionalTime(t *metav1.Time) string {
	if t == nil {
		return "<none>"
	}
	return formatTime(t.Time)
}
