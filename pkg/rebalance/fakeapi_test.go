package rebalance

import (
	"context"
	"strconv"
	"sync"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// fakeAPI is an in-memory BindingAPI for the runner's logic: it keeps a
// history of changes so that watches resume from a resource version, counts
// requests by verb, feeds the server clock as Date headers would, and plays
// a scheduler that answers triggers.
type fakeAPI struct {
	mu       sync.Mutex
	rv       int
	bindings map[bindingKey]*Binding
	history  []fakeEvent
	watchers []*fakeWatcher
	calls    map[string]int

	clock *ServerClock
	// server is the API server's time, sent with every answer.
	server time.Time

	// scheduler, when set, is called after each persisted trigger and may
	// change the binding as the Karmada scheduler would.
	scheduler func(b *Binding, server time.Time) bool
	// patchErrors are returned, in order, by the next patches of a binding.
	patchErrors map[bindingKey][]error
	// lostAnswers are returned, in order, by the next patches of a binding
	// that the server applied: the write lands, the client hears the error.
	lostAnswers map[bindingKey][]error
	// getErrors are returned, in order, by the reads of a binding that
	// follow its first.
	getErrors map[bindingKey][]error
	gets      map[bindingKey]int
	// persisted counts, per binding, the trigger writes the server applied.
	persisted map[bindingKey]int
	// beforePatch runs inside each patch before it is applied, to simulate
	// a concurrent writer.
	beforePatch func(f *fakeAPI, k bindingKey)
	// watchErr, when set, fails every watch.
	watchErr error
	// beforeResourceVersion runs inside each CurrentResourceVersion, with the
	// number of calls so far.
	beforeResourceVersion func(f *fakeAPI, calls int)
	rvCalls               int
	// compacting keeps no history: a watch from any version older than the
	// latest change has lost its place (410 Gone, as after a compaction).
	compacting bool
	// oddlySpelledTrigger makes every test of the trigger fail, as when the
	// stored text differs from how Go clients print the time.
	oddlySpelledTrigger bool
}

type fakeEvent struct {
	rv      int
	typ     watch.EventType
	binding Binding
}

func newFakeAPI(clock *ServerClock, server time.Time) *fakeAPI {
	return &fakeAPI{bindings: map[bindingKey]*Binding{}, calls: map[string]int{}, clock: clock, server: server,
		patchErrors: map[bindingKey][]error{}, lostAnswers: map[bindingKey][]error{}, persisted: map[bindingKey]int{},
		getErrors: map[bindingKey][]error{}, gets: map[bindingKey]int{}}
}

// add stores a binding as Karmada would have created it.
func (f *fakeAPI) add(b *Binding) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changeLocked(b, watch.Added)
}

// changeLocked stores b with a new resource version and tells the watchers.
func (f *fakeAPI) changeLocked(b *Binding, typ watch.EventType) {
	f.rv++
	b.ResourceVersion = strconv.Itoa(f.rv)
	f.bindings[b.key()] = b
	ev := fakeEvent{rv: f.rv, typ: typ, binding: *b}
	f.history = append(f.history, ev)
	for _, w := range f.watchers {
		w.offer(ev)
	}
}

// request counts one request and answers with the server's Date.
func (f *fakeAPI) request(verb string) {
	f.calls[verb]++
	f.clock.Observe(f.server)
}

func (f *fakeAPI) Get(_ context.Context, namespace, name string) (*Binding, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.request("get")
	k := bindingKey{namespace, name}
	f.gets[k]++
	if errs := f.getErrors[k]; f.gets[k] > 1 && len(errs) > 0 {
		f.getErrors[k] = errs[1:]
		return nil, errs[0]
	}
	b, ok := f.bindings[k]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "work.karmada.io", Resource: "resourcebindings"}, name)
	}
	c := *b
	return &c, nil
}

func (f *fakeAPI) PatchTrigger(_ context.Context, w TriggerWrite) (*Binding, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.request("patch")
	k := bindingKey{w.Namespace, w.Name}
	if errs := f.patchErrors[k]; len(errs) > 0 {
		f.patchErrors[k] = errs[1:]
		return nil, errs[0]
	}
	if f.beforePatch != nil {
		f.beforePatch(f, k)
	}
	b, ok := f.bindings[k]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "work.karmada.io", Resource: "resourcebindings"}, w.Name)
	}
	switch {
	case w.ResourceVersion != "":
		if b.ResourceVersion != w.ResourceVersion {
			return nil, apierrors.NewConflict(schema.GroupResource{Group: "work.karmada.io", Resource: "resourcebindings"}, w.Name, nil)
		}
	case f.oddlySpelledTrigger || !sameTrigger(b.Spec.RescheduleTriggeredAt, w.Expected):
		return nil, ErrTriggerChanged
	}
	updated := *b
	updated.Spec.RescheduleTriggeredAt = ptr.To(metav1.NewTime(w.At.Truncate(time.Second)))
	updated.Generation++
	if w.DryRun {
		return &updated, nil
	}
	f.changeLocked(&updated, watch.Modified)
	f.persisted[k]++
	result := updated
	if f.scheduler != nil {
		scheduled := updated
		if f.scheduler(&scheduled, f.server) {
			f.changeLocked(&scheduled, watch.Modified)
		}
	}
	if errs := f.lostAnswers[k]; len(errs) > 0 {
		f.lostAnswers[k] = errs[1:]
		return nil, errs[0]
	}
	return &result, nil
}

func (f *fakeAPI) CurrentResourceVersion(_ context.Context, _ Scope) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.request("list")
	f.rvCalls++
	if f.beforeResourceVersion != nil {
		f.beforeResourceVersion(f, f.rvCalls)
	}
	return strconv.Itoa(f.rv), nil
}

