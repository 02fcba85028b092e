package record

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// FollowOutcome says how Follow ended.
type FollowOutcome string

const (
	// FollowDeleted: the TTL ran out and the recorder deleted the object.
	FollowDeleted FollowOutcome = "Deleted"
	// FollowDeletedElsewhere: someone else (the in-cluster controller, a
	// user) deleted the object.
	FollowDeletedElsewhere FollowOutcome = "DeletedElsewhere"
	// FollowNoTTL: the object has no TTL (any more), so it is never deleted.
	FollowNoTTL FollowOutcome = "NoTTL"
	// FollowUnfinished: some workload is still pending, so the object has no
	// finish time and its TTL has not started.
	FollowUnfinished FollowOutcome = "Unfinished"
	// FollowInterrupted: the context ended (Ctrl-C) before the deletion.
	FollowInterrupted FollowOutcome = "Interrupted"
	// FollowOverdue: in passive mode, the object outlived its TTL by more
	// than the grace period; no controller deleted it.
	FollowOverdue FollowOutcome = "Overdue"
)

// FollowOptions tune Follow.
type FollowOptions struct {
	// Passive leaves reconciling and deleting to the in-cluster controller:
	// Follow only watches.
	Passive bool
	// Grace is how long, in passive mode, to wait past the expiry for the
	// controller's deletion. Zero means 30 seconds.
	Grace time.Duration
	// PassTimeout bounds each reconciliation Follow makes; zero means
	// only ctx does.
	PassTimeout time.Duration
}

// maxStalledPasses is how many passes in a row may leave workloads pending
// before Follow gives up on finishing them.
const maxStalledPasses = 3

// FollowResult is how a Follow ended.
type FollowResult struct {
	Outcome FollowOutcome
	// Rebalancer is the object as last seen.
	Rebalancer *appsv1alpha1.WorkloadRebalancer
	// ExpiresAt is when the object is due for deletion; zero when unknown.
	ExpiresAt time.Time
	// Passes are the reconciliations made for spec edits meanwhile.
	Passes []*Pass
}

