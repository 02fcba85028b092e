package waves

import (
	"context"
	"sync"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// BindingLister lists the bindings of a namespace, page by page (see
// rebalance.BindingLister).
type BindingLister = rebalance.BindingLister

// NewBindingLister returns a BindingLister backed by the Karmada clientset.
func NewBindingLister(client karmadaclient.Interface) BindingLister {
	return &clientsetLister{client: client}
}

type clientsetLister struct {
	client karmadaclient.Interface
}

// listPageSize keeps each page of a list small enough to hold briefly.
const listPageSize = 500

func (c *clientsetLister) List(ctx context.Context, namespace string, clusterScoped bool) ([]*rebalance.Binding, string, error) {
	var out []*rebalance.Binding
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		page, meta, err := rebalance.ListBindingsPage(ctx, c.client, namespace, clusterScoped, opts)
		if err != nil {
			return nil, "", err
		}
		out = append(out, page...)
		if meta.Continue == "" {
			return out, meta.ResourceVersion, nil
		}
		opts.Continue = meta.Continue
	}
}

// fleetKey locates a binding: namespace ("" when cluster-scoped) and name.
type fleetKey struct{ namespace, name string }

// fleet is what a large waved run knows of its bindings: each namespace's
// bindings listed once and kept current by one watch per namespace, so that
// reading costs a list per namespace instead of a get per binding, and
// following a workload costs no request at all. It serves the runner of each
// workload as its rebalance.BindingAPI: reads come from the store, writes go
// to the server and their answers into the store.
type fleet struct {
	api    rebalance.BindingAPI
	lister BindingLister
	ctx    context.Context

	mu      sync.Mutex
	store   map[fleetKey]*rebalance.Binding
	changed map[fleetKey]chan struct{}
	// stale keys are read from the server on their next Get (after a
	// conflict, the store may lag the server).
	stale map[fleetKey]bool
	// written holds the generation each trigger write returned.
	written map[fleetKey]int64
	// loads lists each namespace once.
	loads scopeLoads
	wg    sync.WaitGroup
}

// scopeLoads lists the bindings of each scope once: the first reader of a
// scope lists it, later readers wait for its end and share its error. A
// failed list leaves no trace: the next reader tries again.
type scopeLoads struct {
	mu     sync.Mutex
	scopes map[fleetKey]*scopeState
}

// scopeState is the listing of one namespace: done once listed (or failed).
type scopeState struct {
	ready chan struct{}
	err   error
}

