package handover

import (
	"fmt"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// phaseBinding is the seed's binding ({member2:3}) as a move owned by
// owner leaves it in phase, with the deadline at deadline.
func phaseBinding(phase Phase, owner string, deadline time.Time) *workv1alpha2.ResourceBinding {
	last := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := Ledger{Phase: phase, Owner: owner, Replicas: 3, Original: tc("member2", 3), Target: tc("member1", 1, "member2", 2),
		LastScheduled: &last, Deadline: &metav1.Time{Time: deadline}}
	switch phase {
	case PhaseHeld:
		l.Staged = tc("member2", 3)
	case PhaseStaging:
		l.Staged = tc("member1", 1, "member2", 3)
	case PhaseSettling:
		l.Staged = tc("member1", 1, "member2", 2)
	}
	raw, _ := jsonLedger(l)
	return &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-deployment", Annotations: map[string]string{LedgerAnnotation: raw}},
		Spec: workv1alpha2.ResourceBindingSpec{Replicas: 3, Clusters: l.Staged,
			Suspension: &workv1alpha2.Suspension{Scheduling: ptr.To(true)}},
		Status: workv1alpha2.ResourceBindingStatus{LastScheduledTime: &last},
	}
}

// TestDecide is the recovery table: every phase a ledger records against
// every event a move may meet. The action is what recovery does; "" means
// the event cannot change what recovery does from that phase.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	const self, other = "self-host/1/aaa", "other-host/2/bbb"
	type event struct {
		name  string
		owner string
		// deadline is relative to now.
		deadline time.Duration
		edit     func(*workv1alpha2.ResourceBinding)
	}
	events := []event{
		{name: "the owner itself stops (Ctrl-C, SIGTERM, its deadline)", owner: self, deadline: time.Minute},
		{name: "another live process owns it", owner: other, deadline: time.Minute},
		{name: "the owner died and the deadline passed (SIGKILL, a lost Lease)", owner: other, deadline: -time.Second},
		{name: "Karmada evicts from a failing cluster", owner: other, deadline: time.Minute, edit: func(b *workv1alpha2.ResourceBinding) {
			b.Spec.GracefulEvictionTasks = []workv1alpha2.GracefulEvictionTask{{FromCluster: "member2"}}
			var kept []workv1alpha2.TargetCluster
			for _, c := range b.Spec.Clusters {
				if c.Name != "member2" {
					kept = append(kept, c)
				}
			}
			b.Spec.Clusters = kept
		}},
		{name: "the replicas change (HPA, a person)", owner: other, deadline: time.Minute, edit: func(b *workv1alpha2.ResourceBinding) {
			b.Spec.Replicas = 5
		}},
		{name: "someone lifts the suspension", owner: other, deadline: time.Minute, edit: func(b *workv1alpha2.ResourceBinding) {
			b.Spec.Suspension.Scheduling = nil
		}},
		{name: "a policy suspends dispatching", owner: self, deadline: time.Minute, edit: func(b *workv1alpha2.ResourceBinding) {
			b.Spec.Suspension.Dispatching = ptr.To(true)
		}},
		{name: "the scheduler acted on a binding queued before the hold", owner: other, deadline: time.Minute, edit: func(b *workv1alpha2.ResourceBinding) {
			b.Status.LastScheduledTime = &metav1.Time{Time: now}
		}},
		{name: "the binding is being deleted", owner: other, deadline: time.Minute, edit: func(b *workv1alpha2.ResourceBinding) {
			b.DeletionTimestamp = &metav1.Time{Time: now}
		}},
		{name: "the ledger does not parse", owner: other, deadline: time.Minute, edit: func(b *workv1alpha2.ResourceBinding) {
			b.Annotations[LedgerAnnotation] = "{"
		}},
	}
	want := map[Phase][]Action{
		//            self         other live  expired      evicted      scaled       lifted       dispatching  scheduled    deleting     unreadable
		PhaseHeld:     {ActionUndo, ActionWait, ActionUndo, ActionLetGo, ActionLetGo, ActionLetGo, ActionUndo, ActionLetGo, ActionLetGo, ActionLetGo},
		PhaseStaging:  {ActionUndo, ActionWait, ActionUndo, ActionLetGo, ActionLetGo, ActionLetGo, ActionUndo, ActionLetGo, ActionLetGo, ActionLetGo},
		PhaseSettling: {ActionLetGo, ActionWait, ActionLetGo, ActionLetGo, ActionLetGo, ActionLetGo, ActionLetGo, ActionLetGo, ActionLetGo, ActionLetGo},
	}
	wantReason := map[Phase][]string{
		PhaseHeld:     {ReasonHoldNotTaken, ReasonInFlight, ReasonHoldNotTaken, ReasonPlacementChanged, ReasonReplicasChanged, ReasonSuspensionLifted, ReasonHoldNotTaken, ReasonScheduledMeanwhile, ReasonBindingDeleting, ReasonUnreadableLedger},
		PhaseStaging:  {ReasonOnlyStaged, ReasonInFlight, ReasonOnlyStaged, ReasonPlacementChanged, ReasonReplicasChanged, ReasonSuspensionLifted, ReasonOnlyStaged, ReasonScheduledMeanwhile, ReasonBindingDeleting, ReasonUnreadableLedger},
		PhaseSettling: {ReasonTookOver, ReasonInFlight, ReasonTookOver, ReasonPlacementChanged, ReasonReplicasChanged, ReasonSuspensionLifted, ReasonTookOver, ReasonScheduledMeanwhile, ReasonBindingDeleting, ReasonUnreadableLedger},
	}
	for _, phase := range []Phase{PhaseHeld, PhaseStaging, PhaseSettling} {
		for i, ev := range events {
			t.Run(fmt.Sprintf("%s/%s", phase, ev.name), func(t *testing.T) {
				b := phaseBinding(phase, ev.owner, now.Add(ev.deadline))
				if ev.edit != nil {
					ev.edit(b)
				}
				d := Decide(b, now, self)
				assert.Equal(t, want[phase][i], d.Action, d.Message)
				assert.Equal(t, wantReason[phase][i], d.Reason, d.Message)
				assert.NotEmpty(t, d.Message)
			})
		}
	}
}

