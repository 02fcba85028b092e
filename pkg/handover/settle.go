package handover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Why a move settles before it releases.
//
// karmada-scheduler's fresh reschedule weighs each cluster by what its
// estimators answer at that moment plus the replicas spec.clusters gives it
// then. Released straight from the staged placement, the binding's write of
// the prediction starts stopping the surplus replicas at the moment the
// scheduler asks the estimators: whether a member's estimator still counts
// a stopping pod is a race, and so is the scheduler's answer (measured in
// CI on the seed's move back: {member1:2, member2:1} against the predicted
// {member1:1, member2:2}). And when its answer differs from spec.clusters,
// the scheduler writes it, takes the binding up again for that write and may
// decide a second time from the first decision (counting it twice where
// SchedulingOvercommitProtection is on) - each write stopping replicas the
// next one wants.
//
// So, while the binding is still suspended, the move puts the prediction
// in spec.clusters, waits until the members stopped the surplus and a new
// read agrees that the scheduler will choose exactly that placement, also
// once the pods still being deleted are gone and the resource summaries
// caught up (the Predictor says Unsettled until then), and only then
// releases. The scheduler's fresh pass then finds what spec.clusters
// already holds: it writes no placement, so nothing moves and nothing is
// decided twice.

// maxSettleRounds bounds how often a move stages again because a new read
// says the scheduler would now choose another placement.
const maxSettleRounds = 3

// agreeingReads is how many reads in a row must give the same other
// placement before the move takes it for the scheduler's new answer rather
// than for replicas still stopping.
const agreeingReads = 3

// settle brings the suspended binding to the placement the scheduler will
// choose before the release (see above). It does nothing without a
// Recheck or for a prediction that lists several releases' placements; when
// it cannot settle it leaves a note and the move releases as before.
func (h *handover) settle(ctx context.Context, row *rebalance.Row) error {
	if h.m.Recheck == nil || h.releaseDependent {
		return nil
	}
	if h.m.StagedRelease && h.m.Gate.moving() > 1 && h.staged.equal(h.cover) {
		// Other moves of the run staged from the same read and settle
		// now: each settle write frees room the scheduler's answer for
		// this workload may then follow, so no answer settled on now
		// would stay. Release from the whole staged placement instead:
		// whatever the scheduler chooses within it already runs.
		return h.releaseFromCover(ctx, row, "released from the staged placement: other moves of the run were changing the members' room")
	}
	// From the settle write on, the clusters that lose replicas stop them:
	// the ledger says so, and recovery never puts the old placement back.
	h.ledger.Phase = PhaseSettling
	for round := 0; round < maxSettleRounds; round++ {
		if !h.staged.equal(h.target) {
			if err := h.write(ctx, h.target, false); err != nil {
				return err
			}
		}
		if err := h.waitStopped(ctx); err != nil {
			return err
		}
		next, why, err := h.recheck(ctx)
		switch {
		case err != nil:
			return err
		case why != "":
			h.settleNote = "not settled before the release: " + why
			return nil
		case next == nil:
			// The last read and the release go in the release window: no
			// move of the run changes the members' room until the
			// scheduler answered (Gate).
			if err := h.enterGate(ctx, gateRelease); err != nil {
				return err
			}
			agrees, err := h.stillAgrees(ctx)
			if err != nil || agrees {
				h.settled = agrees
				return err
			}
			h.leaveGate()
			continue
		}
		if allCovered(next, h.cover) {
			// The scheduler would now choose another placement, but one
			// within what the move started: the workload's own settle (or
			// another move's) changed the room the answer depends on, and
			// settling again may only swing it back. Start the whole
			// staged placement again and release from there: whatever the
			// scheduler then chooses among those clusters already runs.
			return h.releaseFromCover(ctx, row, fmt.Sprintf("released from the staged placement: the scheduler's answer moved to %s as the members' room changed, within what was already running",
				rebalance.FormatPlacement(next[0])))
		}
		// The scheduler would now choose another placement: start what it
		// adds, wait until that is ready, and settle there.
		cover := toPlacement(Covering(h.target.clusters(), next...))
		if extra := cover.sum() - h.replicas; extra > h.limits.Surge {
			h.settleNote = fmt.Sprintf("not settled before the release: the scheduler would now choose %s, which needs %d replicas above the workload's count (--max-surge %d)",
				rebalance.FormatPlacement(next[0]), extra, h.limits.Surge)
			return nil
		}
		h.target = toPlacement(next[0])
		h.keep = keeping(next...)
		h.cover = toPlacement(Covering(h.cover.clusters(), cover.clusters()))
		if !cover.equal(h.staged) {
			if err := h.write(ctx, cover, false); err != nil {
				return err
			}
			h.steps++
		}
		if err := h.waitSafe(ctx, h.target, row); err != nil {
			return err
		}
	}
	h.settleNote = fmt.Sprintf("not settled before the release: the scheduler's answer kept changing over %d rounds", maxSettleRounds)
	return nil
}

