package handover

import (
	"context"
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
	// dryRun sends every write as a server-side dry run.
	dryRun bool
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
	opts := metav1.PatchOptions{}
	if c.dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if namespace == "" {
		crb, err := c.client.WorkV1alpha2().ClusterResourceBindings().Patch(ctx, name, types.JSONPatchType, body, opts)
		if err != nil {
			return nil, err
		}
		return asResourceBinding(crb), nil
	}
	return c.client.WorkV1alpha2().ResourceBindings(namespace).Patch(ctx, name, types.JSONPatchType, body, opts)
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

// asBeforeHold returns b as it was before a hold (Mover.Hold) suspended its
// scheduling, for a prediction of its move: a held binding is suspended
// only so that no one else's trigger moves it first. Any other binding is
// returned as it is.
func asBeforeHold(b *workv1alpha2.ResourceBinding) *workv1alpha2.ResourceBinding {
	l, err := readLedger(b)
	if err != nil || l == nil || l.CurrentPhase() != PhaseHeld || b.Spec.Suspension == nil {
		return b
	}
	out := b.DeepCopy()
	out.Spec.Suspension.Scheduling = nil
	if !l.HadSuspension {
		out.Spec.Suspension = nil
	}
	return out
}
