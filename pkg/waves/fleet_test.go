package waves

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// fakeFleet is an API server holding ResourceBindings whose scheduler
// answers every trigger at once and whose members report the replicas ready
// a moment later. It counts requests by verb.
type fakeFleet struct {
	mu       sync.Mutex
	bindings map[string]*rebalance.Binding
	watchers []*fakeWatch
	requests map[string]int
	// lost names the bindings whose next trigger write lands but whose
	// answer is lost; writes counts the writes that landed, per binding.
	lost       map[string]bool
	writes     map[string]int
	unanswered map[string]metav1.Time
}

type fakeWatch struct {
	namespace string
	ch        chan watch.Event
	done      chan struct{}
	once      sync.Once
}

func (w *fakeWatch) Stop()                          { w.once.Do(func() { close(w.done) }) }
func (w *fakeWatch) ResultChan() <-chan watch.Event { return w.ch }

func newFakeFleet(namespaces, perNamespace int) *fakeFleet {
	f := &fakeFleet{bindings: map[string]*rebalance.Binding{}, requests: map[string]int{}, lost: map[string]bool{}, writes: map[string]int{},
		unanswered: map[string]metav1.Time{}}
	last := metav1.NewTime(time.Date(2024, 5, 1, 9, 0, 0, 0, time.UTC))
	for n := range namespaces {
		for i := range perNamespace {
			ns, name := fmt.Sprintf("ns-%d", n), fmt.Sprintf("app-%d", i)
			f.bindings[ns+"/"+name+"-deployment"] = &rebalance.Binding{
				Namespace: ns, Name: name + "-deployment", Generation: 1, ResourceVersion: "1",
				Labels: map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: "p"},
				Spec: workv1alpha2.ResourceBindingSpec{
					Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name},
					Clusters: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 1}},
				},
				Status: workv1alpha2.ResourceBindingStatus{LastScheduledTime: &last, SchedulerObservedGeneration: 1,
					Conditions: []metav1.Condition{{Type: workv1alpha2.Scheduled, Status: metav1.ConditionTrue, Reason: "Success", LastTransitionTime: last}}},
			}
		}
	}
	return f
}

func (f *fakeFleet) count(verb string) {
	f.mu.Lock()
	f.requests[verb]++
	f.mu.Unlock()
}

func toRB(b *rebalance.Binding) *workv1alpha2.ResourceBinding {
	rb := &workv1alpha2.ResourceBinding{Spec: b.Spec, Status: b.Status}
	rb.Namespace, rb.Name, rb.Generation, rb.ResourceVersion, rb.Labels = b.Namespace, b.Name, b.Generation, b.ResourceVersion, b.Labels
	return rb
}

func (f *fakeFleet) Get(_ context.Context, namespace, name string) (*rebalance.Binding, error) {
	f.count("GET")
	f.mu.Lock()
	if at, ok := f.unanswered[namespace+"/"+name]; ok {
		delete(f.unanswered, namespace+"/"+name)
		f.mu.Unlock()
		f.schedule(namespace+"/"+name, at)
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	b, ok := f.bindings[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "work.karmada.io", Resource: "resourcebindings"}, name)
	}
	copied := rebalance.BindingFromObject(toRB(b))
	return copied, nil
}

func (f *fakeFleet) List(_ context.Context, namespace string, _ bool) ([]*rebalance.Binding, string, error) {
	f.count("LIST")
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*rebalance.Binding
	for _, b := range f.bindings {
		if b.Namespace == namespace {
			out = append(out, rebalance.BindingFromObject(toRB(b)))
		}
	}
	return out, "1", nil
}

func (f *fakeFleet) PatchTrigger(_ context.Context, w rebalance.TriggerWrite) (*rebalance.Binding, error) {
	f.count("PATCH")
	key := w.Namespace + "/" + w.Name
	f.mu.Lock()
	b := f.bindings[key]
	if held := b.Spec.RescheduleTriggeredAt; (held == nil) != (w.Expected == nil) || held != nil && !held.Equal(w.Expected) {
		f.mu.Unlock()
		return nil, rebalance.ErrTriggerChanged
	}
	at := w.At
	b.Spec.RescheduleTriggeredAt = &at
	b.Generation++
	f.writes[key]++
	written := rebalance.BindingFromObject(toRB(b))
	lost := f.lost[key]
	delete(f.lost, key)
	f.mu.Unlock()
	if lost {
		// The scheduler answers by the time the client reads the binding
		// from the server again; no watch event tells the client before.
		f.mu.Lock()
		f.unanswered[key] = at
		f.mu.Unlock()
		return nil, io.ErrUnexpectedEOF
	}
	go f.schedule(key, at)
	return written, nil
}

