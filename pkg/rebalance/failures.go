package rebalance

import (
	"context"
	"time"

	karmadaevents "github.com/karmada-io/karmada/pkg/events"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// FailureEvents reads what the scheduler reported about failed attempts to
// schedule a binding. A binding that keeps failing the same way keeps its
// Scheduled condition untouched, so only the scheduler's Warning events tell
// that it tried again after a trigger.
type FailureEvents interface {
	// LastFailure returns when the scheduler last reported failing to
	// schedule b and what it said; the zero time when no such report is left.
	LastFailure(ctx context.Context, b *Binding) (time.Time, string, error)
}

// NewFailureEvents returns FailureEvents backed by the core/v1 Events of the
// Karmada apiserver, where karmada-scheduler records them.
func NewFailureEvents(client kubernetes.Interface) FailureEvents {
	return &eventsAPI{client: client}
}

type eventsAPI struct {
	client kubernetes.Interface
}

func (a *eventsAPI) LastFailure(ctx context.Context, b *Binding) (time.Time, string, error) {
	// The events of cluster-scoped objects are kept in the default namespace.
	namespace := b.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	selector := fields.Set{
		"involvedObject.uid": string(b.UID),
		"reason":             karmadaevents.EventReasonScheduleBindingFailed,
	}.AsSelector().String()
	list, err := a.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return time.Time{}, "", err
	}
	var last time.Time
	var message string
	for i := range list.Items {
		if at := lastSeen(&list.Items[i]); at.After(last) {
			last, message = at, list.Items[i].Message
		}
	}
	return last, message, nil
}

// lastSeen is the latest time an event, possibly repeated, was reported:
// the legacy recorder counts repeats in lastTimestamp, the events.k8s.io
// one in series.lastObservedTime.
func lastSeen(ev *corev1.Event) time.Time {
	latest := ev.LastTimestamp.Time
	for _, t := range []time.Time{ev.FirstTimestamp.Time, ev.EventTime.Time} {
		if t.After(latest) {
			latest = t
		}
	}
	if ev.Series != nil && ev.Series.LastObservedTime.After(latest) {
		latest = ev.Series.LastObservedTime.Time
	}
	return latest
}

// failureAnswersTrigger reports whether a failure reported at failedAt is
// the scheduler's answer to a trigger at at. Events carry whole seconds,
// like the Scheduled condition, so a report in the trigger's own second
// counts, as a condition that turned False in that second does.
func failureAnswersTrigger(failedAt time.Time, at metav1.Time) bool {
	return !failedAt.IsZero() && !truncate(failedAt).Before(truncate(at.Time))
}
