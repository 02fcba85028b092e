package rebalance

import (
	"context"
	"sort"
	"sync"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
)

// ReasonBindingDeleted: the binding disappeared before the scheduler answered.
const ReasonBindingDeleted = "BindingDeleted"

// maxNamespaceWatches is how many namespaces get a watch of their own; past
// that, one watch over all namespaces costs fewer requests and connections.
const maxNamespaceWatches = 8

// Polling is the fallback when bindings cannot be watched; its interval
// grows so that a long wait on many bindings stays cheap.
const (
	firstPollInterval = time.Second
	maxPollInterval   = 10 * time.Second
)

// PlanScopes groups bindings into as few watches as keep the streamed
// changes close to the bindings of interest: one per namespace (narrowed to
// the binding's name when it is the only one there), one over all
// namespaces once there are more than a few namespaces, and one for
// cluster-scoped bindings. The result is sorted for stable request order.
func PlanScopes(bindings []*Binding) []Scope {
	byNamespace := map[string][]string{}
	var clusterScoped []string
	for _, b := range bindings {
		if b.Namespace == "" {
			clusterScoped = append(clusterScoped, b.Name)
		} else {
			byNamespace[b.Namespace] = append(byNamespace[b.Namespace], b.Name)
		}
	}

	var scopes []Scope
	if len(byNamespace) > maxNamespaceWatches {
		scopes = append(scopes, Scope{})
	} else {
		for ns, names := range byNamespace {
			scopes = append(scopes, Scope{Namespace: ns, Name: onlyName(names)})
		}
	}
	if len(clusterScoped) > 0 {
		scopes = append(scopes, Scope{ClusterScoped: true, Name: onlyName(clusterScoped)})
	}
	sort.Slice(scopes, func(i, j int) bool {
		if scopes[i].ClusterScoped != scopes[j].ClusterScoped {
			return !scopes[i].ClusterScoped
		}
		return scopes[i].Namespace < scopes[j].Namespace
	})
	return scopes
}

// onlyName returns the single distinct name, or "" when there are several.
func onlyName(names []string) string {
	for _, n := range names[1:] {
		if n != names[0] {
			return ""
		}
	}
	return names[0]
}

// startingPoints takes, for each watch the wait will need, a resource
// version from before the writes. A scope that cannot be listed (say, for
// lack of permission) is polled instead, marked by an empty version.
func (r *Runner) startingPoints(ctx context.Context, entries []*entry) map[Scope]string {
	var bindings []*Binding
	for _, e := range entries {
		if e.binding != nil {
			bindings = append(bindings, e.binding)
		}
	}
	points := map[Scope]string{}
	for _, scope := range PlanScopes(bindings) {
		rv, err := r.API.CurrentResourceVersion(ctx, scope)
		if err != nil && ctx.Err() != nil {
			return points
		}
		points[scope] = rv
	}
	return points
}

// update is one change of a binding seen while waiting, or one failure the
// scheduler reported about it.
type update struct {
	key     bindingKey
	binding *Binding
	deleted bool
	failure *reportedFailure
}

// reportedFailure is the scheduler's latest report of a failed attempt.
type reportedFailure struct {
	at      time.Time
	message string
}

// waitForScheduler follows the triggered bindings until the scheduler has
// answered each trigger or ctx ends. It watches each scope from the version
// taken before the writes; a broken watch is resumed, and a scope that cannot
// be watched is polled.
func (r *Runner) waitForScheduler(ctx context.Context, entries []*entry, starts map[Scope]string) error {
	var mu sync.Mutex
	waiting := map[bindingKey]*entry{}
	for _, e := range entries {
		if !e.await || e.binding == nil {
			continue
		}
		r.observe(e, e.binding)
		if !e.done {
			waiting[e.binding.key()] = e
		}
	}
	total := len(waiting)
	if total == 0 {
		return nil
	}
	r.report(PhaseWaiting, 0, total)

	// Every waiting binding needs a scope; one read again after a conflict
	// is still in the scope planned for it, but be safe.
	for k := range waiting {
		if !anyContains(starts, k) {
			starts[Scope{ClusterScoped: k.namespace == "", Namespace: k.namespace, Name: k.name}] = ""
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pending := func(scope Scope) []bindingKey {
		mu.Lock()
		defer mu.Unlock()
		var keys []bindingKey
		for k, e := range waiting {
			if !e.done && scope.contains(k) {
				keys = append(keys, k)
			}
		}
		return keys
	}
	// The bindings that were failing before their trigger, for the
	// scheduler's failure events to answer.
	failing := func() []*Binding {
		mu.Lock()
		defer mu.Unlock()
		var bindings []*Binding
		for _, e := range waiting {
			if !e.done && e.row.Observation.Reason == ReasonFailedBeforeTrigger {
				bindings = append(bindings, e.binding)
			}
		}
		return bindings
	}
	updates := make(chan update)
	var wg sync.WaitGroup
	for scope, rv := range starts {
		if len(pending(scope)) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.follow(ctx, scope, rv, updates, pending)
		}()
	}
	if r.Failures != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.followFailures(ctx, updates, failing)
		}()
	}
	defer wg.Wait()
	defer cancel()

	left := total
	for left > 0 {
		select {
		case <-ctx.Done():
			return nil
		case u := <-updates:
			mu.Lock()
			e := waiting[u.key]
			if e != nil && !e.done {
				if u.deleted {
					e.row.Observation = Observation{Outcome: OutcomeIgnored, Reason: ReasonBindingDeleted,
						Message: "the binding was deleted before the scheduler answered the trigger"}
					e.done = true
				} else if u.failure != nil {
					r.observeFailure(e, *u.failure)
				} else {
					r.observe(e, u.binding)
				}
				if e.done {
					left--
					r.report(PhaseWaiting, total-left, total)
				}
			}
			mu.Unlock()
		}
	}
	r.settle(ctx, waiting, updates)
	return nil
}

