package handover

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// LedgerAnnotation marks a binding whose scheduling this plugin suspended
// for a move; its value is the Ledger of that move (JSON).
const LedgerAnnotation = rebalance.HandoverAnnotation

// Phase is where a move stands, as its ledger records it. The release
// lifts the suspension and removes the ledger in one write, so a binding
// that carries a ledger is always in one of these phases.
type Phase string

const (
	// PhaseHeld: scheduling suspended ahead of the move, spec.clusters
	// unchanged (Mover.Hold, a recorded run's workload waiting for its turn).
	PhaseHeld Phase = "Held"
	// PhaseStaging: the replicas the move gains are starting; every cluster
	// still has at least the replicas it had before, so the original
	// replicas still run and an undo stops only the new ones.
	PhaseStaging Phase = "Staging"
	// PhaseSettling: spec.clusters holds the new placement and the clusters
	// that lose replicas have been told to stop them: the new replicas
	// have taken over, and the move is never undone from here.
	PhaseSettling Phase = "Settling"
)

// Ledger is what the annotation records of a move in progress: enough for
// any later process of this plugin to tell what the binding waits for,
// who moves it, until when, and what recovery does with it (Decide).
type Ledger struct {
	// Phase is where the move stands. Empty in a ledger written by an
	// older release of this plugin: Held when Hold is set, else Staging.
	Phase Phase `json:"phase,omitempty"`
	// Owner names the process moving the binding (host, process id and a
	// random suffix, or a daemon's Lease identity).
	Owner string `json:"owner,omitempty"`
	// Deadline is when the move must have ended (server time). Past it,
	// any process of the plugin recovers the binding; the owner bounds its
	// own move by it.
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// Replicas is spec.replicas when the move started: a change means
	// someone scaled the workload, and the move plans again or lets go.
	Replicas int32 `json:"replicas,omitempty"`
	// Staged is the placement the move wrote last (spec.clusters as the
	// ledger's write left it): anything else there was written by someone
	// else (Karmada evicting, a person).
	Staged []workv1alpha2.TargetCluster `json:"staged,omitempty"`
	// Original is spec.clusters before the move.
	Original []workv1alpha2.TargetCluster `json:"original"`
	// Target is the placement the move heads for (the prediction).
	Target []workv1alpha2.TargetCluster `json:"target,omitempty"`
	// HadSuspension is set when spec.suspension existed before the move.
	HadSuspension bool `json:"hadSuspension,omitempty"`
	// Started is when the move suspended the binding (server time).
	Started metav1.Time `json:"started"`
	// LastScheduled is status.lastScheduledTime when the binding was
	// suspended: a later one means the scheduler acted on a binding queued
	// before the suspension (karmada-scheduler checks the suspension when
	// it enqueues a binding, not when it schedules it).
	LastScheduled *metav1.Time `json:"lastScheduled,omitempty"`
	// Hold marks a ledger of PhaseHeld written by an older release.
	Hold bool `json:"hold,omitempty"`
	// Trigger is spec.rescheduleTriggeredAt before the move, kept when
	// TriggerSaved: an undo writes it back, so that a trigger someone wrote
	// while the binding was suspended (Karmada's workloadRebalancer
	// controller acting on a record, at its creationTimestamp) does not
	// turn into a one-write reschedule the moment the suspension is lifted.
	Trigger      *metav1.Time `json:"trigger,omitempty"`
	TriggerSaved bool         `json:"triggerSaved,omitempty"`
}

// CurrentPhase is the ledger's phase, reading an older ledger's too.
func (l *Ledger) CurrentPhase() Phase {
	switch {
	case l.Phase != "":
		return l.Phase
	case l.Hold:
		return PhaseHeld
	}
	return PhaseStaging
}

// ReadLedger returns the ledger a binding carries, nil when it has none.
// An error means the annotation is there but cannot be read.
func ReadLedger(b *workv1alpha2.ResourceBinding) (*Ledger, error) {
	raw, ok := b.Annotations[LedgerAnnotation]
	if !ok {
		return nil, nil
	}
	var l Ledger
	if err := json.Unmarshal([]byte(raw), &l); err != nil {
		return nil, fmt.Errorf("annotation %s does not parse: %w", LedgerAnnotation, err)
	}
	return &l, nil
}

func readLedger(b *workv1alpha2.ResourceBinding) (*Ledger, error) { return ReadLedger(b) }

func jsonLedger(l Ledger) (string, error) {
	raw, err := json.Marshal(l)
	return string(raw), err
}

