package run

import (
	"bytes"
	"context"
	"errors"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// oneBinding answers every read with the same binding and every trigger
// write with what it holds.
type oneBinding struct {
	rebalance.BindingAPI
	b *rebalance.Binding
}

func (o oneBinding) Get(context.Context, string, string) (*rebalance.Binding, error) { return o.b, nil }
func (o oneBinding) PatchTrigger(context.Context, rebalance.TriggerWrite) (*rebalance.Binding, error) {
	return o.b, nil
}

func groupedBinding(observed string) *rebalance.Binding {
	return &rebalance.Binding{Namespace: "ns", Name: "web-deployment",
		Spec: workv1alpha2.ResourceBindingSpec{Placement: &policyv1alpha1.Placement{ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
			{AffinityName: "primary"}, {AffinityName: "backup"},
		}}},
		Status: workv1alpha2.ResourceBindingStatus{SchedulerObservedAffinityName: observed},
	}
}

func TestAffinityNotes(t *testing.T) {
	release := func(oldest, newest int) func() (karmadaversion.Info, error) {
		return func() (karmadaversion.Info, error) {
			return karmadaversion.Info{Oldest: karmadaversion.Release{Minor: oldest}, Newest: karmadaversion.Release{Minor: newest}, Evidence: "evidence"}, nil
		}
	}
	const prefix = `warning: binding ns/web-deployment was placed by its clusterAffinities group "backup", not the first group "primary": `
	tests := []struct {
		name     string
		observed string
		detect   func() (karmadaversion.Info, error)
		want     string
	}{
		{"first group: nothing to say", "primary", release(18, 18), ""},
		{"v1.18 keeps the group", "backup", release(18, 18),
			prefix + `this control plane runs Karmada v1.18 (evidence), which reschedules from the group a workload is in, so this rebalance keeps it in "backup" and cannot bring it back to "primary" (Karmada v1.19 changed that, karmada#5425)` + "\n"},
		{"v1.19 starts again", "backup", release(19, 0),
			prefix + `this control plane runs Karmada v1.19 or newer (evidence), which reschedules from the first group, so this rebalance may have moved it back to "primary"` + "\n"},
		{"release unknown", "backup", func() (karmadaversion.Info, error) { return karmadaversion.Info{}, errors.New("forbidden") },
			prefix + `Karmada v1.19 and newer reschedule from the first group and may move it back to "primary", v1.18 and older keep it in "backup"; the Karmada release could not be told (forbidden)` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notes := newAffinityNotes(oneBinding{b: groupedBinding(tt.observed)})
			_, err := notes.Get(context.Background(), "ns", "web-deployment")
			require.NoError(t, err)
			var out bytes.Buffer
			detected := false
			notes.report(func(line string) { out.WriteString(line + "\n") }, func() (karmadaversion.Info, error) { detected = true; return tt.detect() })
			assert.Equal(t, tt.want, out.String())
			assert.Equal(t, tt.want != "", detected, "the release is asked only when it matters")
		})
	}
}

func TestDroppedTrigger(t *testing.T) {
	b := groupedBinding("")
	notes := newAffinityNotes(oneBinding{b: b})
	_, err := notes.PatchTrigger(context.Background(), rebalance.TriggerWrite{Namespace: "ns", Name: "web-deployment"})
	require.True(t, apierrors.IsBadRequest(err))
	assert.EqualError(t, err, "the API server kept no spec.rescheduleTriggeredAt on binding ns/web-deployment: its ResourceBinding has no such field, "+
		"so this control plane runs a Karmada older than v1.10, which cannot reschedule on request; kubectl rebalance supports Karmada v1.12 and newer")

	now := metav1.Now()
	b.Spec.RescheduleTriggeredAt = &now
	got, err := notes.PatchTrigger(context.Background(), rebalance.TriggerWrite{Namespace: "ns", Name: "web-deployment"})
	require.NoError(t, err)
	assert.Same(t, b, got)
}
