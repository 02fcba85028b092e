package rebalance

import (
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var (
	triggerAt = metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	policyIDs = map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: "id"}
)

func at(offset time.Duration) *metav1.Time {
	return ptr.To(metav1.NewTime(triggerAt.Add(offset)))
}

func scheduledCondition(status metav1.ConditionStatus, reason, message string, since *metav1.Time) metav1.Condition {
	return metav1.Condition{Type: workv1alpha2.Scheduled, Status: status, Reason: reason, Message: message, LastTransitionTime: *since}
}

func TestPreTriggerCheck(t *testing.T) {
	scheduled := workv1alpha2.ResourceBindingStatus{LastScheduledTime: at(-time.Minute)}
	tests := []struct {
		name    string
		labels  map[string]string
		spec    workv1alpha2.ResourceBindingSpec
		status  workv1alpha2.ResourceBindingStatus
		at      metav1.Time
		want    string
		message string
	}{
		{name: "acts on a policy binding", labels: policyIDs, status: scheduled, at: triggerAt},
		{
			name:   "acts on a cluster policy binding with the default scheduler named",
			labels: map[string]string{policyv1alpha1.ClusterPropagationPolicyPermanentIDLabel: "id"},
			spec:   workv1alpha2.ResourceBindingSpec{SchedulerName: DefaultSchedulerName},
			status: scheduled,
			at:     triggerAt,
		},
		{
			name:   "acts on a binding managed by another karmada object",
			labels: map[string]string{workv1alpha2.BindingManagedByLabel: "MultiClusterService"},
			status: scheduled,
			at:     triggerAt,
		},
		{
			name:   "suspended",
			labels: policyIDs,
			spec:   workv1alpha2.ResourceBindingSpec{Suspension: &workv1alpha2.Suspension{Scheduling: ptr.To(true)}},
			status: scheduled,
			at:     triggerAt,
			want:   ReasonSchedulingSuspended,
		},
		{
			name:   "suspension explicitly off",
			labels: policyIDs,
			spec:   workv1alpha2.ResourceBindingSpec{Suspension: &workv1alpha2.Suspension{Scheduling: ptr.To(false)}},
			status: scheduled,
			at:     triggerAt,
		},
		{
			name:    "foreign scheduler",
			labels:  policyIDs,
			spec:    workv1alpha2.ResourceBindingSpec{SchedulerName: "my-scheduler"},
			status:  scheduled,
			at:      triggerAt,
			want:    ReasonForeignScheduler,
			message: `the binding belongs to scheduler "my-scheduler", not "default-scheduler"; rebalance it with that scheduler's tools`,
		},
		{name: "no policy label", labels: map[string]string{"app": "x"}, status: scheduled, at: triggerAt, want: ReasonNoPolicy},
		{name: "empty policy label", labels: map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: ""}, status: scheduled, at: triggerAt, want: ReasonNoPolicy},
		{name: "never scheduled", labels: policyIDs, at: triggerAt, want: ReasonNotScheduledYet},
		{
			name:    "same second as the last schedule",
			labels:  policyIDs,
			status:  workv1alpha2.ResourceBindingStatus{LastScheduledTime: &triggerAt},
			at:      metav1.NewTime(triggerAt.Add(900 * time.Millisecond)),
			want:    ReasonTriggerNotAfterLastSchedule,
			message: "trigger 2024-05-01T10:00:00Z is not after lastScheduledTime 2024-05-01T10:00:00Z; use a later server time",
		},
		{name: "before the last schedule", labels: policyIDs, status: workv1alpha2.ResourceBindingStatus{LastScheduledTime: at(time.Second)}, at: triggerAt, want: ReasonTriggerNotAfterLastSchedule},
		{name: "one second after the last schedule", labels: policyIDs, status: workv1alpha2.ResourceBindingStatus{LastScheduledTime: at(-time.Second)}, at: triggerAt},
		{
			name:   "suspension is reported before everything else",
			spec:   workv1alpha2.ResourceBindingSpec{SchedulerName: "other", Suspension: &workv1alpha2.Suspension{Scheduling: ptr.To(true)}},
			at:     triggerAt,
			want:   ReasonSchedulingSuspended,
			labels: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PreTriggerCheck(tt.labels, tt.spec, tt.status, tt.at)
			assert.Equal(t, tt.want, got.Reason)
			assert.Equal(t, tt.want, PreTriggerIgnoreReason(tt.labels, tt.spec, tt.status, tt.at))
			if tt.want == "" {
				assert.Equal(t, Observation{}, got)
				return
			}
			assert.Equal(t, OutcomeIgnored, got.Outcome)
			assert.NotEmpty(t, got.Message)
			if tt.message != "" {
				assert.Equal(t, tt.message, got.Message)
			}
		})
	}
}