func (f *fakeAPI) Watch(_ context.Context, scope Scope, resourceVersion string) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.request("watch")
	if f.watchErr != nil {
		return nil, f.watchErr
	}
	from, err := strconv.Atoi(resourceVersion)
	if err != nil {
		return nil, apierrors.NewBadRequest("bad resource version")
	}
	if f.compacting && from < f.rv {
		return nil, apierrors.NewResourceExpired("too old resource version: " + resourceVersion)
	}
	w := newFakeWatcher(scope)
	for _, ev := range f.history {
		if ev.rv > from {
			w.offer(ev)
		}
	}
	f.watchers = append(f.watchers, w)
	return w, nil
}

// List implements BindingLister: one request however many bindings.
func (f *fakeAPI) List(_ context.Context, namespace string, clusterScoped bool) ([]*Binding, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.request("list")
	var out []*Binding
	for k, b := range f.bindings {
		if (k.namespace == "") == clusterScoped && k.namespace == namespace {
			c := *b
			out = append(out, &c)
		}
	}
	return out, strconv.Itoa(f.rv), nil
}

// remove deletes a stored binding and tells the watchers.
func (f *fakeAPI) removeLocked(k bindingKey) {
	b := *f.bindings[k]
	delete(f.bindings, k)
	f.rv++
	ev := fakeEvent{rv: f.rv, typ: watch.Deleted, binding: b}
	f.history = append(f.history, ev)
	for _, w := range f.watchers {
		w.offer(ev)
	}
}

// count returns how many requests of a verb were made.
func (f *fakeAPI) count(verb string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[verb]
}

// binding returns the stored binding.
func (f *fakeAPI) binding(namespace, name string) Binding {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.bindings[bindingKey{namespace, name}]
}

// fakeWatcher queues events without bound, so that replaying a long
// history never blocks the fake API, and hands them out in order.
type fakeWatcher struct {
	scope Scope
	ch    chan watch.Event
	done  chan struct{}
	once  sync.Once

	mu     sync.Mutex
	queue  []watch.Event
	notify chan struct{}
}

func newFakeWatcher(scope Scope) *fakeWatcher {
	w := &fakeWatcher{scope: scope, ch: make(chan watch.Event), done: make(chan struct{}), notify: make(chan struct{}, 1)}
	go w.pump()
	return w
}

func (w *fakeWatcher) offer(ev fakeEvent) {
	if !w.scope.contains(ev.binding.key()) {
		return
	}
	w.mu.Lock()
	w.queue = append(w.queue, watch.Event{Type: ev.typ, Object: toObject(ev.binding)})
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *fakeWatcher) pump() {
	defer close(w.ch)
	for {
		w.mu.Lock()
		queue := w.queue
		w.queue = nil
		w.mu.Unlock()
		for _, ev := range queue {
			select {
			case <-w.done:
				return
			case w.ch <- ev:
			}
		}
		select {
		case <-w.done:
			return
		case <-w.notify:
		}
	}
}

func (w *fakeWatcher) Stop()                          { w.once.Do(func() { close(w.done) }) }
func (w *fakeWatcher) ResultChan() <-chan watch.Event { return w.ch }

// toObject turns a Binding back into the API object a watch would carry.
func toObject(b Binding) runtime.Object {
	meta := metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name, ResourceVersion: b.ResourceVersion, Generation: b.Generation,
		Labels: b.Labels, OwnerReferences: b.OwnerReferences}
	if b.Namespace == "" {
		return &workv1alpha2.ClusterResourceBinding{ObjectMeta: meta, Spec: b.Spec, Status: b.Status}
	}
	return &workv1alpha2.ResourceBinding{ObjectMeta: meta, Spec: b.Spec, Status: b.Status}
}

// scheduledBinding is the binding of w as Karmada leaves it after a first
// successful schedule at lastScheduled onto clusters.
func scheduledBinding(w Workload, lastScheduled time.Time, clusters ...workv1alpha2.TargetCluster) *Binding {
	return &Binding{
		Namespace:  w.Namespace,
		Name:       BindingNameFor(w),
		Generation: 2,
		Labels:     map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: "policy-id"},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name},
			Clusters: clusters,
		},
		Status: workv1alpha2.ResourceBindingStatus{
			SchedulerObservedGeneration: 2,
			LastScheduledTime:           ptr.To(metav1.NewTime(lastScheduled)),
			Conditions: []metav1.Condition{{Type: workv1alpha2.Scheduled, Status: metav1.ConditionTrue, Reason: "Success",
				Message: "Binding has been scheduled successfully.", LastTransitionTime: metav1.NewTime(lastScheduled)}},
		},
	}
}

// reschedulingTo returns a scheduler that answers a fresh trigger like
// Karmada's: it schedules only when the trigger is after the last schedule,
// and then places the replicas on clusters.
func reschedulingTo(clusters ...workv1alpha2.TargetCluster) func(b *Binding, server time.Time) bool {
	return func(b *Binding, server time.Time) bool {
		last := b.Status.LastScheduledTime
		if last == nil || !b.Spec.RescheduleTriggeredAt.After(last.Time) {
			// Ignored: only the observed generation moves.
			b.Status.SchedulerObservedGeneration = b.Generation
			return true
		}
		b.Spec.Clusters = clusters
		b.Status.LastScheduledTime = ptr.To(metav1.NewTime(server))
		b.Status.SchedulerObservedGeneration = b.Generation
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: workv1alpha2.Scheduled, Status: metav1.ConditionTrue,
			Reason: "Success", Message: "Binding has been scheduled successfully."})
		return true
	}
}