// do runs list for the scope of namespace unless it ran or runs already,
// and returns its error; a waiting reader's own context ends its wait.
func (l *scopeLoads) do(ctx context.Context, namespace string, list func() error) error {
	scope := scopeOf(namespace)
	l.mu.Lock()
	st, ok := l.scopes[scope]
	if !ok {
		if l.scopes == nil {
			l.scopes = map[fleetKey]*scopeState{}
		}
		st = &scopeState{ready: make(chan struct{})}
		l.scopes[scope] = st
	}
	l.mu.Unlock()
	if ok {
		select {
		case <-st.ready:
			return st.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := list()
	if err != nil {
		l.mu.Lock()
		delete(l.scopes, scope)
		l.mu.Unlock()
	}
	st.err = err
	close(st.ready)
	return err
}

func newFleet(ctx context.Context, api rebalance.BindingAPI, lister BindingLister) *fleet {
	return &fleet{
		api: api, lister: lister, ctx: ctx,
		store: map[fleetKey]*rebalance.Binding{}, changed: map[fleetKey]chan struct{}{},
		stale: map[fleetKey]bool{}, written: map[fleetKey]int64{},
	}
}

// scopeOf names the scope of a namespace: the namespace, or the
// cluster-scoped bindings (name "*").
func scopeOf(namespace string) fleetKey {
	if namespace == "" {
		return fleetKey{name: "*"}
	}
	return fleetKey{namespace: namespace}
}

// load lists the namespace's bindings once and starts watching them; later
// callers wait for the first one.
func (f *fleet) load(ctx context.Context, namespace string) error {
	return f.loads.do(ctx, namespace, func() error {
		rv, err := f.relist(ctx, namespace)
		if err != nil {
			return err
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.follow(namespace, rv)
		}()
		return nil
	})
}

// relist reads every binding of the namespace into the store. A stored
// binding of the namespace that the list no longer holds was deleted while
// no watch told (after its watch expired): it leaves the store, and whoever
// waits for it is woken to see it gone.
func (f *fleet) relist(ctx context.Context, namespace string) (string, error) {
	bindings, rv, err := f.lister.List(ctx, namespace, namespace == "")
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	listed := make(map[fleetKey]bool, len(bindings))
	for _, b := range bindings {
		listed[fleetKey{b.Namespace, b.Name}] = true
		f.putLocked(b)
	}
	for k := range f.store {
		if k.namespace == namespace && !listed[k] {
			f.deleteLocked(k)
		}
	}
	return rv, nil
}

// deleteLocked removes k from the store and wakes whoever waits for it.
func (f *fleet) deleteLocked(k fleetKey) {
	delete(f.store, k)
	if ch := f.changed[k]; ch != nil {
		close(ch)
		delete(f.changed, k)
	}
}

// putLocked stores b unless the store holds a later generation or status of
// it, and wakes whoever waits for it.
func (f *fleet) putLocked(b *rebalance.Binding) {
	k := fleetKey{b.Namespace, b.Name}
	if old := f.store[k]; old != nil && old.UID == b.UID && newer(old, b) {
		return
	}
	f.store[k] = b
	if ch := f.changed[k]; ch != nil {
		close(ch)
		delete(f.changed, k)
	}
}

// newer reports whether a is a later version of the binding than b. Resource
// versions are opaque, so generations and the scheduler's observed
// generation decide; equal ones count as not newer (the later read wins).
func newer(a, b *rebalance.Binding) bool {
	if a.Generation != b.Generation {
		return a.Generation > b.Generation
	}
	return a.Status.SchedulerObservedGeneration > b.Status.SchedulerObservedGeneration
}

// follow keeps the namespace's bindings current until the run ends: a broken
// watch is resumed, an expired one replaced after listing again.
func (f *fleet) follow(namespace, rv string) {
	scope := rebalance.Scope{ClusterScoped: namespace == "", Namespace: namespace}
	backoff := time.Second
	for f.ctx.Err() == nil {
		w, err := f.api.Watch(f.ctx, scope, rv)
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = f.relistOrKeep(namespace, rv)
			}
			if rebalance.SleepContext(f.ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		rv = f.drain(w, namespace, rv)
		backoff = time.Second
	}
}

// relistOrKeep lists the namespace again after its watch history expired.
func (f *fleet) relistOrKeep(namespace, rv string) string {
	if fresh, err := f.relist(f.ctx, namespace); err == nil {
		return fresh
	}
	return rv
}

// drain applies the events of w to the store until it ends, and returns the
// version to resume from.
func (f *fleet) drain(w watch.Interface, namespace, rv string) string {
	defer w.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				b := rebalance.BindingFromObject(ev.Object)
				if b == nil {
					continue
				}
				rv = b.ResourceVersion
				f.mu.Lock()
				if ev.Type == watch.Deleted {
					f.deleteLocked(fleetKey{b.Namespace, b.Name})
				} else {
					f.putLocked(b)
				}
				f.mu.Unlock()
			case watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
			case watch.Error:
				if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return f.relistOrKeep(namespace, rv)
				}
				return rv
			}
		}
	}
}

// current returns the stored binding of k (nil when there is none) and a
// channel closed at its next change.
func (f *fleet) current(k fleetKey) (*rebalance.Binding, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := f.changed[k]
	if ch == nil {
		ch = make(chan struct{})
		f.changed[k] = ch
	}
	return f.store[k], ch
}

// writtenGeneration returns the generation the trigger write of k returned,
// or, when the binding already held the trigger, its generation now.
func (f *fleet) writtenGeneration(k fleetKey) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g, ok := f.written[k]; ok {
		return g
	}
	if b := f.store[k]; b != nil {
		return b.Generation
	}
	return 0
}

// stop waits for the watches to end; the run's context must have ended.
func (f *fleet) stop() { f.wg.Wait() }

// Get implements rebalance.BindingAPI from the store, once the namespace is
// listed. A binding not in the store, or marked stale, is read from the
// server.
func (f *fleet) Get(ctx context.Context, namespace, name string) (*rebalance.Binding, error) {
	if err := f.load(ctx, namespace); err != nil {
		return nil, err
	}
	k := fleetKey{namespace, name}
	f.mu.Lock()
	b, stale := f.store[k], f.stale[k]
	delete(f.stale, k)
	f.mu.Unlock()
	if b != nil && !stale {
		return b, nil
	}
	fresh, err := f.api.Get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.putLocked(fresh)
	f.mu.Unlock()
	return fresh, nil
}

