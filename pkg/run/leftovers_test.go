package run

import (
	"context"
	"sync"
	"testing"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// leftoverMover says which bindings an earlier move left suspended and
// records the moves it is asked for; finding leftovers asks nothing else.
type leftoverMover struct {
	waves.MakeBeforeBreak
	suspended map[string]bool
	mu        sync.Mutex
	moved     []string
}

func (m *leftoverMover) LeftSuspended(_ context.Context, t rebalance.Target) (bool, error) {
	return m.suspended[t.Workload.Name], nil
}

func (m *leftoverMover) Move(_ context.Context, t rebalance.Target, triggered func(rebalance.Row)) (rebalance.Row, error) {
	m.mu.Lock()
	m.moved = append(m.moved, t.Workload.Name)
	m.mu.Unlock()
	at := metav1.Now()
	row := rebalance.Row{Workload: t.Workload, Result: appsv1alpha1.RebalanceSuccessful, TriggeredAt: &at, Message: "made before break"}
	triggered(row)
	return row, nil
}

// TestRecordRunAgainMovesWhatAnEarlierRunLeftSuspended: a record run again
// (a resumed failback, the command after SIGKILL) finds the workloads it
// lists whose bindings an earlier move left suspended; the one Karmada's
// controller recorded Successful is moved again before the pass, the
// pending one is moved by the pass's make-before-break mover; the others
// are left alone.
func TestRecordRunAgainMovesWhatAnEarlierRunLeftSuspended(t *testing.T) {
	w := func(name string) rebalance.Workload {
		return rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: name}
	}
	obj := &appsv1alpha1.WorkloadRebalancer{
		Spec: appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{w("held"), w("done"), w("pending"), w("stuck")}},
		Status: appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
			{Workload: w("held"), Result: appsv1alpha1.RebalanceSuccessful},
			{Workload: w("done"), Result: appsv1alpha1.RebalanceSuccessful},
			{Workload: w("pending")},
			{Workload: w("stuck")},
		}},
	}
	m := &leftoverMover{suspended: map[string]bool{"held": true, "stuck": true}}
	left, err := findLeftovers(context.Background(), m, obj, nil, 2)
	require.NoError(t, err)
	require.NotNil(t, left)
	assert.Equal(t, []rebalance.Target{{Workload: w("held")}}, left.done)
	assert.True(t, left.has(w("stuck")))
	assert.False(t, left.has(w("pending")))
	assert.False(t, left.has(w("held")), "moved before the pass, not by it")

	var notices []string
	left.resume(context.Background(), m, 2, func(s string) { notices = append(notices, s) })
	assert.Equal(t, []string{"held"}, m.moved)
	require.Len(t, notices, 1)
	assert.Contains(t, notices[0], "resourcebinding shop/held-deployment was left suspended by an interrupted move of an earlier run: moved again (released, trigger ")

	none, err := findLeftovers(context.Background(), &leftoverMover{}, obj, nil, 2)
	require.NoError(t, err)
	assert.Nil(t, none)
	var nothing *leftovers
	nothing.resume(context.Background(), m, 2, func(string) { t.Fatal("nothing to resume") })
}
