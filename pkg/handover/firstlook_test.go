package handover

import (
	"context"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// TestFirstLookFromTheSharedRead: a workload the run's shared read shows
// settled, with nothing to start first, goes to the one-write move without a
// read of its own; anything else is read afresh by the move proper.
func TestFirstLookFromTheSharedRead(t *testing.T) {
	same := Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member2", 3)}}
	gains := Prediction{Placements: [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 2)}}
	tests := []struct {
		name   string
		shared func(b *workv1alpha2.ResourceBinding) *workv1alpha2.ResourceBinding
		pred   Prediction
		// read: the move read the binding itself.
		read bool
	}{
		{name: "settled, nothing gains", pred: same},
		{name: "settled, a cluster gains", pred: gains, read: true},
		{name: "not in the shared read", shared: func(*workv1alpha2.ResourceBinding) *workv1alpha2.ResourceBinding { return nil }, pred: same, read: true},
		{name: "spec not observed by the scheduler yet", shared: func(b *workv1alpha2.ResourceBinding) *workv1alpha2.ResourceBinding {
			b.Generation = 2
			return b
		}, pred: same, read: true},
		{name: "suspended", shared: func(b *workv1alpha2.ResourceBinding) *workv1alpha2.ResourceBinding {
			b.Spec.Suspension = &workv1alpha2.Suspension{Scheduling: ptr.To(true)}
			return b
		}, pred: same, read: true},
		{name: "carrying a ledger", shared: func(b *workv1alpha2.ResourceBinding) *workv1alpha2.ResourceBinding {
			b.Annotations = map[string]string{LedgerAnnotation: `{"original":[]}`}
			return b
		}, pred: same, read: true},
		{name: "prediction not settled", pred: Prediction{Placements: same.Placements, Unsettled: "member2's summary counts gone pods"}, read: true},
	}
	for _, mode := range []string{"shared read", "watched by the waves"} {
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				b := seedBinding()
				b.Generation, b.Status.SchedulerObservedGeneration = 1, 1
				client := fake.NewSimpleClientset(b)
				shared := b.DeepCopy()
				if tt.shared != nil {
					shared = tt.shared(shared)
				}
				clock := rebalance.NewServerClock()
				clock.Observe(time.Now())
				one := &noOneWrite{}
				predicted := func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
					return tt.pred, nil
				}
				m := &Mover{Karmada: client, Clock: clock, Budget: DefaultBudget(), OneWrite: one, Predict: predicted,
					// The move proper settles an unsettled prediction with
					// Recheck; here it agrees at once.
					Recheck: func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
						return same, nil
					},
					Shared: func(context.Context, rebalance.Target) (*workv1alpha2.ResourceBinding, bool) {
						return shared, shared != nil
					}}
				mover := waves.Mover(m)
				if mode == "watched by the waves" {
					// A batch above the fleet threshold: the waves' one-write
					// mover follows the bindings, and the move judges from
					// what it holds (kept as rebalance.Binding).
					watched := &watchedOneWrite{}
					if shared != nil {
						watched.b = rebalance.BindingFromObject(shared)
					}
					m.Shared = func(context.Context, rebalance.Target) (*workv1alpha2.ResourceBinding, bool) {
						t.Error("the shared read is not asked when the waves follow the bindings")
						return nil, false
					}
					mover = m.WithOneWriteMover(watched, watched)
					one = &watched.noOneWrite
				}
				target := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}}
				moveCtx, stop := context.WithTimeout(ctx, 500*time.Millisecond)
				defer stop()
				_, err := mover.Move(moveCtx, target, func(rebalance.Row) {})
				require.NoError(t, err)
				reads := 0
				for _, a := range client.Actions() {
					if a.GetVerb() == "get" {
						reads++
					}
				}
				if tt.read {
					assert.Positive(t, reads, "the move read the binding itself")
					return
				}
				assert.Zero(t, reads, "judged from the shared read")
				assert.True(t, one.called, "moved in one write")
			})
		}
	}
}

// watchedOneWrite is the waves' one-write mover of a large batch, which
// follows its bindings (waves.WatchedBindings).
type watchedOneWrite struct {
	noOneWrite
	b *rebalance.Binding
}

func (w *watchedOneWrite) Watched(context.Context, rebalance.Target) (*rebalance.Binding, bool) {
	return w.b, w.b != nil
}

func (w *watchedOneWrite) Wrote(*rebalance.Binding) {}
