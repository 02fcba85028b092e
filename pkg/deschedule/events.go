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
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
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
	return &EventClient{kube: kube, scheme: daemon.EventScheme(), component: component, now: time.Now}
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
