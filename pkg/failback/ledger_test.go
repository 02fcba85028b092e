package failback

import (
	"context"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
)

// budgetStopped is a failback record as the failure budget leaves it: it
// lists the workloads its waves started (one of three), the other two are
// counted unstarted, it holds no ttl (a growing record gets it once every
// workload is listed), and its status is complete for what it lists.
func budgetStopped(name string) *appsv1alpha1.WorkloadRebalancer {
	w := appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "a"}
	finished := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	return &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Generation: 1, Labels: RecordLabels("member1", "k1"),
			Annotations: map[string]string{record.UnstartedAnnotation: "2", record.FailuresAnnotation: "1"},
		},
		Spec: appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{w}},
		Status: appsv1alpha1.WorkloadRebalancerStatus{
			ObservedWorkloads:  []appsv1alpha1.ObservedWorkload{{Workload: w, Result: appsv1alpha1.RebalanceSuccessful}},
			ObservedGeneration: 1,
			FinishTime:         &finished,
		},
	}
}

// TestBudgetStoppedFailbackGetsItsTTL: a failback stopped by its failure
// budget is never resumed, so its record gets the daemon's ttl when it is
// marked, and the sweep deletes it once that ttl is over.
func TestBudgetStoppedFailbackGetsItsTTL(t *testing.T) {
	ctx := context.Background()
	name := RecordName("member1", "k1")
	client := karmadafake.NewSimpleClientset(budgetStopped(name))
	l := Ledger{Client: client.AppsV1alpha1().WorkloadRebalancers(), TTL: ptr.To[int32](0)}

	require.NoError(t, l.MarkBudgetSpent(ctx, name))
	rb, err := l.Client.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, StoppedFailureBudget, rb.Annotations[AnnotationStopped])
	require.NotNil(t, rb.Spec.TTLSecondsAfterFinished, "the record of a failback stopped for good gets its ttl")
	assert.EqualValues(t, 0, *rb.Spec.TTLSecondsAfterFinished)
	entries, err := l.List(ctx)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.True(t, entries[0].BudgetSpent)
	assert.False(t, entries[0].Unfinished, "stopped for good, not unfinished")

	deleted, err := l.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{name}, deleted, "swept once its ttl is over")
	_, err = l.Client.Get(ctx, name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
}

// TestSweepGivesABudgetStoppedRecordItsTTL: a record marked stopped by the
// budget but left without a ttl (a daemon that died between the two
// writes, or an older one) gets it from the sweep, and then goes.
func TestSweepGivesABudgetStoppedRecordItsTTL(t *testing.T) {
	ctx := context.Background()
	name := RecordName("member1", "k1")
	rb := budgetStopped(name)
	rb.Annotations[AnnotationStopped] = StoppedFailureBudget
	client := karmadafake.NewSimpleClientset(rb)
	l := Ledger{Client: client.AppsV1alpha1().WorkloadRebalancers(), TTL: ptr.To[int32](0)}

	deleted, err := l.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{name}, deleted)
}

// TestSweepKeepsWhatMayResume: without the budget's mark, a record that
// does not list every workload yet belongs to a failback that may resume:
// the sweep neither gives it a ttl nor deletes it; nor does a daemon
// without --ttl give one.
func TestSweepKeepsWhatMayResume(t *testing.T) {
	ctx := context.Background()
	name := RecordName("member1", "k1")
	client := karmadafake.NewSimpleClientset(budgetStopped(name))
	l := Ledger{Client: client.AppsV1alpha1().WorkloadRebalancers(), TTL: ptr.To[int32](0)}
	deleted, err := l.Sweep(ctx)
	require.NoError(t, err)
	assert.Empty(t, deleted)
	rb, err := l.Client.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, rb.Spec.TTLSecondsAfterFinished)

	kept := Ledger{Client: l.Client}
	require.NoError(t, kept.MarkBudgetSpent(ctx, name))
	rb, err = l.Client.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, rb.Spec.TTLSecondsAfterFinished, "no --ttl: kept")
	deleted, err = kept.Sweep(ctx)
	require.NoError(t, err)
	assert.Empty(t, deleted)
}
