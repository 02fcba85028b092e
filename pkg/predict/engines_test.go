package predict

import (
	"context"
	"runtime"
	"testing"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// A run predicts each move on its own, and a daemon predicts for as long as
// it runs: predicting again and again must not add goroutines or engines,
// since every engine Karmada builds starts a goroutine that never ends.
func TestPredictionsReuseEngines(t *testing.T) {
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 1400), cluster("member2", 1200), cluster("member3", 1250)}
	bindings, targets := recoveryBatch(2*rowsPerWorker, 5, 0, 0)
	batch := input(clusters, bindings...)
	predictBoth := func() {
		// One workload (a move's prediction) and a batch side by side
		// (plan's), which takes a scheduler per goroutine.
		_, err := Predict(context.Background(), input(clusters, binding("b", dynamic, 6, tc("member2", 6))), []rebalance.Target{deploy("b")}, Options{})
		require.NoError(t, err)
		_, err = Predict(context.Background(), batch, targets, Options{})
		require.NoError(t, err)
	}
	predictBoth()
	built, goroutines := enginesBuilt(), runtime.NumGoroutine()
	for range 50 {
		predictBoth()
	}
	assert.Equal(t, built, enginesBuilt(), "engines built after the first predictions")
	assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines+2, "goroutines left by 100 more predictions")
}