// settle applies, for Settle, the further schedules of bindings whose
// trigger was answered: a second pass of the scheduler replaces the
// placement a first one reported.
func (r *Runner) settle(ctx context.Context, answered map[bindingKey]*entry, updates <-chan update) {
	if r.Settle <= 0 {
		return
	}
	timer := time.NewTimer(r.Settle)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		case u := <-updates:
			e := answered[u.key]
			if e == nil || u.deleted || e.row.Observation.Outcome != OutcomeScheduled {
				continue
			}
			if obs := ClassifyOutcome(u.binding.Generation, u.binding.Spec, u.binding.Status, e.written, e.at); obs.Outcome == OutcomeScheduled {
				e.binding = u.binding
				e.row.After = u.binding.Spec.Clusters
			}
		}
	}
}

// observe classifies what binding b shows about the trigger of e.
func (r *Runner) observe(e *entry, b *Binding) {
	obs := ClassifyOutcome(b.Generation, b.Spec, b.Status, e.written, e.at)
	if obs.Reason == ReasonStaleRead && e.row.Observation.Outcome != OutcomeNone {
		// An old event must not hide what a newer read showed.
		return
	}
	e.row.Observation = obs
	if obs.Reason != ReasonStaleRead {
		e.binding = b
		e.row.After = b.Spec.Clusters
	}
	e.done = obs.Outcome != OutcomeWaiting
}

// observeFailure takes a failure the scheduler reported about the binding of
// e: when it came after the trigger on a binding that was failing before it,
// the scheduler tried again and failed again, without touching the status.
func (r *Runner) observeFailure(e *entry, f reportedFailure) {
	if e.row.Observation.Reason != ReasonFailedBeforeTrigger || !failureAnswersTrigger(f.at, e.at) {
		return
	}
	obs := Observation{Outcome: OutcomeSchedulingFailed, Message: f.message}
	if condition := meta.FindStatusCondition(e.binding.Status.Conditions, workv1alpha2.Scheduled); condition != nil {
		obs.Reason = condition.Reason
	}
	e.row.Observation = obs
	e.done = true
}

// followFailures reads, at a growing interval, the scheduler's failure
// reports of the bindings that were failing before their trigger: one list
// of events per such binding and round, so the cost follows the failing
// bindings, not the cluster. A binding whose events cannot be read (no
// permission, say) is left to the timeout.
func (r *Runner) followFailures(ctx context.Context, out chan<- update, failing func() []*Binding) {
	unreadable := map[bindingKey]bool{}
	interval := firstPollInterval
	for {
		if sleepContext(ctx, interval) != nil {
			return
		}
		for _, b := range failing() {
			if unreadable[b.key()] {
				continue
			}
			at, message, err := r.Failures.LastFailure(ctx, b)
			if err != nil {
				if isFatal(err) {
					unreadable[b.key()] = true
				}
				continue
			}
			if at.IsZero() {
				continue
			}
			if !send(ctx, out, update{key: b.key(), failure: &reportedFailure{at: at, message: message}}) {
				return
			}
		}
		interval = min(interval*3/2, maxPollInterval)
	}
}

// anyContains reports whether one of the scopes covers k.
func anyContains(scopes map[Scope]string, k bindingKey) bool {
	for s := range scopes {
		if s.contains(k) {
			return true
		}
	}
	return false
}

// follow sends the changes of the bindings in scope until ctx ends. The
// loop is written out rather than left to client-go's RetryWatcher, which
// stops for good when its resource version expires (410 Gone) or the watch
// is forbidden; here an expired watch takes a fresh resource version and
// re-reads the pending bindings, and a forbidden one falls back to polling.
func (r *Runner) follow(ctx context.Context, scope Scope, rv string, out chan<- update, pending func(Scope) []bindingKey) {
	if rv == "" {
		r.poll(ctx, scope, out, pending)
		return
	}
	backoff := r.Backoff
	for ctx.Err() == nil {
		if rv == "" {
			// The watch broke and its place in history is lost: take a new
			// one, then read what may have changed before it.
			fresh, err := r.API.CurrentResourceVersion(ctx, scope)
			if isFatal(err) {
				r.poll(ctx, scope, out, pending)
				return
			}
			if err != nil {
				_ = sleepContext(ctx, backoff.Step())
				continue
			}
			rv = fresh
			r.refresh(ctx, pending(scope), out)
		}
		w, err := r.API.Watch(ctx, scope, rv)
		if isFatal(err) {
			r.poll(ctx, scope, out, pending)
			return
		}
		if err != nil {
			if isExpired(err) {
				rv = ""
			}
			_ = sleepContext(ctx, backoff.Step())
			continue
		}
		var progressed bool
		rv, progressed = r.drain(ctx, w, rv, out)
		if progressed {
			backoff = r.Backoff
		} else {
			_ = sleepContext(ctx, backoff.Step())
		}
	}
}

