package run

import (
	"context"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	eventrecord "k8s.io/client-go/tools/record"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// TestStepGatesPlace checks where a pass's gates go: the steps count over
// every workload of the run, so a resumed pass skips the gates behind it
// and waits at once at the one it stopped at.
func TestStepGatesPlace(t *testing.T) {
	steps, err := waves.ParseSteps("1,10%,100%")
	require.NoError(t, err)
	tests := []struct {
		name           string
		total, pending int
		gates          []int
	}{
		{name: "a fresh run of 50", total: 50, pending: 50, gates: []int{1, 5}},
		{name: "resumed inside step 2", total: 50, pending: 47, gates: []int{2}},
		{name: "resumed at the gate of step 1", total: 50, pending: 49, gates: []int{0, 4}},
		{name: "resumed past every gate", total: 50, pending: 40, gates: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			engine := &waves.Engine{}
			g := &stepGates{steps: steps, total: tt.total}
			g.place(engine, tt.pending)
			assert.Equal(t, tt.gates, engine.Gates)
			assert.NotNil(t, engine.Approve)
		})
	}
}

// TestStepGatesApprove checks a pause: the record is marked paused and the
// event written, the gate returns once the record holds the approval; a
// step approved already is not asked again; an ended context ends the wait.
func TestStepGatesApprove(t *testing.T) {
	rb := &appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: "canary", ResourceVersion: "1"}}
	client := karmadafake.NewSimpleClientset(rb)
	recorder := eventrecord.NewFakeRecorder(10)
	events := newRunEvents(recorder)
	events.record = rb
	var notices []string
	watched := &recordWatch{latest: rb, changed: make(chan struct{})}
	g := &stepGates{engine: &Engine{Karmada: client}, name: "canary", total: 3, watched: watched, events: events,
		notice: func(s string) { notices = append(notices, s) }}

	done := make(chan error, 1)
	go func() { done <- g.approve(context.Background(), 1, 2, 1, 3) }()
	require.Eventually(t, func() bool {
		got, err := client.AppsV1alpha1().WorkloadRebalancers().Get(context.Background(), "canary", metav1.GetOptions{})
		require.NoError(t, err)
		_, paused := record.PausedAt(got)
		return paused
	}, 5*time.Second, 10*time.Millisecond, "the record says it is paused")
	select {
	case err := <-done:
		t.Fatalf("went on without an approval: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	approved := rb.DeepCopy()
	data, err := record.ApprovePatch(rb, 1, "alice", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	require.NoError(t, err)
	require.Contains(t, string(data), `"resourceVersion":"1"`)
	approved.Annotations = map[string]string{record.ApprovedAnnotation: `[{"step":1,"by":"alice","at":"2026-01-02T03:04:05Z"}]`}
	watched.mu.Lock()
	watched.latest = approved
	close(watched.changed)
	watched.changed = make(chan struct{})
	watched.mu.Unlock()
	require.NoError(t, <-done)
	assert.Equal(t, "paused after step 1 of 2 (1 of 3 workloads): run `kubectl rebalance approve canary` to go on with step 2 (up to 3 workloads), `kubectl rebalance abort canary` to stop; `kubectl rebalance get canary -w` shows the workloads", notices[0])
	assert.Equal(t, "workloadrebalancer canary: step 1 approved by alice at 2026-01-02T03:04:05Z; going on with step 2 (up to 3 workloads)", notices[1])
	assert.Equal(t, corev1.EventTypeNormal+" "+ReasonPaused+" Paused after step 1 of 2 (1 of 3 workloads); waiting for `kubectl rebalance approve canary`", <-recorder.Events)
	assert.Equal(t, corev1.EventTypeNormal+" "+ReasonApproved+" Step 1 approved by alice at 2026-01-02T03:04:05Z; going on with step 2 of 2 (up to 3 workloads)", <-recorder.Events)

	// Approved already (by an approve the paused process did not see).
	notices = nil
	require.NoError(t, g.approve(context.Background(), 1, 2, 1, 3))
	assert.Equal(t, []string{"workloadrebalancer canary: step 1 approved by alice at 2026-01-02T03:04:05Z; going on"}, notices)

	// Interrupted while waiting.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- g.approve(ctx, 2, 3, 2, 3) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}
