package rebalance

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HandoverHead is the part of a make-before-break move's ledger
// (HandoverAnnotation) that commands other than the move show: its phase,
// who moves it, since when and until when. Package handover owns the
// ledger and writes it whole; this reads only these fields of it, so that
// packages below handover (predict) can tell a held binding's state.
type HandoverHead struct {
	Phase    string       `json:"phase,omitempty"`
	Hold     bool         `json:"hold,omitempty"`
	Owner    string       `json:"owner,omitempty"`
	Started  metav1.Time  `json:"started"`
	Deadline *metav1.Time `json:"deadline,omitempty"`
}

// ReadHandoverHead reads the ledger's head from a binding's annotations;
// false when there is none or it cannot be read.
func ReadHandoverHead(annotations map[string]string) (HandoverHead, bool) {
	raw, ok := annotations[HandoverAnnotation]
	if !ok {
		return HandoverHead{}, false
	}
	var h HandoverHead
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		return HandoverHead{}, false
	}
	if h.Phase == "" {
		// A ledger written before phases were recorded.
		h.Phase = "Staging"
		if h.Hold {
			h.Phase = "Held"
		}
	}
	return h, true
}

// Describe says the move's phase, owner, age and deadline as of now, for
// example "phase Staging, owner host/123/ab12, started 3m ago, deadline
// in 7m".
func (h HandoverHead) Describe(now time.Time) string {
	parts := []string{"phase " + h.Phase}
	if h.Owner != "" {
		parts = append(parts, "owner "+h.Owner)
	}
	if !h.Started.IsZero() {
		parts = append(parts, "started "+duration.HumanDuration(now.Sub(h.Started.Time))+" ago")
	}
	if h.Deadline != nil {
		if left := h.Deadline.Sub(now); left > 0 {
			parts = append(parts, "deadline in "+duration.HumanDuration(left))
		} else {
			parts = append(parts, fmt.Sprintf("deadline passed %s ago", duration.HumanDuration(-left)))
		}
	}
	return strings.Join(parts, ", ")
}
