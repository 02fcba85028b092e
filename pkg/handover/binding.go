package handover

import (
	"context"
	"encoding/json"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// bindings reads, watches and patches one kind of binding; a
// ClusterResourceBinding (empty namespace) is held in ResourceBinding shape,
// since both share metadata, spec and status.
type bindings struct {
	client karmadaclient.Interface
}

func asResourceBinding(crb *workv1alpha2.ClusterResourceBinding) *workv1alpha2.ResourceBinding {
	return &workv1alpha2.ResourceBinding{ObjectMeta: crb.ObjectMeta, Spec: crb.Spec, Status: crb.Status}
}

// fromWatched is a binding a run follows (rebalance.Binding, which keeps
// only what a run reads) in the shape a move judges: the policy labels, no
// annotation but the ledger's presence (with an empty value), and a
// deletion timestamp of the zero time for one being deleted. It is for
// judging only (firstLook, which reads a binding afresh for anything else).
func fromWatched(b *rebalance.Binding) *workv1alpha2.ResourceBinding {
	out := &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: b.Namespace, Name: b.Name, UID: b.UID, ResourceVersion: b.ResourceVersion,
			Generation: b.Generation, Labels: b.Labels, OwnerReferences: b.OwnerReferences,
		},
		Spec: b.Spec, Status: b.Status,
	}
	if b.Handover {
		out.Annotations = map[string]string{LedgerAnnotation: ""}
	}
	if b.Deleting {
		out.DeletionTimestamp = &metav1.Time{}
	}
	return out
}

func (c bindings) get(ctx context.Context, namespace, name string) (*workv1alpha2.ResourceBinding, error) {
	if namespace == "" {
		crb, err := c.client.WorkV1alpha2().ClusterResourceBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return asResourceBinding(crb), nil
	}
	return c.client.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c bindings) patch(ctx context.Context, namespace, name string, body []byte) (*workv1alpha2.ResourceBinding, error) {
	if namespace == "" {
		crb, err := c.client.WorkV1alpha2().ClusterResourceBindings().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
		if err != nil {
			return nil, err
		}
		return asResourceBinding(crb), nil
	}
	return c.client.WorkV1alpha2().ResourceBindings(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
}

func (c bindings) watch(ctx context.Context, namespace, name, resourceVersion string) (watch.Interface, error) {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: resourceVersion}
	if namespace == "" {
		return c.client.WorkV1alpha2().ClusterResourceBindings().Watch(ctx, opts)
	}
	return c.client.WorkV1alpha2().ResourceBindings(namespace).Watch(ctx, opts)
}

func fromEvent(ev watch.Event) *workv1alpha2.ResourceBinding {
	switch b := ev.Object.(type) {
	case *workv1alpha2.ResourceBinding:
		return b
	case *workv1alpha2.ClusterResourceBinding:
		return asResourceBinding(b)
	}
	return nil
}

// errDeleted is the binding disappearing while a move follows it.
var errDeleted = apierrors.NewNotFound(workv1alpha2.Resource("resourcebindings"), "")

// follow reads the binding, then watches it, until done says so, and
// returns the binding done accepted. A closed or failed watch is made again
// from a fresh read; a read that fails for a passing reason is retried a
// second later. It ends with ctx.
func (c bindings) follow(ctx context.Context, namespace, name string, done func(*workv1alpha2.ResourceBinding) bool) (*workv1alpha2.ResourceBinding, error) {
	for {
		b, err := c.get(ctx, namespace, name)
		switch {
		case apierrors.IsNotFound(err):
			return nil, err
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err := rebalance.SleepContext(ctx, time.Second); err != nil {
				return nil, err
			}
			continue
		}
		if done(b) {
			return b, nil
		}
		w, err := c.watch(ctx, namespace, name, b.ResourceVersion)
		if err != nil {
			if err := rebalance.SleepContext(ctx, time.Second); err != nil {
				return nil, err
			}
			continue
		}
		got, err := drain(ctx, w, done)
		w.Stop()
		if got != nil || err != nil {
			return got, err
		}
	}
}

// drain reads a watch until done accepts a binding, the binding is deleted,
// ctx ends or the watch closes (nil, nil).
func drain(ctx context.Context, w watch.Interface, done func(*workv1alpha2.ResourceBinding) bool) (*workv1alpha2.ResourceBinding, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil
			}
			switch ev.Type {
			case watch.Deleted:
				return nil, errDeleted
			case watch.Error:
				return nil, nil
			}
			if b := fromEvent(ev); b != nil && done(b) {
				return b, nil
			}
		}
	}
}

// ledger is what the annotation records of a move in progress: enough for
// any later run to undo it.
type ledger struct {
	// Original is spec.clusters before the move.
	Original []workv1alpha2.TargetCluster `json:"original"`
	// Target is the placement the move was heading for (the prediction).
	Target []workv1alpha2.TargetCluster `json:"target,omitempty"`
	// HadSuspension is set when spec.suspension existed before the move, so
	// that lifting ours leaves the rest of it in place.
	HadSuspension bool `json:"hadSuspension,omitempty"`
	// Started is when the move suspended the binding (server time).
	Started metav1.Time `json:"started"`
	// Hold marks a binding suspended ahead of its move, placement
	// unchanged (Mover.Hold): the move that comes for it carries on from
	// the hold instead of undoing it.
	Hold bool `json:"hold,omitempty"`
	// Trigger is spec.rescheduleTriggeredAt before the move, kept when
	// TriggerSaved: an undo writes it back, so that a trigger someone wrote
	// while the binding was suspended (Karmada's workloadRebalancer
	// controller acting on a record, at its creationTimestamp) does not
	// turn into a one-write reschedule the moment the suspension is lifted.
	Trigger      *metav1.Time `json:"trigger,omitempty"`
	TriggerSaved bool         `json:"triggerSaved,omitempty"`
}