// schedule answers a trigger: rescheduled to two clusters, then ready.
func (f *fakeFleet) schedule(key string, at metav1.Time) {
	f.mu.Lock()
	b := f.bindings[key]
	b.Spec.Clusters = []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 1}}
	b.Generation++
	b.Status.LastScheduledTime = &at
	b.Status.SchedulerObservedGeneration = b.Generation
	f.notifyLocked(b)
	b.Status.AggregatedStatus = []workv1alpha2.AggregatedStatusItem{
		{ClusterName: "member1", Applied: true, Status: &runtime.RawExtension{Raw: []byte(`{"readyReplicas":1}`)}},
		{ClusterName: "member2", Applied: true, Status: &runtime.RawExtension{Raw: []byte(`{"readyReplicas":1}`)}},
	}
	f.notifyLocked(b)
	f.mu.Unlock()
}

func (f *fakeFleet) notifyLocked(b *rebalance.Binding) {
	for _, w := range f.watchers {
		if w.namespace == b.Namespace {
			select {
			case w.ch <- watch.Event{Type: watch.Modified, Object: toRB(b)}:
			case <-w.done:
			}
		}
	}
}

func (f *fakeFleet) CurrentResourceVersion(context.Context, rebalance.Scope) (string, error) {
	f.count("LIST")
	return "1", nil
}

func (f *fakeFleet) Watch(_ context.Context, scope rebalance.Scope, _ string) (watch.Interface, error) {
	f.count("WATCH")
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWatch{namespace: scope.Namespace, ch: make(chan watch.Event, 1000), done: make(chan struct{})}
	f.watchers = append(f.watchers, w)
	// What changed since the list: the fake keeps no history, so it sends
	// every binding of the namespace again.
	for _, b := range f.bindings {
		if b.Namespace == scope.Namespace && b.Generation > 1 {
			w.ch <- watch.Event{Type: watch.Modified, Object: toRB(b)}
		}
	}
	return w, nil
}

// A large batch reads its bindings with one list per namespace and follows
// them with one watch per namespace: the requests are the triggers plus a
// few per namespace, whatever the window.
func TestFleetReadsPerNamespace(t *testing.T) {
	tests := []struct {
		name  string
		mover MakeBeforeBreak
	}{
		{name: "one-write moves"},
		// A make-before-break mover with nothing to start first for any
		// workload costs the same.
		{name: "a mover that leaves every workload to one write", mover: &leavesToOneWrite{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { fleetReadsPerNamespace(t, tt.mover) })
	}
}

// leavesToOneWrite is a MakeBeforeBreak that moves nothing itself (and
// holds nothing: the engine never asks).
type leavesToOneWrite struct {
	MakeBeforeBreak
	oneWrite Mover
}

func (l *leavesToOneWrite) WithOneWriteMover(m Mover, _ WatchedBindings) MakeBeforeBreak {
	return &leavesToOneWrite{oneWrite: m}
}

func (l *leavesToOneWrite) Move(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row)) (rebalance.Row, error) {
	return l.oneWrite.Move(ctx, t, triggered)
}

func fleetReadsPerNamespace(t *testing.T, mover MakeBeforeBreak) {
	const namespaces, perNamespace = 5, 40
	api := newFakeFleet(namespaces, perNamespace)
	var targets []rebalance.Target
	for n := range namespaces {
		for i := range perNamespace {
			targets = append(targets, rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment",
				Namespace: fmt.Sprintf("ns-%d", n), Name: fmt.Sprintf("app-%d", i)}})
		}
	}
	at := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	runner := &rebalance.Runner{API: api, Clock: rebalance.NewServerClock(), Options: rebalance.Options{Wait: true, TriggerAt: &at}}
	e := &Engine{Lister: api, Options: Options{MaxInFlight: 20, WaitReady: true}}
	if mover != nil {
		e.Handover = mover
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	result, err := e.Execute(ctx, runner, targets)
	require.NoError(t, err)
	assert.Equal(t, namespaces*perNamespace, result.Written)
	assert.Equal(t, 0, result.Failed)
	assert.Equal(t, 0, result.Pending)
	for _, row := range result.Rows {
		assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result)
		assert.Equal(t, rebalance.OutcomeScheduled, row.Observation.Outcome)
		assert.Equal(t, readyPrefix+"member1 1/1, member2 1/1", row.Message)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	assert.Equal(t, map[string]int{"LIST": namespaces, "WATCH": namespaces, "PATCH": namespaces * perNamespace}, api.requests)
}

