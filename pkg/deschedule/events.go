package deschedule

import (
	"context"
	"fmt"
	"sync"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaevents "github.com/karmada-io/karmada/pkg/events"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
)

// EventComponent is the event source component (and reporting controller)
// of this descheduler. It is deliberately not karmada-descheduler's
// ("karmada-descheduler"): an event says which program changed the binding,
// and during a takeover (--force) or a manual pass both may act on one
// control plane. The reasons are karmada-descheduler's, so alerts keyed on
// them keep working; select on the source to tell the two apart.
const EventComponent = "kubectl-rebalance-deschedule"

// Event reasons, the same as karmada-descheduler's so that existing alerts
// and dashboards keep working.
const (
	ReasonDescheduleSucceed = karmadaevents.EventReasonDescheduleBindingSucceed
	ReasonDescheduleFailed  = karmadaevents.EventReasonDescheduleBindingFailed
)

// EventWriter records one event about an object. Implementations may be
// asynchronous, in which case they return nil.
type EventWriter interface {
	WriteEvent(ctx context.Context, object runtime.Object, eventType, reason, message string) error
}

// EventScheme knows the Karmada binding types, so that events can name a
// ResourceBinding whose TypeMeta is empty (as typed clients return them).
// EventRecorder passes it to its broadcaster's recorder.
func EventScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	// Both installers only fail on programming errors in generated code.
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := workv1alpha2.Install(scheme); err != nil {
		panic(err)
	}
	return scheme
}

// EventRecorder records events through client-go's event broadcaster, as
// Kubernetes components do: repeated events are aggregated and counted,
// floods about one object are rate-limited, and events are written in the
// background with client-go's retries. Flush waits for the writes, so that a
// daemon that stops does not lose the events of its last pass.
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
	// not cancel the writes that Flush waits for.
	broadcaster := record.NewBroadcaster(record.WithContext(context.Background()))
	broadcaster.StartRecordingToSink(sink)
	return &EventRecorder{
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(EventScheme(), corev1.EventSource{Component: component, Host: host}),
		sink:        sink,
	}
}

// WriteEvent implements EventWriter; the event is written in the background.
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
		return s.EventSink.Create(event)
	}
	s.mu.Lock()
	if done, ok := s.waiting[event.InvolvedObject.Name]; ok {
		close(done)
		delete(s.waiting, event.InvolvedObject.Name)
	}
	s.mu.Unlock()
	return event, nil
}

// EventClient writes core/v1 Events synchronously, one Create per event, so
// that a one-shot command knows they are stored before it exits and can
// report the ones that were refused.
type EventClient struct {
	// Host is the event source host and reporting instance, for example
	// the pod or machine name; it may be empty.
	Host string

	kube      kubernetes.Interface
	scheme    *runtime.Scheme
	component string
	now       func() time.Time
}

// NewEventClient returns an EventClient writing through kube as component.
func NewEventClient(kube kubernetes.Interface, component string) *EventClient {
	return &EventClient{kube: kube, scheme: EventScheme(), component: component, now: time.Now}
}

// WriteEvent implements EventWriter.
func (c *EventClient) WriteEvent(ctx context.Context, object runtime.Object, eventType, reason, message string) error {
	ref, err := reference.GetReference(c.scheme, object)
	if err != nil {
		return fmt.Errorf("cannot name the object of event %s: %w", reason, err)
	}
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	t := metav1.NewTime(c.now())
	event := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      util.GenerateEventName(ref.Name, t.UnixNano()),
			Namespace: namespace,
		},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                eventType,
		Source:              corev1.EventSource{Component: c.component, Host: c.Host},
		ReportingController: c.component,
		ReportingInstance:   c.Host,
	}
	if _, err := c.kube.CoreV1().Events(namespace).Create(ctx, event, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cannot record event %s on %s %s/%s, check that you may create events in namespace %s: %w",
			reason, ref.Kind, ref.Namespace, ref.Name, namespace, err)
	}
	return nil
}

// templateReference points at the resource template of rb, which carries
// the same events as the binding so that users see them on their Deployment.
func templateReference(rb *workv1alpha2.ResourceBinding) *corev1.ObjectReference {
	r := rb.Spec.Resource
	return &corev1.ObjectReference{
		APIVersion: r.APIVersion,
		Kind:       r.Kind,
		Namespace:  r.Namespace,
		Name:       r.Name,
		UID:        r.UID,
	}
}
