package rebalance

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NeedsTrigger reports whether a binding whose spec.rescheduleTriggeredAt is
// current must be written to carry the trigger at: only when it holds no time
// or an earlier one. Both times are compared at the one-second precision the
// API server stores, so a later instant within the same second adds nothing.
func NeedsTrigger(current *metav1.Time, at metav1.Time) bool {
	if current == nil {
		return true
	}
	return truncate(at.Time).After(truncate(current.Time))
}

// truncate drops what the API server would not store of a timestamp.
func truncate(t time.Time) time.Time {
	return t.Truncate(time.Second)
}
