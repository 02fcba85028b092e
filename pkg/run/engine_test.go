package run

import (
	"context"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// TestEngineDryRun runs a client dry run through the engine: the rows come
// through the Rows hook before Run returns them, nothing is written, and
// the engine says nothing else.
func TestEngineDryRun(t *testing.T) {
	web := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	at := metav1.NewTime(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	binding := &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment", Generation: 2},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			Clusters: []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 3}},
		},
		Status: workv1alpha2.ResourceBindingStatus{SchedulerObservedGeneration: 2, LastScheduledTime: &at},
	}
	client := karmadafake.NewSimpleClientset(binding)
	engine := &Engine{Karmada: client, Clock: rebalance.NewServerClock()}

	var hooked *Result
	var notices []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := engine.Run(ctx, Request{
		Targets:  []rebalance.Target{{Workload: web}},
		DryRun:   rebalance.DryRunClient,
		Wait:     true,
		Deadline: time.Now().Add(time.Minute),
		Hooks: Hooks{
			Rows:   func(r *Result) error { hooked = r; return nil },
			Notice: func(line string) { notices = append(notices, line) },
		},
	})
	require.NoError(t, err)
	require.Len(t, res.Rows, 1)
	assert.Same(t, res, hooked)
	assert.Equal(t, web, res.Rows[0].Workload)
	assert.Equal(t, binding.Spec.Clusters, res.Rows[0].Before)
	assert.Nil(t, res.Record)
	assert.Nil(t, res.Waves)
	assert.Empty(t, notices)
	for _, a := range client.Actions() {
		assert.NotEqual(t, "patch", a.GetVerb(), "a client dry run writes nothing")
		assert.NotEqual(t, "update", a.GetVerb(), "a client dry run writes nothing")
	}
}