type clusters = []workv1alpha2.TargetCluster

// The writes. Each is a JSON patch (RFC 6902) of the fields a move owns,
// built against the binding as read and carrying its resource version, so
// that it applies only to that binding (a conflict otherwise). A JSON
// patch changes spec.clusters entry by entry: fields of an entry that this
// plugin's Karmada types do not know (a newer Karmada's, such as v1.19's
// components) stay as the server has them, where a merge patch would
// replace the whole list with entries of name and replicas only.

// patchOp is one operation of a JSON patch.
type patchOp struct {
	Op, Path string
	// From is the source of a move.
	From  string
	Value any
}

// MarshalJSON writes the members each operation takes, and keeps a value
// of false or null on add and replace.
func (o patchOp) MarshalJSON() ([]byte, error) {
	m := map[string]any{"op": o.Op, "path": o.Path}
	switch o.Op {
	case "remove":
	case "move":
		m["from"] = o.From
	default:
		m["value"] = o.Value
	}
	return json.Marshal(m)
}

// jsonPatch builds a JSON patch against one read of a binding.
type jsonPatch struct {
	b   *workv1alpha2.ResourceBinding
	ops []patchOp
}

// newPatch starts a patch of b guarded by its resource version: the API
// server answers Conflict when the binding changed since it was read.
func newPatch(b *workv1alpha2.ResourceBinding) *jsonPatch {
	return &jsonPatch{b: b, ops: []patchOp{{Op: "replace", Path: "/metadata/resourceVersion", Value: b.ResourceVersion}}}
}

func (p *jsonPatch) bytes() ([]byte, error) { return json.Marshal(p.ops) }

// escape escapes a key for a JSON pointer (RFC 6901).
func escape(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// setLedger writes l into the annotation.
func (p *jsonPatch) setLedger(l Ledger) error {
	raw, err := jsonLedger(l)
	if err != nil {
		return err
	}
	if p.b.Annotations == nil {
		p.ops = append(p.ops, patchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{LedgerAnnotation: raw}})
		return nil
	}
	p.ops = append(p.ops, patchOp{Op: "add", Path: "/metadata/annotations/" + escape(LedgerAnnotation), Value: raw})
	return nil
}

// dropLedger removes the annotation, if the binding has it.
func (p *jsonPatch) dropLedger() {
	if _, ok := p.b.Annotations[LedgerAnnotation]; ok {
		p.ops = append(p.ops, patchOp{Op: "remove", Path: "/metadata/annotations/" + escape(LedgerAnnotation)})
	}
}

// suspend sets spec.suspension.scheduling, keeping the rest of
// spec.suspension (dispatching) as it is.
func (p *jsonPatch) suspend() {
	if p.b.Spec.Suspension == nil {
		p.ops = append(p.ops, patchOp{Op: "add", Path: "/spec/suspension", Value: map[string]any{"scheduling": true}})
		return
	}
	p.ops = append(p.ops, patchOp{Op: "add", Path: "/spec/suspension/scheduling", Value: true})
}

// lift removes spec.suspension.scheduling and nothing else of
// spec.suspension: a dispatching suspension the policy or a person added
// during the move stays.
func (p *jsonPatch) lift() {
	if p.b.Spec.Suspension != nil && p.b.Spec.Suspension.Scheduling != nil {
		p.ops = append(p.ops, patchOp{Op: "remove", Path: "/spec/suspension/scheduling"})
	}
}

// trigger sets spec.rescheduleTriggeredAt, or removes it when at is nil.
func (p *jsonPatch) trigger(at *metav1.Time) {
	switch {
	case at != nil:
		p.ops = append(p.ops, patchOp{Op: "add", Path: "/spec/rescheduleTriggeredAt", Value: at})
	case p.b.Spec.RescheduleTriggeredAt != nil:
		p.ops = append(p.ops, patchOp{Op: "remove", Path: "/spec/rescheduleTriggeredAt"})
	}
}

