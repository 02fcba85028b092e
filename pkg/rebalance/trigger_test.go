package rebalance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestTriggerPatch(t *testing.T) {
	at := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 1, 0, time.FixedZone("CEST", 2*3600)))
	older := metav1.NewTime(time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC))
	tests := []struct {
		name     string
		write    TriggerWrite
		wantType types.PatchType
		want     string
	}{
		{
			name:     "no trigger yet",
			write:    TriggerWrite{At: at},
			wantType: types.JSONPatchType,
			want:     `[{"op":"test","path":"/spec/rescheduleTriggeredAt","value":null},{"op":"add","path":"/spec/rescheduleTriggeredAt","value":"2024-05-01T08:00:01Z"}]`,
		},
		{
			name:     "an older trigger",
			write:    TriggerWrite{At: at, Expected: &older},
			wantType: types.JSONPatchType,
			want:     `[{"op":"test","path":"/spec/rescheduleTriggeredAt","value":"2024-05-01T08:00:00Z"},{"op":"add","path":"/spec/rescheduleTriggeredAt","value":"2024-05-01T08:00:01Z"}]`,
		},
		{
			name:     "guarded by the resource version",
			write:    TriggerWrite{At: at, Expected: ptr.To(older), ResourceVersion: "42"},
			wantType: types.MergePatchType,
			want:     `{"metadata":{"resourceVersion":"42"},"spec":{"rescheduleTriggeredAt":"2024-05-01T08:00:01Z"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patchType, data, err := TriggerPatch(tt.write)
			require.NoError(t, err)
			assert.Equal(t, tt.wantType, patchType)
			assert.JSONEq(t, tt.want, string(data))
		})
	}
}
