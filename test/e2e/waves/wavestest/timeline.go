// Package wavestest holds what the e2e packages of waved runs share: a
// watch of a namespace's bindings that tells the order of triggers and
// dones, and the failover-and-recovery scenario run both on the default
// environment and with Karmada's workloadRebalancer controller off.
package wavestest

import (
	"context"
	"sync"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
)

// Timeline records, in the order of one watch of a namespace's
// ResourceBindings (the order of their resource versions), when each binding
// got its trigger and when it was first done after it: rescheduled after the
// trigger and, with ready, its placement's replicas ready. Both the command
// and this watch read the same object versions, and the command starts a
// workload only after it saw an earlier one done, so the next trigger comes
// after that done in this order.
type Timeline struct {
	mu     sync.Mutex
	events []Mark
	// state per binding name
	triggered map[string]bool
	done      map[string]bool
	ready     bool
}

// Mark is one step of a binding: its trigger written, or done, with the
// test's clock when the watch saw it (for the log only).
type Mark struct {
	Binding string
	Done    bool
	Seen    time.Time
}

// WatchTimeline starts watching the bindings of ns; none may hold a
// trigger yet.
func WatchTimeline(ctx context.Context, t *testing.T, c *fixtures.Clients, ns string, ready bool) *Timeline {
	t.Helper()
	list, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	tl := &Timeline{triggered: map[string]bool{}, done: map[string]bool{}, ready: ready}
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

func (tl *Timeline) see(rb *workv1alpha2.ResourceBinding) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	trigger := rb.Spec.RescheduleTriggeredAt
	if trigger == nil {
		return
	}
	if !tl.triggered[rb.Name] {
		tl.triggered[rb.Name] = true
		tl.events = append(tl.events, Mark{Binding: rb.Name, Seen: time.Now()})
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
	tl.events = append(tl.events, Mark{Binding: rb.Name, Done: true, Seen: time.Now()})
}

// Peak returns the most bindings seen between trigger and done at once, and
// how many triggers came before the first done.
func (tl *Timeline) Peak() (peak, beforeFirstDone int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	inFlight := map[string]bool{}
	firstDone := false
	for _, m := range tl.events {
		if m.Done {
			delete(inFlight, m.Binding)
			firstDone = true
			continue
		}
		inFlight[m.Binding] = true
		peak = max(peak, len(inFlight))
		if !firstDone {
			beforeFirstDone++
		}
	}
	return peak, beforeFirstDone
}

// Events returns the marks seen so far, in the watch's order.
func (tl *Timeline) Events() []Mark {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]Mark(nil), tl.events...)
}

// WaitDone waits until the timeline saw n bindings done.
func (tl *Timeline) WaitDone(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return len(tl.done) >= n, nil
	}), "the watch did not see %d bindings done", n)
}