// drain forwards the events of w until it ends, and returns the resource
// version to resume from ("" when it expired) and whether any event came.
func (r *Runner) drain(ctx context.Context, w watch.Interface, rv string, out chan<- update) (string, bool) {
	defer w.Stop()
	progressed := false
	for {
		select {
		case <-ctx.Done():
			return rv, progressed
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, progressed
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				b := fromObject(ev.Object)
				if b == nil {
					continue
				}
				progressed = true
				rv = b.ResourceVersion
				if !send(ctx, out, update{key: b.key(), binding: b, deleted: ev.Type == watch.Deleted}) {
					return rv, progressed
				}
			case watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
			case watch.Error:
				if isExpired(apierrors.FromObject(ev.Object)) {
					return "", progressed
				}
			}
		}
	}
}

// BindingLister lists the bindings of a namespace ("" with clusterScoped:
// the ClusterResourceBindings), page by page, and returns the resource
// version of the list.
type BindingLister interface {
	List(ctx context.Context, namespace string, clusterScoped bool) ([]*Binding, string, error)
}

// refreshListMin is how many awaited bindings a namespace must hold before
// it is re-read with a list rather than a get per binding: a list of a
// namespace where few workloads are awaited costs more than their gets.
const refreshListMin = 8

// refresh reads the bindings keys once and sends what it finds: with a
// Lister, one list per namespace holding more than refreshListMin of them,
// so that a watch that lost its place in a fleet costs a request per
// namespace (a page per 500 bindings) rather than one per binding; a get
// for each of the others, and for all of a namespace whose list failed.
func (r *Runner) refresh(ctx context.Context, keys []bindingKey, out chan<- update) {
	if r.Lister == nil {
		r.get(ctx, keys, out)
		return
	}
	byNamespace := map[string][]bindingKey{}
	var namespaces []string
	for _, k := range keys {
		if byNamespace[k.namespace] == nil {
			namespaces = append(namespaces, k.namespace)
		}
		byNamespace[k.namespace] = append(byNamespace[k.namespace], k)
	}
	sort.Strings(namespaces)
	var single []bindingKey
	for _, ns := range namespaces {
		group := byNamespace[ns]
		if len(group) <= refreshListMin {
			single = append(single, group...)
			continue
		}
		if !r.list(ctx, ns, group, out) {
			if ctx.Err() != nil {
				return
			}
			single = append(single, group...)
		}
	}
	r.get(ctx, single, out)
}

// list reads the bindings keys of namespace with one list and sends what it
// finds; a binding the list does not hold was deleted. It returns false when
// the list failed (nothing sent) or ctx ended.
func (r *Runner) list(ctx context.Context, namespace string, keys []bindingKey, out chan<- update) bool {
	bindings, _, err := r.Lister.List(ctx, namespace, namespace == "")
	if err != nil {
		return false
	}
	found := make(map[bindingKey]*Binding, len(keys))
	for _, b := range bindings {
		found[b.key()] = b
	}
	for _, k := range keys {
		u := update{key: k, binding: found[k]}
		u.deleted = u.binding == nil
		if !send(ctx, out, u) {
			return false
		}
	}
	return true
}

// get reads the bindings keys one request each and sends what it finds.
func (r *Runner) get(ctx context.Context, keys []bindingKey, out chan<- update) {
	for _, k := range keys {
		b, err := r.API.Get(ctx, k.namespace, k.name)
		switch {
		case err == nil:
			if !send(ctx, out, update{key: k, binding: b}) {
				return
			}
		case apierrors.IsNotFound(err):
			if !send(ctx, out, update{key: k, deleted: true}) {
				return
			}
		}
	}
}

// poll reads the pending bindings of scope at a growing interval.
func (r *Runner) poll(ctx context.Context, scope Scope, out chan<- update, pending func(Scope) []bindingKey) {
	interval := firstPollInterval
	for {
		if sleepContext(ctx, interval) != nil {
			return
		}
		keys := pending(scope)
		if len(keys) == 0 {
			return
		}
		r.refresh(ctx, keys, out)
		interval = min(interval*3/2, maxPollInterval)
	}
}

// send delivers u unless ctx ends first.
func send(ctx context.Context, out chan<- update, u update) bool {
	select {
	case out <- u:
		return true
	case <-ctx.Done():
		return false
	}
}

// isExpired reports a resource version too old to watch from.
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}
