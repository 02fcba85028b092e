package wavesbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// schedulerPaceInWaves is the bare limit of a waved run in the waved run's
// own shape: the triggers of schedulerPace, from the same 16 goroutines at
// the same QPS, but never more than window of them unanswered, the next one
// written as soon as the scheduler answers one. Nothing is read, judged or
// waited for besides the answers, so what a waved run of the plugin takes
// beyond it is what the plugin adds.
//
// schedulerPace writes every trigger in one burst and leaves the scheduler
// a queue of the whole fleet while the writes flood the API server; its
// time swings by a fifth between rounds (docs/performance.md). This one
// puts the control plane under the load a waved run puts it under, so the
// two can be compared round by round.
func schedulerPaceInWaves(ctx context.Context, cp *harness.ControlPlane, c *fixtures.Clients, window int) (time.Duration, map[string]int, error) {
	keys, err := bindingKeys(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	counter, writer, err := paceWriter(cp)
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Minute)
	defer cancel()

	p := &windowedPace{keys: keys, answered: map[string]bool{}, written: map[string]bool{}, slots: make(chan struct{}, window)}
	head, err := c.Karmada.WorkV1alpha2().ResourceBindings("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, nil, err
	}
	p.start = time.Now()
	p.at = metav1.NewTime(p.start.Truncate(time.Second))
	watched := make(chan error, 1)
	go func() { watched <- p.follow(ctx, c, head.ResourceVersion) }()

	items := make([]string, 0, len(keys))
	for k := range keys {
		items = append(items, k)
	}
	patch := []byte(fmt.Sprintf(`{"spec":{"rescheduleTriggeredAt":%q}}`, p.at.UTC().Format(time.RFC3339)))
	err = parallel(items, 16, func(key string) error {
		write, err := p.take(ctx, key)
		if err != nil || !write {
			return err
		}
		ns, name := filepath.Split(key)
		_, err = writer.Karmada.WorkV1alpha2().ResourceBindings(ns[:len(ns)-1]).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	counts := counter.Counts()
	if err != nil {
		return 0, counts, err
	}
	if err := <-watched; err != nil {
		return 0, counts, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(os.Stderr, "scheduler's pace in waves of %d: %s\n", window, timeline(ctx, c, counter, p.start, p.last))
	return p.last.Sub(p.start), counts, nil
}

// windowedPace is what the writers and the watch of schedulerPaceInWaves
// share: which bindings were written and answered, and the window's slots
// (a writer takes one before its write, an answer gives it back).
type windowedPace struct {
	keys  map[string]bool
	start time.Time
	at    metav1.Time
	slots chan struct{}

	mu       sync.Mutex
	written  map[string]bool
	answered map[string]bool
	last     time.Time
}

// take waits for a free slot and marks key written. It reports no write
// for a binding answered already (nothing else should schedule one, but a
// second answer must not free a second slot).
func (p *windowedPace) take(ctx context.Context, key string) (bool, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.answered[key] {
		<-p.slots
		return false, nil
	}
	p.written[key] = true
	return true, nil
}

// answer records that the scheduler answered rb's trigger, frees the slot
// its write took, and reports whether every binding is answered.
func (p *windowedPace) answer(rb *workv1alpha2.ResourceBinding) bool {
	s := rb.Status
	key := rb.Namespace + "/" + rb.Name
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.LastScheduledTime != nil && !s.LastScheduledTime.Before(&p.at) && s.SchedulerObservedGeneration >= rb.Generation &&
		p.keys[key] && !p.answered[key] {
		p.answered[key], p.last = true, time.Now()
		if p.written[key] {
			<-p.slots
		}
		if n := len(p.answered); n%1000 == 0 || n == len(p.keys) {
			fmt.Fprintf(os.Stderr, "scheduler's pace in waves: %d of %d triggers answered (%s)\n", n, len(p.keys), time.Since(p.start).Round(time.Second))
		}
	}
	return len(p.answered) == len(p.keys)
}

// follow watches the bindings from rv until every one is answered. Should
// the watch end, it lists them (answers it missed) and watches again from
// the list: a writer waiting for a slot must never wait for an answer the
// watch lost.
func (p *windowedPace) follow(ctx context.Context, c *fixtures.Clients, rv string) error {
	for {
		w, err := c.Karmada.WorkV1alpha2().ResourceBindings("").Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			if rb, ok := ev.Object.(*workv1alpha2.ResourceBinding); ok && ev.Type != watch.Bookmark && p.answer(rb) {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return errors.New("the scheduler did not answer every trigger within an hour")
		}
		fmt.Fprintf(os.Stderr, "scheduler's pace in waves: the watch ended; listing and watching again\n")
		if rv, err = p.catchUp(ctx, c); err != nil || rv == "" {
			return err
		}
	}
}

// catchUp lists the bindings, records the answers among them, and returns
// the list's resource version ("" when every binding is answered).
func (p *windowedPace) catchUp(ctx context.Context, c *fixtures.Clients) (string, error) {
	opts := metav1.ListOptions{Limit: 1000}
	var rv string
	for {
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings("").List(ctx, opts)
		if err != nil {
			return "", err
		}
		if rv == "" {
			rv = list.ResourceVersion
		}
		for i := range list.Items {
			if p.answer(&list.Items[i]) {
				return "", nil
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return rv, nil
		}
	}
}

// paceWriter is the client both paces write their triggers with: QPS 200,
// every request counted.
func paceWriter(cp *harness.ControlPlane) (*harness.RequestCounter, *fixtures.Clients, error) {
	counter := harness.NewRequestCounter()
	cfg := counter.Wrap(cp.Karmada)
	cfg.QPS, cfg.Burst = 200, 400
	writer, err := fixtures.NewClients(cfg)
	return counter, writer, err
}

// bindingKeys lists the namespace/name of every ResourceBinding.
func bindingKeys(ctx context.Context, c *fixtures.Clients) (map[string]bool, error) {
	keys := map[string]bool{}
	opts := metav1.ListOptions{Limit: 1000}
	for {
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings("").List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, rb := range list.Items {
			keys[rb.Namespace+"/"+rb.Name] = true
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return keys, nil
		}
	}
}