// A run all at once of a large batch reads its bindings with one list per
// namespace and keeps every check: the requests are those lists and the
// triggers; a binding read again after a refused write goes to the server.
func TestListedReadsPerNamespace(t *testing.T) {
	const namespaces, perNamespace = 4, 10
	api := newFakeFleet(namespaces, perNamespace)
	var targets []rebalance.Target
	for n := range namespaces {
		for i := range perNamespace {
			targets = append(targets, rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment",
				Namespace: fmt.Sprintf("ns-%d", n), Name: fmt.Sprintf("app-%d", i)}})
		}
	}
	// A workload without a binding is looked up on the server.
	targets = append(targets, rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns-0", Name: "gone"}})
	at := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	runner := &rebalance.Runner{API: ListedReads(api, api, targets, 0), Clock: rebalance.NewServerClock(), Options: rebalance.Options{TriggerAt: &at}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	result, err := runner.Run(ctx, targets)
	require.NoError(t, err)
	assert.Equal(t, namespaces*perNamespace, result.Written)
	assert.Equal(t, 1, result.Failed, "the workload without a binding")
	api.mu.Lock()
	assert.Equal(t, map[string]int{"LIST": namespaces, "GET": 1, "PATCH": namespaces * perNamespace}, api.requests)
	api.mu.Unlock()

	// A second read of a binding is not served from the list.
	r := ListedReads(api, api, targets, 0)
	first, err := r.Get(ctx, "ns-1", "app-1-deployment")
	require.NoError(t, err)
	second, err := r.Get(ctx, "ns-1", "app-1-deployment")
	require.NoError(t, err)
	assert.Equal(t, first.Name, second.Name)
	api.mu.Lock()
	assert.Equal(t, 2, api.requests["GET"])
	api.mu.Unlock()

	// Small batches keep a get per binding.
	assert.Same(t, api, ListedReads(api, api, targets[:8], 0))
}

// A write whose answer is lost landed: the fleet's store must not hand the
// runner the binding as it was before, or the retry writes a second
// trigger (or disowns the first one).
func TestFleetLostAnswerIsReadFromTheServer(t *testing.T) {
	api := newFakeFleet(1, 20)
	var targets []rebalance.Target
	for i := range 20 {
		targets = append(targets, rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns-0", Name: fmt.Sprintf("app-%d", i)}})
		if i%3 == 0 {
			api.lost[fmt.Sprintf("ns-0/app-%d-deployment", i)] = true
		}
	}
	at := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	runner := &rebalance.Runner{API: api, Clock: rebalance.NewServerClock(), Options: rebalance.Options{Wait: true, TriggerAt: &at}}
	e := &Engine{Lister: api, Options: Options{MaxInFlight: 5, WaitReady: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	result, err := e.Execute(ctx, runner, targets)
	require.NoError(t, err)
	assert.Equal(t, 20, result.Written, "every landed write is the run's own")
	assert.Equal(t, 0, result.Pending)
	for _, row := range result.Rows {
		assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result)
		assert.Equal(t, rebalance.OutcomeScheduled, row.Observation.Outcome, row.Workload.Name)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	for key, n := range api.writes {
		assert.Equal(t, 1, n, "%s: one trigger write", key)
	}
	assert.Len(t, api.writes, 20)
	assert.Equal(t, 20, api.requests["PATCH"], "after a lost answer the binding is read from the server before any write")
}

// A namespace listed again after its watch expired drops the bindings the
// list no longer holds (deleted while no watch told), and whoever waits for
// one of them is woken to see it gone.
func TestFleetRelistDropsDeletedBindings(t *testing.T) {
	api := newFakeFleet(2, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFleet(ctx, api, api)
	_, err := f.relist(ctx, "ns-0")
	require.NoError(t, err)
	_, err = f.relist(ctx, "ns-1")
	require.NoError(t, err)
	gone := fleetKey{"ns-0", "app-1-deployment"}
	b, changed := f.current(gone)
	require.NotNil(t, b)

	api.mu.Lock()
	delete(api.bindings, "ns-0/app-1-deployment")
	delete(api.bindings, "ns-1/app-1-deployment")
	api.mu.Unlock()
	_, err = f.relist(ctx, "ns-0")
	require.NoError(t, err)

	select {
	case <-changed:
	default:
		t.Fatal("the waiter of the deleted binding was not woken")
	}
	b, _ = f.current(gone)
	assert.Nil(t, b)
	kept, _ := f.current(fleetKey{"ns-0", "app-0-deployment"})
	assert.NotNil(t, kept)
	other, _ := f.current(fleetKey{"ns-1", "app-1-deployment"})
	assert.NotNil(t, other, "another namespace is left to its own list")
}