// Follow watches rb after a pass until its TTL runs out, and then deletes
// it as the controller does: ttlSecondsAfterFinished after
// status.finishTime, reading it again first and deleting with a resource
// version precondition. A spec edit meanwhile (by anyone) is reconciled,
// which refreshes finishTime and so restarts the countdown; so are pending
// workloads someone else recorded meanwhile. rb must have been reconciled
// with nothing left pending (or the follow ends as Unfinished). A deletion by
// someone else ends the follow cleanly, as does ctx ending (Interrupted):
// the object is then left as it is, consistent, for the in-cluster
// controller or a later run to delete.
func (r *Recorder) Follow(ctx context.Context, rb *appsv1alpha1.WorkloadRebalancer, opts FollowOptions) (*FollowResult, error) {
	if opts.Grace <= 0 {
		opts.Grace = 30 * time.Second
	}
	res := &FollowResult{Rebalancer: rb}
	w := &objectWatch{r: r, name: rb.Name, rv: rb.ResourceVersion}
	defer w.stop()
	var announced time.Time
	// stalled counts passes in a row that left workloads pending.
	stalled := 0

	for {
		cur := res.Rebalancer
		if expires, ok := ExpiresAt(cur); ok {
			res.ExpiresAt = expires
		}
		if ctx.Err() != nil {
			res.Outcome = FollowInterrupted
			return res, nil
		}

		var fire <-chan time.Time
		unfinished := cur.Status.ObservedGeneration < cur.Generation || HasPending(cur.Status) || cur.Status.FinishTime == nil
		switch {
		case unfinished && !opts.Passive:
			if stalled >= maxStalledPasses {
				res.Outcome = FollowUnfinished
				return res, nil
			}
			if cur.Status.ObservedGeneration < cur.Generation {
				r.notify(fmt.Sprintf("workloadrebalancer %s: the spec changed (generation %d); reconciling it", cur.Name, cur.Generation))
			} else {
				// Someone else (the in-cluster controller, whose trigger
				// write lost a race) recorded pending workloads: finish them.
				r.notify(fmt.Sprintf("workloadrebalancer %s: pending workloads were recorded meanwhile; reconciling it", cur.Name))
			}
			passCtx, cancel := ctx, context.CancelFunc(func() {})
			if opts.PassTimeout > 0 {
				passCtx, cancel = context.WithTimeout(ctx, opts.PassTimeout)
			}
			pass, err := r.Reconcile(passCtx, cur)
			cancel()
			if pass != nil {
				res.Passes = append(res.Passes, pass)
				if pass.Rebalancer != nil {
					res.Rebalancer = pass.Rebalancer
				}
			}
			switch {
			case errors.Is(err, ErrRebalancerGone):
				res.Outcome = FollowDeletedElsewhere
				return res, nil
			case err != nil && ctx.Err() == nil:
				return res, err
			}
			if HasPending(res.Rebalancer.Status) {
				stalled++
			} else {
				stalled = 0
			}
			continue
		case unfinished:
			// Passive: wait for the controller's status.
		case cur.Spec.TTLSecondsAfterFinished == nil:
			res.Outcome = FollowNoTTL
			return res, nil
		default:
			expires, _ := ExpiresAt(cur)
			now := r.now().Time
			if !expires.Equal(announced) {
				// Announced even when already due (a slow run can outlast a
				// short TTL), so the deletion that follows is always explained.
				announced = expires
				when := "now"
				if expires.After(now) {
					when = "in " + expires.Sub(now).Round(time.Second).String()
				}
				r.notify(fmt.Sprintf("workloadrebalancer %s: finished at %s; it is deleted at %s (ttlSecondsAfterFinished %d), %s",
					cur.Name, rebalance.FormatTime(cur.Status.FinishTime.Time), rebalance.FormatTime(expires), *cur.Spec.TTLSecondsAfterFinished, when))
			}
			if expires.After(now) {
				fire = time.After(expires.Sub(now))
				break
			}
			if opts.Passive {
				deadline := expires.Add(opts.Grace)
				if !deadline.After(now) {
					res.Outcome = FollowOverdue
					return res, nil
				}
				fire = time.After(deadline.Sub(now))
				break
			}
			deleted, fresh, err := r.Delete(ctx, cur.Name)
			switch {
			case errors.Is(err, ErrRebalancerGone):
				res.Outcome = FollowDeletedElsewhere
				return res, nil
			case err != nil && ctx.Err() != nil:
				continue
			case err != nil:
				return res, err
			case deleted:
				res.Rebalancer = fresh
				res.Outcome = FollowDeleted
				return res, nil
			}
			if fresh.ResourceVersion == cur.ResourceVersion {
				// Not due yet by the server's clock as read now: wait a little.
				fire = time.After(time.Second)
				break
			}
			res.Rebalancer = fresh
			continue
		}

		obj, deleted, err := w.next(ctx, fire)
		switch {
		case ctx.Err() != nil:
			continue // reported at the top of the loop
		case err != nil:
			return res, err
		case deleted:
			res.Outcome = FollowDeletedElsewhere
			return res, nil
		case obj != nil && !olderThan(obj, res.Rebalancer):
			res.Rebalancer = obj
		}
	}
}

// NoControllerError says that no controller acted on a WorkloadRebalancer
// within the time allowed.
type NoControllerError struct {
	Name   string
	Waited time.Duration
}

func (e *NoControllerError) Error() string {
	return fmt.Sprintf("no controller recorded a status for workloadrebalancer %s within %s", e.Name, e.Waited)
}