func TestClassifyOutcome(t *testing.T) {
	const written = int64(5)
	success := scheduledCondition(metav1.ConditionTrue, workv1alpha2.BindingReasonSuccess, "Binding has been scheduled successfully.", at(-time.Hour))
	tests := []struct {
		name       string
		generation int64
		spec       workv1alpha2.ResourceBindingSpec
		status     workv1alpha2.ResourceBindingStatus
		want       Observation
	}{
		{
			name:       "rescheduled",
			generation: written,
			status: workv1alpha2.ResourceBindingStatus{
				LastScheduledTime: at(2 * time.Second), SchedulerObservedGeneration: written,
				Conditions: []metav1.Condition{success},
			},
			want: Observation{Outcome: OutcomeScheduled, Reason: "Success", Message: "Binding has been scheduled successfully."},
		},
		{
			name:       "rescheduled in the trigger's second",
			generation: written + 1,
			status: workv1alpha2.ResourceBindingStatus{
				LastScheduledTime: at(300 * time.Millisecond), SchedulerObservedGeneration: written + 1,
				Conditions: []metav1.Condition{success},
			},
			want: Observation{Outcome: OutcomeScheduled, Reason: "Success", Message: "Binding has been scheduled successfully."},
		},
		{
			name:       "stale read",
			generation: written - 1,
			status:     workv1alpha2.ResourceBindingStatus{LastScheduledTime: at(-time.Minute), SchedulerObservedGeneration: written - 1, Conditions: []metav1.Condition{success}},
			want: Observation{Outcome: OutcomeWaiting, Reason: ReasonStaleRead,
				Message: "the binding read has generation 4, older than the trigger write (5); read it again"},
		},
		{
			name:       "scheduler has not looked yet",
			generation: written,
			status:     workv1alpha2.ResourceBindingStatus{LastScheduledTime: at(-time.Minute), SchedulerObservedGeneration: written - 1, Conditions: []metav1.Condition{success}},
			want: Observation{Outcome: OutcomeWaiting, Reason: ReasonAwaitingScheduler,
				Message: "waiting for the scheduler: trigger 2024-05-01T10:00:00Z, lastScheduledTime 2024-05-01T09:59:00Z, observed generation 4 of 5"},
		},
		{
			name:       "scheduled after the trigger but generation not yet observed",
			generation: written,
			status:     workv1alpha2.ResourceBindingStatus{LastScheduledTime: at(time.Second), SchedulerObservedGeneration: written - 1, Conditions: []metav1.Condition{success}},
			want: Observation{Outcome: OutcomeWaiting, Reason: ReasonAwaitingScheduler,
				Message: "waiting for the scheduler: trigger 2024-05-01T10:00:00Z, lastScheduledTime 2024-05-01T10:00:01Z, observed generation 4 of 5"},
		},
		{
			name:       "failed after the trigger",
			generation: written,
			status: workv1alpha2.ResourceBindingStatus{
				LastScheduledTime: at(-time.Minute), SchedulerObservedGeneration: written - 1,
				Conditions: []metav1.Condition{scheduledCondition(metav1.ConditionFalse, workv1alpha2.BindingReasonNoClusterFit, "0/2 clusters are available", at(time.Second))},
			},
			want: Observation{Outcome: OutcomeSchedulingFailed, Reason: "NoClusterFit", Message: "0/2 clusters are available"},
		},
		{
			name:       "failed in the trigger's second",
			generation: written,
			status: workv1alpha2.ResourceBindingStatus{
				LastScheduledTime: at(-time.Minute),
				Conditions:        []metav1.Condition{scheduledCondition(metav1.ConditionFalse, workv1alpha2.BindingReasonUnschedulable, "no capacity", &triggerAt)},
			},
			want: Observation{Outcome: OutcomeSchedulingFailed, Reason: "Unschedulable", Message: "no capacity"},
		},
		{
			name:       "failure that predates the trigger",
			generation: written,
			status: workv1alpha2.ResourceBindingStatus{
				LastScheduledTime: at(-time.Hour),
				Conditions:        []metav1.Condition{scheduledCondition(metav1.ConditionFalse, workv1alpha2.BindingReasonSchedulerError, "boom", at(-time.Minute))},
			},
			want: Observation{Outcome: OutcomeWaiting, Reason: ReasonFailedBeforeTrigger,
				Message: "scheduling has failed since 2024-05-01T09:59:00Z, before the trigger (SchedulerError: boom); waiting for a newer result"},
		},
		{
			name:       "rescheduled, then a later attempt failed",
			generation: written + 2,
			status: workv1alpha2.ResourceBindingStatus{
				LastScheduledTime: at(time.Second), SchedulerObservedGeneration: written + 1,
				Conditions: []metav1.Condition{scheduledCondition(metav1.ConditionFalse, workv1alpha2.BindingReasonQuotaExceeded, "quota", at(-time.Hour))},
			},
			want: Observation{Outcome: OutcomeSchedulingFailed, Reason: "QuotaExceeded", Message: "quota"},
		},
		{
			name:       "suspended after the trigger",
			generation: written + 1,
			spec:       workv1alpha2.ResourceBindingSpec{Suspension: &workv1alpha2.Suspension{Scheduling: ptr.To(true)}},
			status:     workv1alpha2.ResourceBindingStatus{LastScheduledTime: at(-time.Minute), Conditions: []metav1.Condition{success}},
			want: Observation{Outcome: OutcomeIgnored, Reason: ReasonSchedulingSuspended,
				Message: "scheduling of the binding was suspended after the trigger; resume it to let the trigger take effect"},
		},
		{
			name:       "handed to another scheduler",
			generation: written,
			spec:       workv1alpha2.ResourceBindingSpec{SchedulerName: "other"},
			status:     workv1alpha2.ResourceBindingStatus{LastScheduledTime: at(-time.Minute), Conditions: []metav1.Condition{success}},
			want: Observation{Outcome: OutcomeIgnored, Reason: ReasonForeignScheduler,
				Message: `the binding was handed to scheduler "other" after the trigger; rebalance it with that scheduler's tools`},
		},
		{
			name:       "observed but never scheduled",
			generation: written,
			status:     workv1alpha2.ResourceBindingStatus{SchedulerObservedGeneration: written},
			want: Observation{Outcome: OutcomeIgnored, Reason: ReasonNotScheduledYet,
				Message: "the scheduler saw the trigger on a binding it has never scheduled successfully; wait for its first schedule"},
		},
		{
			name:       "no condition at all",
			generation: written,
			status:     workv1alpha2.ResourceBindingStatus{LastScheduledTime: at(time.Second), SchedulerObservedGeneration: written},
			want: Observation{Outcome: OutcomeWaiting, Reason: ReasonAwaitingScheduler,
				Message: "waiting for the scheduler: trigger 2024-05-01T10:00:00Z, lastScheduledTime 2024-05-01T10:00:01Z, observed generation 5 of 5"},
		},
		{
			name:       "never scheduled and not yet observed",
			generation: written,
			want: Observation{Outcome: OutcomeWaiting, Reason: ReasonAwaitingScheduler,
				Message: "waiting for the scheduler: trigger 2024-05-01T10:00:00Z, lastScheduledTime <none>, observed generation 0 of 5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ClassifyOutcome(tt.generation, tt.spec, tt.status, written, triggerAt))
		})
	}
}
