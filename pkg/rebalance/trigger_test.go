package rebalance

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

func TestIsFailedTest(t *testing.T) {
	// What the API server answers when a JSON patch test fails.
	failedTest := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "",
		"testing value /spec/rescheduleTriggeredAt failed: test failed", 0, false)
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "failed test", err: failedTest, want: true},
		{name: "wrapped", err: fmt.Errorf("patch: %w", failedTest), want: true},
		{name: "any unprocessable patch", err: apierrors.NewInvalid(schema.GroupKind{Kind: "ResourceBinding"}, "x", nil), want: true},
		{name: "conflict", err: apierrors.NewConflict(schema.GroupResource{Resource: "resourcebindings"}, "x", errors.New("changed"))},
		{name: "bad request", err: apierrors.NewBadRequest("bad patch")},
		{name: "not an API error", err: errors.New("testing value")},
		{name: "nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, isFailedTest(tt.err))
		})
	}
}
