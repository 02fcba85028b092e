package rebalance

import (
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A recorded run triggers at the rebalancer's creationTimestamp and never
// moves it: a binding scheduled in that second is written but reported
// Ignored, as the controller would leave it.
func TestRunFixedTriggerTime(t *testing.T) {
	created := metav1.NewTime(serverNow.Add(-30 * time.Second))
	f := newRunnerFixture(Options{Wait: true, TriggerAt: &created})
	f.api.add(scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...))
	f.api.add(scheduledBinding(apiDeploy, created.Time, member2Only...))
	f.api.scheduler = reschedulingTo(backInMember...)
	var triggered *Result
	f.runner.Triggered = func(r *Result) { triggered = r }
	start := f.local.now

	result, err := f.run(t, time.Minute, targetsOf(webDeploy, apiDeploy)...)
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), f.local.now.Sub(start), "no wait for the clock")
	require.Len(t, result.Rows, 2)
	api, web := result.Rows[0], result.Rows[1]
	for _, row := range result.Rows {
		assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result)
		require.NotNil(t, row.TriggeredAt)
		assert.True(t, created.Equal(row.TriggeredAt), "%s triggered at %s", row.Workload.Name, row.TriggeredAt)
	}
	assert.Equal(t, OutcomeScheduled, web.Observation.Outcome)
	assert.Equal(t, OutcomeIgnored, api.Observation.Outcome)
	assert.Equal(t, ReasonTriggerNotAfterLastSchedule, api.Observation.Reason)
	assert.Equal(t, 2, f.api.count("patch"))

	// The hook saw the results before the scheduler answered.
	require.NotNil(t, triggered)
	require.Len(t, triggered.Rows, 2)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, triggered.Rows[1].Result)
	assert.Equal(t, OutcomeNone, triggered.Rows[1].Observation.Outcome)
	assert.NotNil(t, triggered.FinishTime)
}