// place makes spec.clusters want, entry by entry: an entry whose cluster
// stays keeps its other fields and gets its replicas, one whose cluster
// goes is removed, and new clusters are appended. Each kept or removed
// entry is tested by name, so the patch fails rather than change the
// wrong one.
func (p *jsonPatch) place(want clusters) {
	cur := p.b.Spec.Clusters
	if len(cur) == 0 {
		p.ops = append(p.ops, patchOp{Op: "add", Path: "/spec/clusters", Value: want})
		return
	}
	wanted := make(map[string]int32, len(want))
	for _, c := range want {
		wanted[c.Name] += c.Replicas
	}
	seen := map[string]bool{}
	var removals []patchOp
	for i, c := range cur {
		entry := fmt.Sprintf("/spec/clusters/%d", i)
		p.ops = append(p.ops, patchOp{Op: "test", Path: entry + "/name", Value: c.Name})
		n, ok := wanted[c.Name]
		if !ok || seen[c.Name] {
			removals = append(removals, patchOp{Op: "remove", Path: entry})
			continue
		}
		seen[c.Name] = true
		if n != c.Replicas {
			p.ops = append(p.ops, patchOp{Op: "replace", Path: entry + "/replicas", Value: n})
		}
	}
	// Remove from the last index down, so that earlier indices hold.
	for i := len(removals) - 1; i >= 0; i-- {
		p.ops = append(p.ops, removals[i])
	}
	// What the list holds after the removals, then the additions.
	var names []string
	for _, c := range cur {
		if _, ok := wanted[c.Name]; ok && !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	for _, c := range want {
		if !seen[c.Name] {
			seen[c.Name] = true
			names = append(names, c.Name)
			p.ops = append(p.ops, patchOp{Op: "add", Path: "/spec/clusters/-", Value: workv1alpha2.TargetCluster{Name: c.Name, Replicas: wanted[c.Name]}})
		}
	}
	// Then the order of want, by moves (which keep an entry's fields):
	// the list reads as the scheduler would write it.
	i := 0
	for _, c := range want {
		j := slices.Index(names, c.Name)
		if j < i {
			continue // a name want lists twice
		}
		if j != i {
			p.ops = append(p.ops, patchOp{Op: "move", From: fmt.Sprintf("/spec/clusters/%d", j), Path: fmt.Sprintf("/spec/clusters/%d", i)})
			names = slices.Insert(slices.Delete(names, j, j+1), i, c.Name)
		}
		i++
	}
}

// ledgerWrite is the write that starts a move, or moves it to another
// phase: the ledger, the suspension and the staged placement in one patch,
// so that the scheduler never sees a staged placement unsuspended and the
// ledger always tells what was written last.
func ledgerWrite(b *workv1alpha2.ResourceBinding, l Ledger) ([]byte, error) {
	p := newPatch(b)
	if err := p.setLedger(l); err != nil {
		return nil, err
	}
	if !b.Spec.SchedulingSuspended() {
		p.suspend()
	}
	if l.Staged != nil && !toPlacement(l.Staged).equal(toPlacement(b.Spec.Clusters)) {
		p.place(l.Staged)
	}
	return p.bytes()
}

// releasePatch lifts the suspension and drops the ledger together with a
// fresh trigger at, and puts the predicted placement in spec.clusters. The
// placement's total must equal spec.replicas: karmada-scheduler looks at a
// binding whose clusters add up to another count as scaled first, and
// divides the surplus away by its own rule before it honours the trigger
// (seen on v1.18.2: a scale pass, then the fresh one, each moving replicas).
// With the totals equal, its next look at the binding is the fresh
// reschedule alone.
func releasePatch(b *workv1alpha2.ResourceBinding, at metav1.Time, predicted clusters) ([]byte, error) {
	p := newPatch(b)
	p.dropLedger()
	p.lift()
	p.trigger(&at)
	if !toPlacement(predicted).equal(toPlacement(b.Spec.Clusters)) {
		p.place(predicted)
	}
	return p.bytes()
}

// undoPatch puts the original placement back (and the original trigger,
// when the ledger saved it), lifts the suspension and drops the ledger.
func undoPatch(b *workv1alpha2.ResourceBinding, l *Ledger) ([]byte, error) {
	p := newPatch(b)
	p.dropLedger()
	p.lift()
	if l.TriggerSaved {
		// Nil removes a trigger written meanwhile.
		if l.Trigger == nil || b.Spec.RescheduleTriggeredAt == nil || !l.Trigger.Equal(b.Spec.RescheduleTriggeredAt) {
			p.trigger(l.Trigger)
		}
	}
	if !toPlacement(l.Original).equal(toPlacement(b.Spec.Clusters)) {
		p.place(l.Original)
	}
	return p.bytes()
}

// letGoPatch lifts the suspension and drops the ledger, and leaves
// spec.clusters as it is now.
func letGoPatch(b *workv1alpha2.ResourceBinding) ([]byte, error) {
	p := newPatch(b)
	p.dropLedger()
	p.lift()
	return p.bytes()
}
