package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// EventScheme knows the Karmada binding, cluster and WorkloadRebalancer
// types, so that events can name a ResourceBinding, a Cluster or a recorded
// run whose TypeMeta is empty (as typed clients return them). EventRecorder
// passes it to its recorder.
func EventScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	// Both installers only fail on programming errors in generated code.
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := workv1alpha2.Install(scheme); err != nil {
		panic(err)
	}
	if err := clusterv1alpha1.Install(scheme); err != nil {
		panic(err)
	}
	if err := appsv1alpha1.Install(scheme); err != nil {
		panic(err)
	}
	return scheme
}

// EventRecorder records events through client-go's event broadcaster, as
// Kubernetes components do: repeated events are aggregated and counted,
// floods of one reason about one object are rate-limited, and events are
// written in the background with client-go's retries. Flush waits for the
// writes, so that a daemon that stops, or a command that ends, does not
// lose its last events.
type EventRecorder struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	sink        *flushSink
}

// NewEventRecorder starts a broadcaster writing events through kube as
// component on host. Call Shutdown when done.
func NewEventRecorder(kube kubernetes.Interface, component, host string) *EventRecorder {
	sink := &flushSink{
		EventSink: &typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")},
		waiting:   map[string]chan struct{}{},
	}
	// The broadcaster's context is not the daemon's: a stop request must
	// not cancel the writes that Flush waits for. Its spam filter counts
	// each reason apart (client-go counts every event of one object
	// together): a run that reports many workloads on its
	// WorkloadRebalancer must not use up the budget of its own start and
	// end.
	broadcaster := record.NewBroadcaster(record.WithContext(context.Background()),
		record.WithCorrelatorOptions(record.CorrelatorOptions{SpamKeyFunc: spamKey}))
	broadcaster.StartRecordingToSink(sink)
	return &EventRecorder{
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(EventScheme(), corev1.EventSource{Component: component, Host: host}),
		sink:        sink,
	}
}

// Recorder is the client-go recorder behind r, for code that takes one.
func (r *EventRecorder) Recorder() record.EventRecorder { return r.recorder }

// Err returns the first error an event write got (forbidden, say), nil
// when there was none: client-go's recorder only logs such errors, and a
// command may want to say that its events are missing.
func (r *EventRecorder) Err() error {
	r.sink.mu.Lock()
	defer r.sink.mu.Unlock()
	return r.sink.err
}

// spamKey is client-go's key of the spam filter, with the event's reason.
func spamKey(event *corev1.Event) string {
	o := event.InvolvedObject
	return strings.Join([]string{event.Source.Component, event.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, event.Type, event.Reason}, "/")
}

// WriteEvent records an event about object; it is written in the
// background, so it always returns nil (the signature of deschedule.EventWriter).
func (r *EventRecorder) WriteEvent(_ context.Context, object runtime.Object, eventType, reason, message string) error {
	r.recorder.Event(object, eventType, reason, message)
	return nil
}

// Flush returns once every event recorded before it has been written (or
// given up by client-go's retries), or when ctx ends. It sends a marker
// through the broadcaster, which handles events one at a time in order, and
// waits for the marker to reach the sink; the sink swallows it.
func (r *EventRecorder) Flush(ctx context.Context) error {
	name := string(uuid.NewUUID())
	done := r.sink.expect(name)
	// A new object per marker: never aggregated with, or rate-limited
	// like, an earlier marker.
	r.recorder.Event(&corev1.ObjectReference{Kind: flushKind, Namespace: metav1.NamespaceDefault, Name: name}, corev1.EventTypeNormal, flushKind, "")
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		r.sink.forget(name)
		return fmt.Errorf("events were still being written when the wait ended: %w", ctx.Err())
	}
}

// Shutdown stops the broadcaster; events not yet written are dropped.
func (r *EventRecorder) Shutdown() { r.broadcaster.Shutdown() }

// flushKind marks the events Flush sends; they never reach the API server.
const flushKind = "KubectlRebalanceFlush"

// flushSink passes events to the API server, except Flush's markers, which
// it reports instead.
type flushSink struct {
	record.EventSink
	mu      sync.Mutex
	waiting map[string]chan struct{}
	// err is the first error a write of an event got.
	err error
}

// note keeps the first error of a write. A patch of an event that has
// expired meanwhile (client-go creates it anew) and a create of one that
// exists lose nothing.
func (s *flushSink) note(err error) {
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *flushSink) Update(event *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Update(event)
	s.note(err)
	return out, err
}

func (s *flushSink) Patch(event *corev1.Event, data []byte) (*corev1.Event, error) {
	out, err := s.EventSink.Patch(event, data)
	s.note(err)
	return out, err
}

func (s *flushSink) expect(name string) <-chan struct{} {
	done := make(chan struct{})
	s.mu.Lock()
	s.waiting[name] = done
	s.mu.Unlock()
	return done
}

func (s *flushSink) forget(name string) {
	s.mu.Lock()
	delete(s.waiting, name)
	s.mu.Unlock()
}

func (s *flushSink) Create(event *corev1.Event) (*corev1.Event, error) {
	if event.InvolvedObject.Kind != flushKind {
		out, err := s.EventSink.Create(event)
		s.note(err)
		return out, err
	}
	s.mu.Lock()
	if done, ok := s.waiting[event.InvolvedObject.Name]; ok {
		close(done)
		delete(s.waiting, event.InvolvedObject.Name)
	}
	s.mu.Unlock()
	return event, nil
}
