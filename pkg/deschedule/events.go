package deschedule

import (
	"context"
	"fmt"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaevents "github.com/karmada-io/karmada/pkg/events"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
)

// EventComponent is the event source component of this descheduler. The
// original uses "karmada-descheduler"; a distinct name keeps the two apart
// when both run against one control plane.
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
// Pass it to record.EventBroadcaster.NewRecorder when using RecorderEvents.
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

type recorderEvents struct{ recorder record.EventRecorder }

// RecorderEvents adapts a client-go EventRecorder. Events then go through
// client-go's aggregation and spam filter, like the original's, and are
// written in the background: this suits a long-running process that shuts
// its broadcaster down on exit.
func RecorderEvents(recorder record.EventRecorder) EventWriter {
	return recorderEvents{recorder: recorder}
}

func (r recorderEvents) WriteEvent(_ context.Context, object runtime.Object, eventType, reason, message string) error {
	r.recorder.Event(object, eventType, reason, message)
	return nil
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