// releaseFromCover stages the move's whole cover again, waits until every
// replica of it is ready, and makes the cover the placement the release
// writes (see settle).
func (h *handover) releaseFromCover(ctx context.Context, row *rebalance.Row, note string) error {
	if !h.cover.equal(h.staged) {
		if err := h.write(ctx, h.cover, false); err != nil {
			return err
		}
		h.steps++
	}
	// No other move's settle depends on this wait: in waves the next one
	// settles meanwhile (Mover.Serial), and this move takes its turn again
	// for the release.
	wasSerial := h.serialHeld
	h.unlock()
	if err := h.waitReady(ctx, h.cover, h.cover.sum(), row); err != nil {
		return err
	}
	if wasSerial {
		if err := h.lock(ctx); err != nil {
			return err
		}
	}
	h.target = h.cover
	h.fromCover = true
	h.settleNote = note
	return nil
}

// allCovered reports whether each of placements is within cover.
func allCovered(placements [][]workv1alpha2.TargetCluster, cover placement) bool {
	for _, p := range placements {
		if !covered(toPlacement(p), cover) {
			return false
		}
	}
	return true
}

func (h *handover) settleTimeout() time.Duration {
	if h.m.SettleTimeout > 0 {
		return h.m.SettleTimeout
	}
	return 30 * time.Second
}

// waitStopped follows the binding until no member reports more replicas
// than the staged placement gives it (the surplus stopped), or the settle
// timeout passed (the recheck then judges what it reads).
func (h *handover) waitStopped(ctx context.Context) error {
	waitCtx, cancel := context.WithTimeout(ctx, h.settleTimeout())
	defer cancel()
	var changed error
	_, err := h.api.follow(waitCtx, h.ns, h.name, func(b *workv1alpha2.ResourceBinding) bool {
		if changed = h.unchanged(b); changed != nil {
			return true
		}
		for name, n := range reportedReplicas(b.Status) {
			if n > h.staged.get(name) {
				return false
			}
		}
		return true
	})
	switch {
	case changed != nil:
		return changed
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil && !errors.Is(err, context.DeadlineExceeded) && waitCtx.Err() == nil:
		return fmt.Errorf("following %s: %w", rebalance.BindingRef(h.t.Workload), err)
	}
	return nil
}

// reportedReplicas reads, per cluster, the replicas the member object's
// status reports in the binding's aggregatedStatus (a Deployment's
// status.replicas: its pods that are not terminating). Clusters whose
// status reports none are absent.
func reportedReplicas(status workv1alpha2.ResourceBindingStatus) map[string]int32 {
	out := map[string]int32{}
	for _, item := range status.AggregatedStatus {
		if item.Status == nil || len(item.Status.Raw) == 0 {
			continue
		}
		var fields struct {
			Replicas *int32 `json:"replicas"`
		}
		if err := json.Unmarshal(item.Status.Raw, &fields); err != nil || fields.Replicas == nil {
			continue
		}
		out[item.ClusterName] = *fields.Replicas
	}
	return out
}