// AwaitStatus waits for the in-cluster controller to record rb's current
// generation with nothing pending, and returns the object then. It fails
// with a *NoControllerError when the status does not observe that
// generation within grace (or before ctx's deadline), with ErrRebalancerGone when the object is
// deleted, and returns the last object seen with ctx's error when ctx ends
// first.
func (r *Recorder) AwaitStatus(ctx context.Context, rb *appsv1alpha1.WorkloadRebalancer, grace time.Duration) (*appsv1alpha1.WorkloadRebalancer, error) {
	cur, gen := rb, rb.Generation
	w := &objectWatch{r: r, name: rb.Name, rv: rb.ResourceVersion}
	defer w.stop()
	graceTimer := time.NewTimer(grace)
	defer graceTimer.Stop()
	for {
		observed := cur.Status.ObservedGeneration >= gen
		if observed && !HasPending(cur.Status) && cur.Status.FinishTime != nil {
			return cur, nil
		}
		var fire <-chan time.Time
		if !observed {
			fire = graceTimer.C
		}
		obj, deleted, err := w.next(ctx, fire)
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded) && !observed:
			// The time allowed ran out before the grace period did.
			return cur, &NoControllerError{Name: rb.Name, Waited: grace}
		case ctx.Err() != nil:
			return cur, ctx.Err()
		case err != nil:
			return cur, err
		case deleted:
			return cur, ErrRebalancerGone
		case obj == nil:
			return cur, &NoControllerError{Name: rb.Name, Waited: grace}
		case !olderThan(obj, cur):
			cur = obj
		}
	}
}

// olderThan reports whether a watched object is older than the one already
// known (watch events can trail the answers of the recorder's own writes).
func olderThan(obj, known *appsv1alpha1.WorkloadRebalancer) bool {
	if obj.Generation != known.Generation {
		return obj.Generation < known.Generation
	}
	return obj.Status.ObservedGeneration < known.Status.ObservedGeneration
}

// objectWatch follows one WorkloadRebalancer, watching again whenever the
// API server ends a watch.
type objectWatch struct {
	r    *Recorder
	name string
	rv   string
	w    watch.Interface
}

// next returns the next version of the object, or deleted when it was
// deleted. It returns nothing when fire fires or ctx ends first. The watch
// is restarted by hand rather than by client-go's RetryWatcher, which gives
// up when its resource version expires; here an expired watch re-reads the
// object, and every wait also ends when fire does.
func (o *objectWatch) next(ctx context.Context, fire <-chan time.Time) (*appsv1alpha1.WorkloadRebalancer, bool, error) {
	backoff := o.r.backoff()
	for {
		if o.w == nil {
			w, err := o.r.Client.Watch(ctx, metav1.ListOptions{
				FieldSelector:       fields.OneTermEqualSelector("metadata.name", o.name).String(),
				ResourceVersion:     o.rv,
				AllowWatchBookmarks: true,
			})
			switch {
			case err == nil:
				o.w = w
			case ctx.Err() != nil:
				return nil, false, nil
			case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
				return o.reread(ctx)
			case retryable(err):
				select {
				case <-ctx.Done():
					return nil, false, nil
				case <-fire:
					return nil, false, nil
				case <-time.After(backoff.Step()):
				}
				continue
			default:
				return nil, false, rebalancerError("watch", o.name, err)
			}
		}

		select {
		case <-ctx.Done():
			return nil, false, nil
		case <-fire:
			return nil, false, nil
		case ev, ok := <-o.w.ResultChan():
			if !ok {
				o.w = nil
				continue
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if rb, ok := ev.Object.(*appsv1alpha1.WorkloadRebalancer); ok {
					o.rv = rb.ResourceVersion
					return rb, false, nil
				}
			case watch.Deleted:
				return nil, true, nil
			case watch.Bookmark:
				if m, err := metaAccessor(ev.Object); err == nil {
					o.rv = m.GetResourceVersion()
				}
			case watch.Error:
				o.stop()
				if status, ok := ev.Object.(*metav1.Status); ok && (status.Code == http.StatusGone || status.Reason == metav1.StatusReasonExpired) {
					return o.reread(ctx)
				}
			}
		}
	}
}

// reread gets the object again after its watch history expired.
func (o *objectWatch) reread(ctx context.Context) (*appsv1alpha1.WorkloadRebalancer, bool, error) {
	rb, err := o.r.Client.Get(ctx, o.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, true, nil
	case err != nil:
		return nil, false, rebalancerError("get", o.name, err)
	}
	o.rv = rb.ResourceVersion
	return rb, false, nil
}

func (o *objectWatch) stop() {
	if o.w != nil {
		o.w.Stop()
		o.w = nil
	}
}

// metaAccessor reads the metadata of a watched object.
func metaAccessor(obj runtime.Object) (metav1.Object, error) {
	return meta.Accessor(obj)
}
