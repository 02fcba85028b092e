package waves

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
)

// timeline records, in the order of one watch of a namespace's
// ResourceBindings (the order of their resource versions), when each binding
// got its trigger and when it was first done after it: rescheduled after the
// trigger and, with ready, its placement's replicas ready. Both the command
// and this watch read the same object versions, and the command starts a
// workload only after it saw an earlier one done, so the next trigger comes
// after that done in this order.
type timeline struct {
	mu     sync.Mutex
	events []mark
	// state per binding name
	triggered map[string]bool
	done      map[string]bool
	ready     bool
}

// mark is one step of a binding: its trigger written, or done.
type mark struct {
	binding string
	done    bool
}

// watchTimeline starts watching the bindings of ns.
func watchTimeline(ctx context.Context, t *testing.T, c *fixtures.Clients, ns string, ready bool) *timeline {
	t.Helper()
	list, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	tl := &timeline{triggered: map[string]bool{}, done: map[string]bool{}, ready: ready}
	for _, rb := range list.Items {
		require.Nil(t, rb.Spec.RescheduleTriggeredAt, "binding %s triggered before the test", rb.Name)
	}
	w, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			rb, ok := ev.Object.(*workv1alpha2.ResourceBinding)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			tl.see(rb)
		}
	}()
	return tl
}

func (tl *timeline) see(rb *workv1alpha2.ResourceBinding) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	trigger := rb.Spec.RescheduleTriggeredAt
	if trigger == nil {
		return
	}
	if !tl.triggered[rb.Name] {
		tl.triggered[rb.Name] = true
		tl.events = append(tl.events, mark{binding: rb.Name})
	}
	if tl.done[rb.Name] {
		return
	}
	last := rb.Status.LastScheduledTime
	scheduled := last != nil && !last.Time.Before(trigger.Time) &&
		meta.IsStatusConditionTrue(rb.Status.Conditions, workv1alpha2.Scheduled) &&
		rb.Status.SchedulerObservedGeneration >= rb.Generation
	if !scheduled {
		return
	}
	if tl.ready && !rebalance.CheckReady(rb.Spec, rb.Status).Ready {
		return
	}
	tl.done[rb.Name] = true
	tl.events = append(tl.events, mark{binding: rb.Name, done: true})
}

// peak returns the most bindings seen between trigger and done at once, and
// how many triggers came before the first done.
func (tl *timeline) peak() (peak, beforeFirstDone int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	inFlight := map[string]bool{}
	firstDone := false
	for _, m := range tl.events {
		if m.done {
			delete(inFlight, m.binding)
			firstDone = true
			continue
		}
		inFlight[m.binding] = true
		peak = max(peak, len(inFlight))
		if !firstDone {
			beforeFirstDone++
		}
	}
	return peak, beforeFirstDone
}

// waitDone waits until the timeline saw n bindings done.
func (tl *timeline) waitDone(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return len(tl.done) >= n, nil
	}), "the watch did not see %d bindings done", n)
}

// names returns prefix-0 ... prefix-(n-1).
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// deployArgs names deployments as command arguments.
func deployArgs(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, "deploy/"+n)
	}
	return out
}

// setClusterLabel sets (or with an empty value removes) a label on a Cluster.
func setClusterLabel(ctx context.Context, t *testing.T, c *fixtures.Clients, cluster, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, key)
	}
	_, err := c.Karmada.ClusterV1alpha1().Clusters().Patch(ctx, cluster, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err, "label cluster %s", cluster)
}
