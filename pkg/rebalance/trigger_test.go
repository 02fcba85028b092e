package rebalance

import (
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/util/validation/field"
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
		{name: "as client-go decodes it", err: decodedStatus(t, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",`+
			`"message":"the server rejected our request due to an error in our request","reason":"Invalid","details":{},"code":422}`), want: true},
		{name: "the schema refused the value", err: apierrors.NewInvalid(schema.GroupKind{Group: "work.karmada.io", Kind: "ResourceBinding"}, "x",
			field.ErrorList{field.Invalid(field.NewPath("spec", "rescheduleTriggeredAt"), "yesterday", "must be a date-time")})},
		{name: "invalid without causes", err: apierrors.NewInvalid(schema.GroupKind{Group: "work.karmada.io", Kind: "ResourceBinding"}, "x", nil)},
		{name: "a webhook's 422", err: decodedStatus(t, `{"kind":"Status","apiVersion":"v1","status":"Failure",`+
			`"message":"admission webhook \"validator.example.io\" denied the request: no triggers on Fridays","reason":"Invalid","code":422}`)},
		{name: "422 of unknown reason", err: decodedStatus(t, `{"kind":"Status","apiVersion":"v1","status":"Failure",`+
			`"message":"the server rejected our request due to an error in our request","code":422}`)},
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

// decodedStatus is the error client-go makes of a Status the server sent.
func decodedStatus(t *testing.T, body string) error {
	t.Helper()
	var status metav1.Status
	require.NoError(t, json.Unmarshal([]byte(body), &status))
	return apierrors.FromObject(&status)
}
