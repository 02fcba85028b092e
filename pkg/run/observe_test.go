package run

import (
	"context"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// A record deleted before the run read the scheduler's answers (Karmada's
// controller at the end of a short ttl) still gets its outcomes from the
// bindings, for the rows that wait for one and only those.
func TestObserveRowsAfterTheRecordIsGone(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	later := metav1.NewTime(at.Add(2 * time.Second))
	scheduled := &rebalance.Binding{Namespace: "ns", Name: "web-deployment", Generation: 3,
		Spec: workv1alpha2.ResourceBindingSpec{RescheduleTriggeredAt: &at, Clusters: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 2}}},
		Status: workv1alpha2.ResourceBindingStatus{
			LastScheduledTime: &later, SchedulerObservedGeneration: 3,
			Conditions: []metav1.Condition{{Type: workv1alpha2.Scheduled, Status: metav1.ConditionTrue, Reason: "Success", LastTransitionTime: later}},
		},
	}
	waiting := rebalance.Observation{Outcome: rebalance.OutcomeWaiting, Reason: rebalance.ReasonAwaitingScheduler}
	rows := []rebalance.Row{
		{Workload: rebalance.Workload{Namespace: "ns", Name: "web"}, Binding: "web-deployment", Result: appsv1alpha1.RebalanceSuccessful, Observation: waiting},
		{Workload: rebalance.Workload{Namespace: "ns", Name: "ghost"}, Binding: "ghost-deployment", Result: appsv1alpha1.RebalanceFailed},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	observeRows(ctx, oneBinding{b: scheduled}, at, rows, func(row rebalance.Row) bool {
		return row.Result == appsv1alpha1.RebalanceSuccessful && row.Observation.Outcome == rebalance.OutcomeWaiting
	})

	assert.Equal(t, rebalance.OutcomeScheduled, rows[0].Observation.Outcome)
	assert.Equal(t, scheduled.Spec.Clusters, rows[0].After)
	assert.Equal(t, rebalance.Observation{}, rows[1].Observation, "a row not selected is left as it is")
}