// LedgerAnnotation marks a binding whose scheduling this plugin suspended
// for a move; its value is the ledger of that move.
const LedgerAnnotation = rebalance.HandoverAnnotation

// readLedger returns the ledger of a binding suspended by a move, nil when
// there is none.
func readLedger(b *workv1alpha2.ResourceBinding) (*ledger, error) {
	raw, ok := b.Annotations[LedgerAnnotation]
	if !ok {
		return nil, nil
	}
	var l ledger
	if err := json.Unmarshal([]byte(raw), &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// The patches. Each is a JSON merge patch of the fields a move owns and
// carries the resource version it was built from, so that it applies only
// to the binding as read.

type patchMeta struct {
	ResourceVersion string             `json:"resourceVersion"`
	Annotations     map[string]*string `json:"annotations,omitempty"`
}

type clusters = []workv1alpha2.TargetCluster

// stagePatch suspends scheduling, records the ledger and stages the
// placement: one write, so that the scheduler never sees the staged
// placement unsuspended.
func stagePatch(resourceVersion string, l ledger, staged clusters) ([]byte, error) {
	raw, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	value := string(raw)
	return json.Marshal(map[string]any{
		"metadata": patchMeta{ResourceVersion: resourceVersion, Annotations: map[string]*string{LedgerAnnotation: &value}},
		"spec": map[string]any{
			"suspension": map[string]any{"scheduling": true},
			"clusters":   staged,
		},
	})
}

// holdPatch suspends scheduling and records a hold ledger, placement
// unchanged.
func holdPatch(resourceVersion string, l ledger) ([]byte, error) {
	raw, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	value := string(raw)
	return json.Marshal(map[string]any{
		"metadata": patchMeta{ResourceVersion: resourceVersion, Annotations: map[string]*string{LedgerAnnotation: &value}},
		"spec":     map[string]any{"suspension": map[string]any{"scheduling": true}},
	})
}

// placePatch changes the staged placement of a suspended binding.
func placePatch(resourceVersion string, staged clusters) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": patchMeta{ResourceVersion: resourceVersion},
		"spec":     map[string]any{"clusters": staged},
	})
}

// liftSuspension is the part of a patch that lifts the move's suspension.
func liftSuspension(l *ledger) any {
	if l != nil && l.HadSuspension {
		return map[string]any{"scheduling": nil}
	}
	return nil
}

// releasePatch lifts the suspension and drops the ledger together with a
// fresh trigger at, and puts the predicted placement in spec.clusters. The
// placement's total must equal spec.replicas: karmada-scheduler looks at a
// binding whose clusters add up to another count as scaled first, and
// divides the surplus away by its own rule before it honours the trigger
// (seen on v1.18.2: a scale pass, then the fresh one, each moving replicas).
// With the totals equal, its next look at the binding is the fresh
// reschedule alone.
func releasePatch(resourceVersion string, l *ledger, at metav1.Time, predicted clusters) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": patchMeta{ResourceVersion: resourceVersion, Annotations: map[string]*string{LedgerAnnotation: nil}},
		"spec": map[string]any{
			"suspension":            liftSuspension(l),
			"rescheduleTriggeredAt": at,
			"clusters":              predicted,
		},
	})
}

// undoPatch puts the original placement back (and the original trigger,
// when the ledger saved it), lifts the suspension and drops the ledger.
func undoPatch(resourceVersion string, l *ledger) ([]byte, error) {
	spec := map[string]any{
		"suspension": liftSuspension(l),
		"clusters":   l.Original,
	}
	if l.TriggerSaved {
		spec["rescheduleTriggeredAt"] = l.Trigger // nil removes one written meanwhile
	}
	return json.Marshal(map[string]any{
		"metadata": patchMeta{ResourceVersion: resourceVersion, Annotations: map[string]*string{LedgerAnnotation: nil}},
		"spec":     spec,
	})
}

// letGoPatch lifts the suspension and drops the ledger, and leaves
// spec.clusters as someone else wrote it during the move.
func letGoPatch(resourceVersion string, l *ledger) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": patchMeta{ResourceVersion: resourceVersion, Annotations: map[string]*string{LedgerAnnotation: nil}},
		"spec":     map[string]any{"suspension": liftSuspension(l)},
	})
}

// asBeforeHold returns b as it was before a hold (Mover.Hold) suspended its
// scheduling, for a prediction of its move: a held binding is suspended
// only so that no one else's trigger moves it first. Any other binding is
// returned as it is.
func asBeforeHold(b *workv1alpha2.ResourceBinding) *workv1alpha2.ResourceBinding {
	l, err := readLedger(b)
	if err != nil || l == nil || !l.Hold || b.Spec.Suspension == nil {
		return b
	}
	out := b.DeepCopy()
	out.Spec.Suspension.Scheduling = nil
	if !l.HadSuspension {
		out.Spec.Suspension = nil
	}
	return out
}
