package rebalance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestNeedsTrigger(t *testing.T) {
	at := metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 10, 0, time.UTC))
	tests := []struct {
		name    string
		current *metav1.Time
		at      metav1.Time
		want    bool
	}{
		{name: "no trigger yet", current: nil, at: at, want: true},
		{name: "older trigger", current: ptr.To(metav1.NewTime(at.Add(-time.Second))), at: at, want: true},
		{name: "same trigger", current: ptr.To(at), at: at, want: false},
		{name: "newer trigger", current: ptr.To(metav1.NewTime(at.Add(time.Second))), at: at, want: false},
		{name: "later instant in the same second", current: ptr.To(at), at: metav1.NewTime(at.Add(500 * time.Millisecond)), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, NeedsTrigger(tt.current, tt.at))
		})
	}
}
