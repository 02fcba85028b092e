package run

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
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

// stubOneWrite is the one-write move of a make-before-break mover in
// TestMadeBeforeBreakMovesGetTheAffinityWarning: it triggers nothing.
type stubOneWrite struct{}

func (stubOneWrite) Move(_ context.Context, t rebalance.Target, _ func(rebalance.Row)) (rebalance.Row, error) {
	return rebalance.Row{Workload: t.Workload, Binding: rebalance.BindingNameFor(t.Workload)}, nil
}

// TestMadeBeforeBreakMovesGetTheAffinityWarning: a workload placed by a
// later clusterAffinities group gets the same warning whether it moves in
// one write or through the make-before-break mover, which reads its
// binding itself (a plain run, a waved one, a recorded one).
func TestMadeBeforeBreakMovesGetTheAffinityWarning(t *testing.T) {
	const want = `warning: binding ns/web-deployment was placed by its clusterAffinities group "backup", not the first group "primary": `
	web := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "web"}}
	for _, shape := range []string{"all at once", "waves"} {
		t.Run(shape, func(t *testing.T) {
			grouped := groupedBinding("backup")
			rb := &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-deployment"}, Spec: grouped.Spec, Status: grouped.Status}
			client := karmadafake.NewSimpleClientset(rb)
			e := &Engine{Karmada: client, Clock: rebalance.NewServerClock(),
				Release: func() (karmadaversion.Info, error) {
					return karmadaversion.Info{Oldest: karmadaversion.Release{Minor: 18}, Newest: karmadaversion.Release{Minor: 18}, Evidence: "evidence"}, nil
				}}
			mover := &handover.Mover{Karmada: client, Clock: e.Clock, Budget: handover.DefaultBudget(), OneWrite: stubOneWrite{}}
			req := Request{Targets: []rebalance.Target{web}, DryRun: rebalance.DryRunNone, Workers: 1, Deadline: time.Now().Add(time.Minute), Mover: mover}
			if shape == "waves" {
				req.Waves = &Waves{Options: waves.Options{MaxInFlight: 1}, Mover: mover}
			}
			var notices []string
			req.Hooks.Notice = func(s string) { notices = append(notices, s) }
			_, err := e.Run(context.Background(), req)
			require.NoError(t, err)
			require.Len(t, notices, 1, "%q", notices)
			assert.Contains(t, notices[0], want+"this control plane runs Karmada v1.18 (evidence)")
		})
	}
}
