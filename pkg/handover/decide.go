package handover

import (
	"fmt"
	"slices"
	"strings"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Action is what recovery does with a binding that carries a ledger.
type Action string

const (
	// ActionNone: the binding carries no ledger; nothing of ours is there.
	ActionNone Action = ""
	// ActionWait: another live process moves the binding (its owner is
	// not the caller and its deadline has not passed): leave it alone.
	ActionWait Action = "Wait"
	// ActionUndo: put the placement before the move back, lift the
	// suspension and drop the ledger. Only while the original replicas
	// still run (held, or staging with every cluster at least at its
	// original count): the undo then stops only replicas the move added.
	ActionUndo Action = "Undo"
	// ActionLetGo: lift the move's suspension and drop the ledger, and
	// leave spec.clusters as it is: someone else changed the binding
	// (Karmada evicting, a person scaling), or the new replicas have taken
	// over and putting the old placement back would stop them.
	ActionLetGo Action = "LetGo"
)

// Reasons of a Decision, in CamelCase as Kubernetes reasons are.
const (
	ReasonNoLedger           = "NoLedger"
	ReasonUnreadableLedger   = "UnreadableLedger"
	ReasonBindingDeleting    = "BindingDeleting"
	ReasonSuspensionLifted   = "SuspensionLifted"
	ReasonReplicasChanged    = "ReplicasChanged"
	ReasonPlacementChanged   = "PlacementChanged"
	ReasonScheduledMeanwhile = "ScheduledMeanwhile"
	ReasonInFlight           = "InFlight"
	ReasonHoldNotTaken       = "HoldNotTaken"
	ReasonOnlyStaged         = "OnlyStaged"
	ReasonTookOver           = "NewReplicasTookOver"
)

// Decision is what recovery does with one binding, and why.
type Decision struct {
	Action Action
	// Reason is one of the Reason constants; Message says it in words.
	Reason, Message string
	// Phase is the ledger's phase ("" without a ledger).
	Phase Phase
	// Expired is set when the ledger's deadline has passed.
	Expired bool
}

// Decide is the step function of a move's recovery: from the binding as
// read, the ledger it carries, the time now (server time) and the caller's
// owner name, what to do with it. It reads nothing and writes nothing; the
// same observation always gives the same decision. The order of the rules
// is what keeps a move never worse than the one write it replaces:
//
//  1. a binding whose replicas or placement someone else changed is let
//     go whoever owns it, so that Karmada schedules it again at once (an
//     eviction from a failing cluster gets its replacement);
//  2. a live owner's move (another owner, deadline not passed) is left to
//     that owner;
//  3. a hold, or a staging that still covers the original placement, is
//     undone (only the added replicas stop);
//  4. anything past that - the settle write made, the losing clusters
//     scaling down - is let go with the new placement kept: never
//     restored, so the new replicas are never stopped to restart the old.
func Decide(b *workv1alpha2.ResourceBinding, now time.Time, self string) Decision {
	l, err := ReadLedger(b)
	switch {
	case err != nil:
		return Decision{Action: ActionLetGo, Reason: ReasonUnreadableLedger,
			Message: err.Error() + ": the suspension is lifted and the placement left to Karmada"}
	case l == nil:
		return Decision{Reason: ReasonNoLedger}
	}
	d := Decision{Phase: l.CurrentPhase(), Expired: l.Deadline != nil && !now.Before(l.Deadline.Time)}
	letGo := func(reason, msg string) Decision {
		d.Action, d.Reason, d.Message = ActionLetGo, reason, msg
		return d
	}
	switch {
	case b.DeletionTimestamp != nil:
		return letGo(ReasonBindingDeleting, "the binding is being deleted")
	case !b.Spec.SchedulingSuspended():
		return letGo(ReasonSuspensionLifted, "someone else lifted the suspension; only the ledger is left to drop")
	case l.Replicas > 0 && b.Spec.Replicas != l.Replicas:
		return letGo(ReasonReplicasChanged, fmt.Sprintf("the workload was scaled from %d to %d replicas during the move; Karmada places them", l.Replicas, b.Spec.Replicas))
	}
	if staged := l.Staged; staged != nil || d.Phase == PhaseHeld {
		if staged == nil {
			staged = l.Original
		}
		if !toPlacement(b.Spec.Clusters).equal(toPlacement(staged)) {
			return letGo(ReasonPlacementChanged, placementChangedMessage(b, staged))
		}
	}
	if l.LastScheduled != nil && b.Status.LastScheduledTime != nil && b.Status.LastScheduledTime.After(l.LastScheduled.Time) {
		return letGo(ReasonScheduledMeanwhile, "karmada-scheduler scheduled the binding after it was suspended; its placement is kept")
	}
	if l.Owner != "" && l.Owner != self && !d.Expired {
		d.Action, d.Reason = ActionWait, ReasonInFlight
		d.Message = fmt.Sprintf("moved by %s (%s)", l.Owner, d.Phase)
		if l.Deadline != nil {
			d.Message += fmt.Sprintf(" until %s", l.Deadline.UTC().Format(time.RFC3339))
		}
		return d
	}
	switch d.Phase {
	case PhaseHeld:
		d.Action, d.Reason, d.Message = ActionUndo, ReasonHoldNotTaken, "held ahead of a move that never started: the hold is lifted, placement unchanged"
		return d
	case PhaseStaging:
		if covers(toPlacement(b.Spec.Clusters), toPlacement(l.Original)) {
			d.Action, d.Reason, d.Message = ActionUndo, ReasonOnlyStaged, "only the added replicas had started: they are removed and the placement before the move is back"
			return d
		}
	}
	return letGo(ReasonTookOver, fmt.Sprintf("the new replicas had taken over (%s): the placement is kept and the binding's scheduling resumed",
		rebalance.FormatPlacement(b.Spec.Clusters)))
}

// covers reports whether every cluster of original has at least as many
// replicas in p.
func covers(p, original placement) bool {
	for name, n := range original.replicas {
		if p.get(name) < n {
			return false
		}
	}
	return true
}

func placementChangedMessage(b *workv1alpha2.ResourceBinding, staged clusters) string {
	msg := fmt.Sprintf("the placement changed during the move (staged %s, now %s)", rebalance.FormatPlacement(staged), rebalance.FormatPlacement(b.Spec.Clusters))
	var from []string
	for _, task := range b.Spec.GracefulEvictionTasks {
		if !slices.Contains(from, task.FromCluster) {
			from = append(from, task.FromCluster)
		}
	}
	if len(from) > 0 {
		msg += ": Karmada is evicting it from " + strings.Join(from, ", ")
	}
	return msg + "; the suspension is lifted and Karmada's placement kept"
}