// TestDecideStagingPastTheOriginal: a staging step that already shrank a
// cluster below its original count (a surge budget smaller than the gain)
// is never undone: putting the original back would stop ready replicas.
func TestDecideStagingPastTheOriginal(t *testing.T) {
	now := time.Now()
	b := phaseBinding(PhaseStaging, "x", now.Add(-time.Second))
	l, _ := ReadLedger(b)
	l.Staged = tc("member1", 2, "member2", 2)
	raw, _ := jsonLedger(*l)
	b.Annotations[LedgerAnnotation] = raw
	b.Spec.Clusters = l.Staged
	d := Decide(b, now, "self")
	assert.Equal(t, ActionLetGo, d.Action)
	assert.Equal(t, ReasonTookOver, d.Reason)
}

// TestDecideOlderLedgers reads ledgers an older release wrote (no phase,
// owner, staged placement or deadline): a hold is undone, a move undone
// while it covers the original, let go otherwise.
func TestDecideOlderLedgers(t *testing.T) {
	hold := &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{LedgerAnnotation: `{"original":[{"name":"member2","replicas":3}],"hold":true,"started":null}`}},
		Spec:       workv1alpha2.ResourceBindingSpec{Replicas: 3, Clusters: tc("member2", 3), Suspension: &workv1alpha2.Suspension{Scheduling: ptr.To(true)}},
	}
	assert.Equal(t, ActionUndo, Decide(hold, time.Now(), "me").Action)
	move := hold.DeepCopy()
	move.Annotations[LedgerAnnotation] = `{"original":[{"name":"member2","replicas":3}],"started":null}`
	move.Spec.Clusters = tc("member1", 1, "member2", 3)
	assert.Equal(t, ActionUndo, Decide(move, time.Now(), "me").Action)
	move.Spec.Clusters = tc("member1", 1, "member2", 2)
	assert.Equal(t, ActionLetGo, Decide(move, time.Now(), "me").Action)
	none := &workv1alpha2.ResourceBinding{}
	assert.Equal(t, ActionNone, Decide(none, time.Now(), "me").Action)
}