// recheck predicts the release from new reads until one agrees with the
// staged target (next nil), or agreeingReads reads in a row give the same
// other placements (next), or the settle timeout passes (why says what was
// last read).
func (h *handover) recheck(ctx context.Context) (next [][]workv1alpha2.TargetCluster, why string, err error) {
	deadline := time.Now().Add(h.settleTimeout())
	var last [][]workv1alpha2.TargetCluster
	same := 0
	why = "no read agreed with the staged placement in time"
	for {
		b, err := h.api.get(ctx, h.ns, h.name)
		if err != nil {
			return nil, "", err
		}
		if err := h.unchanged(b); err != nil {
			return nil, "", err
		}
		pred, perr := h.m.Recheck(ctx, h.t, asReleased(b))
		switch {
		case perr != nil:
			why, same = "the placement could not be predicted again: "+perr.Error(), 0
		case len(pred.Placements) == 0:
			why, same = "the placement could not be predicted again: "+pred.Why, 0
		case pred.Unsettled != "":
			why, same = pred.Unsettled, 0
		case allEqual(pred.Placements, h.target):
			return nil, "", nil
		default:
			if last != nil && samePlacements(last, pred.Placements) {
				same++
			} else {
				last, same = pred.Placements, 1
			}
			if same >= agreeingReads {
				return last, "", nil
			}
			why = "the scheduler would choose " + rebalance.FormatPlacement(pred.Placements[0])
		}
		if time.Now().After(deadline) {
			return nil, why, nil
		}
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// stillAgrees reads the binding and predicts its release once more: the
// last check, in the release window, after recheck agreed.
func (h *handover) stillAgrees(ctx context.Context) (bool, error) {
	b, err := h.api.get(ctx, h.ns, h.name)
	if err != nil {
		return false, err
	}
	if err := h.unchanged(b); err != nil {
		return false, err
	}
	pred, err := h.m.Recheck(ctx, h.t, asReleased(b))
	return err == nil && pred.Unsettled == "" && len(pred.Placements) > 0 && allEqual(pred.Placements, h.target), nil
}

// asReleased is the binding as the scheduler will see it after the
// release: the move's suspension lifted, no ledger, spec.clusters as staged.
func asReleased(b *workv1alpha2.ResourceBinding) *workv1alpha2.ResourceBinding {
	out := b.DeepCopy()
	l, err := readLedger(b)
	if out.Spec.Suspension != nil {
		out.Spec.Suspension.Scheduling = nil
		if err != nil || l == nil || !l.HadSuspension {
			out.Spec.Suspension = nil
		}
	}
	delete(out.Annotations, LedgerAnnotation)
	return out
}

func allEqual(placements [][]workv1alpha2.TargetCluster, p placement) bool {
	for _, q := range placements {
		if !toPlacement(q).equal(p) {
			return false
		}
	}
	return true
}

func samePlacements(a, b [][]workv1alpha2.TargetCluster) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !toPlacement(a[i]).equal(toPlacement(b[i])) {
			return false
		}
	}
	return true
}

// settledPrediction predicts b's fresh reschedule from new reads until one
// is not Unsettled, or the settle timeout passed (then the last one: the
// settle step checks again before the release).
func (h *handover) settledPrediction(ctx context.Context, b *workv1alpha2.ResourceBinding) (Prediction, error) {
	deadline := time.Now().Add(h.settleTimeout())
	for {
		pred, err := h.m.Recheck(ctx, h.t, b)
		if err != nil || pred.Unsettled == "" || time.Now().After(deadline) {
			return pred, err
		}
		select {
		case <-ctx.Done():
			return pred, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// enterGate takes the run's Gate (Mover.Gate) for this move in mode;
// nothing without a Gate, or when the move holds it already in that mode.
func (h *handover) enterGate(ctx context.Context, mode gateMode) error {
	if h.m.Gate == nil || (h.inGate && h.gateMode == mode) {
		return nil
	}
	h.leaveGate()
	if err := h.m.Gate.enter(ctx, mode); err != nil {
		return err
	}
	h.inGate, h.gateMode = true, mode
	return nil
}

// leaveGate lets the run's Gate go if this move holds it.
func (h *handover) leaveGate() {
	if h.inGate {
		h.m.Gate.leave()
		h.inGate = false
	}
}

// lock takes Mover.Serial for this move (nothing without one, or when
// held).
func (h *handover) lock(ctx context.Context) error {
	if h.m.Serial == nil || h.serialHeld {
		return nil
	}
	select {
	case h.m.Serial <- struct{}{}:
		h.serialHeld = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unlock lets Mover.Serial go if this move holds it.
func (h *handover) unlock() {
	if h.serialHeld {
		<-h.m.Serial
		h.serialHeld = false
	}
}

// write is place for a staging or settle write: it changes the members'
// room, so it waits while another move of the run settles (Mover.Serial,
// in waves) and while moves of the run are in their release window (Gate).
// Serial is taken before the Gate: a move holding Serial waits for the
// Gate, never the other way round.
func (h *handover) write(ctx context.Context, p placement, first bool) error {
	if h.m.Serial != nil && !h.serialHeld {
		if err := h.lock(ctx); err != nil {
			return err
		}
		defer h.unlock()
	}
	if err := h.enterGate(ctx, gateWrite); err != nil {
		return err
	}
	defer h.leaveGate()
	return h.place(ctx, p, first)
}
