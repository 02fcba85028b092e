package recorded

import (
	"context"
	"sync"
	"testing"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
)

// rebalancerWatcher records every event of one WorkloadRebalancer.
type rebalancerWatcher struct {
	mu     sync.Mutex
	events []watch.Event
	w      watch.Interface
}

// startWatching watches the WorkloadRebalancer name (which may not exist
// yet) until the test ends.
func startWatching(ctx context.Context, t *testing.T, c *fixtures.Clients, name string) *rebalancerWatcher {
	t.Helper()
	w, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	require.NoError(t, err)
	rw := &rebalancerWatcher{w: w}
	go func() {
		for ev := range w.ResultChan() {
			rw.mu.Lock()
			rw.events = append(rw.events, ev)
			rw.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return rw
}

// last returns the last version of the object seen before any deletion.
func (rw *rebalancerWatcher) last(t *testing.T) *appsv1alpha1.WorkloadRebalancer {
	t.Helper()
	rw.mu.Lock()
	defer rw.mu.Unlock()
	var last *appsv1alpha1.WorkloadRebalancer
	for _, ev := range rw.events {
		if rb, ok := ev.Object.(*appsv1alpha1.WorkloadRebalancer); ok && ev.Type != watch.Deleted {
			last = rb
		}
	}
	require.NotNil(t, last, "the object was never seen")
	return last
}

// versions returns every version of the object seen, deletions included.
func (rw *rebalancerWatcher) versions() []watch.Event {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return append([]watch.Event(nil), rw.events...)
}

// deletions counts the deletion events seen.
func (rw *rebalancerWatcher) deletions() int {
	n := 0
	for _, ev := range rw.versions() {
		if ev.Type == watch.Deleted {
			n++
		}
	}
	return n
}