// PatchTrigger implements rebalance.BindingAPI: the write goes to the
// server; its answer goes into the store. A failed write marks the binding
// stale, so the runner's next read goes to the server: the write may have
// been refused because the binding changed, or have landed with its answer
// lost, and the store knows neither.
func (f *fleet) PatchTrigger(ctx context.Context, w rebalance.TriggerWrite) (*rebalance.Binding, error) {
	b, err := f.api.PatchTrigger(ctx, w)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == nil && !w.DryRun:
		f.written[fleetKey{w.Namespace, w.Name}] = b.Generation
		f.putLocked(b)
	case err != nil:
		f.stale[fleetKey{w.Namespace, w.Name}] = true
	}
	return b, err
}

// CurrentResourceVersion implements rebalance.BindingAPI by asking the server.
func (f *fleet) CurrentResourceVersion(ctx context.Context, scope rebalance.Scope) (string, error) {
	return f.api.CurrentResourceVersion(ctx, scope)
}

// Watch implements rebalance.BindingAPI by asking the server.
func (f *fleet) Watch(ctx context.Context, scope rebalance.Scope, resourceVersion string) (watch.Interface, error) {
	return f.api.Watch(ctx, scope, resourceVersion)
}

// fleetMover moves a workload with the runner of the engine, reading and
// following its binding through the fleet's store.
type fleetMover struct {
	runner    *rebalance.Runner
	waitReady bool
	fleet     *fleet
	// fresh selects the workloads triggered at the server's time.
	fresh func(rebalance.Workload) bool
}

// Watched implements WatchedBindings from the fleet's store.
func (m *fleetMover) Watched(ctx context.Context, t rebalance.Target) (*rebalance.Binding, bool) {
	ns := t.Workload.Namespace
	if err := m.fleet.load(ctx, ns); err != nil {
		return nil, false
	}
	k := fleetKey{ns, rebalance.BindingNameFor(t.Workload)}
	m.fleet.mu.Lock()
	defer m.fleet.mu.Unlock()
	b := m.fleet.store[k]
	return b, b != nil && !m.fleet.stale[k]
}

// Wrote implements WatchedBindings: b goes into the store unless the store
// already holds a later version of it.
func (m *fleetMover) Wrote(b *rebalance.Binding) {
	m.fleet.mu.Lock()
	defer m.fleet.mu.Unlock()
	m.fleet.putLocked(b)
}

// Move implements Mover.
func (m *fleetMover) Move(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row)) (rebalance.Row, error) {
	runner := *m.runner
	if m.fresh != nil && m.fresh(t.Workload) {
		runner.TriggerAt = nil
	}
	runner.API = m.fleet
	runner.Wait, runner.Progress, runner.Settle = false, nil, 0
	runner.Triggered = func(result *rebalance.Result) {
		if len(result.Rows) == 1 {
			triggered(result.Rows[0])
		}
	}
	k := fleetKey{t.Workload.Namespace, rebalance.BindingNameFor(t.Workload)}
	result, err := runner.Run(ctx, []rebalance.Target{t})
	row := rebalance.Row{Workload: t.Workload, Binding: k.name}
	if result != nil && len(result.Rows) == 1 {
		row = result.Rows[0]
	}
	if err != nil || !m.runner.Wait || runner.DryRun != rebalance.DryRunNone || row.TriggeredAt == nil ||
		row.Result != appsv1alpha1.RebalanceSuccessful || row.Observation.Outcome != rebalance.OutcomeNone {
		return row, err
	}
	at := *row.TriggeredAt
	written := m.fleet.writtenGeneration(k)
	scheduled := false
	for {
		b, changed := m.fleet.current(k)
		switch {
		case b == nil:
			row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeIgnored, Reason: rebalance.ReasonBindingDeleted,
				Message: "the binding was deleted before the workload was done"}
			return row, nil
		case !scheduled:
			obs := rebalance.ClassifyOutcome(b.Generation, b.Spec, b.Status, written, at)
			if obs.Reason != rebalance.ReasonStaleRead {
				row.Observation = obs
				row.After = b.Spec.Clusters
			}
			scheduled = obs.Outcome == rebalance.OutcomeScheduled
			if obs.Outcome != rebalance.OutcomeWaiting && !scheduled {
				return row, nil
			}
		}
		if scheduled {
			row.After = b.Spec.Clusters
			if !m.waitReady {
				return row, nil
			}
			r := rebalance.CheckReady(b.Spec, b.Status)
			row.Readiness = &r
			if r.Ready {
				row.Message = readyPrefix + r.Detail
				return row, nil
			}
			row.Message = "waiting for replicas to be ready: " + r.Detail
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return row, nil
		}
	}
}
