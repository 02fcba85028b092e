package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// DryRun says whether and where a rebalance only pretends to write.
type DryRun string

const (
	// DryRunNone writes the triggers.
	DryRunNone DryRun = "none"
	// DryRunClient reads the bindings and writes nothing.
	DryRunClient DryRun = "client"
	// DryRunServer sends every write with dryRun=All: the API server checks
	// permissions, admission and the schema, and persists nothing.
	DryRunServer DryRun = "server"
)

// Target is one workload to rebalance.
type Target struct {
	// Workload names the resource template as a WorkloadRebalancer would.
	Workload Workload
	// UID is the template's uid when it was read from the server; it lets
	// VerifyBinding notice a binding left over from a deleted template.
	UID types.UID
	// Before, when set, is the binding's spec.clusters as the caller read it
	// just before the run (a prediction's read). A recorded run lists its
	// workloads in a WorkloadRebalancer, and Karmada's workloadRebalancer
	// controller may write their triggers, and the scheduler answer them,
	// before the run reads the binding: the row then reports this placement
	// as the one before the move, not the scheduler's answer.
	Before []workv1alpha2.TargetCluster
}

// Options tune a Runner.
type Options struct {
	// DryRun selects whether triggers are written; the zero value writes.
	DryRun DryRun
	// Wait makes Run wait for the scheduler's answer to every trigger.
	Wait bool
	// Workers bounds the requests in flight; the client's QPS and burst
	// limits apply on top. Zero means DefaultWorkers.
	Workers int
	// Settle is how long Run keeps following bindings after the scheduler
	// answered every trigger. karmada-scheduler can run an explicit reschedule
	// twice in a row when its cache has not yet seen the status of the first
	// pass, and the second pass may place replicas differently; the placement
	// reported is the last one seen within Settle. Zero does not linger.
	Settle time.Duration
	// MaxClockWait bounds how long Run waits for the API server's clock to
	// pass a binding's lastScheduledTime. Zero means 10 seconds.
	MaxClockWait time.Duration
	// Backoff paces the retries of a request that failed for a reason that
	// may go away (conflict, throttling, network). Zero means 200ms doubling
	// up to 5s; retries stop only when the context ends.
	Backoff wait.Backoff
	// Progress, when set, is told how far each phase got.
	Progress func(Progress)
	// Explain, when set, is asked why a workload has no binding; the answer
	// (say, that the template does not exist) is added to the row's message.
	Explain func(ctx context.Context, t Target) string
	// TriggerAt, when set, is the trigger time of the run, used as is: a
	// recorded WorkloadRebalancer triggers at its creationTimestamp, as the
	// controller does. It is never moved past a later schedule; a binding
	// scheduled in or after that second is reported Ignored
	// (TriggerNotAfterLastSchedule).
	TriggerAt *metav1.Time
	// HeldSince, when set, makes a binding that already holds a trigger at
	// or after it count as triggered (nothing written), whatever the run's
	// own trigger time: a waved WorkloadRebalancer writes each trigger at
	// the server's time when its workload starts, and a trigger at or after
	// the record's creationTimestamp is the record's own (written before a
	// crash, or by Karmada's controller).
	HeldSince *metav1.Time
	// Triggered, when set, is called once every trigger is written and before
	// the wait for the scheduler starts, with the rows as they stand then.
	Triggered func(*Result)
}

// Progress reports how far a phase of Run got.
type Progress struct {
	// Phase is "reading", "triggering" or "waiting".
	Phase string
	// Done of Total workloads have finished the phase.
	Done, Total int
}

// Phases reported through Options.Progress.
const (
	PhaseReading    = "reading"
	PhaseTriggering = "triggering"
	PhaseWaiting    = "waiting"
)

// Result is the outcome of a rebalance.
type Result struct {
	// Rows has one row per distinct target, in controller order.
	Rows []Row
	// TriggerTime is the server time chosen for the run's triggers; a row
	// whose binding was scheduled later than that carries a later one.
	TriggerTime metav1.Time
	// FinishTime is the server time the last result was recorded, as the
	// controller's status.finishTime; nil while any row is pending.
	FinishTime *metav1.Time
	// Written counts the bindings whose trigger was written (or, in a server
	// dry run, accepted).
	Written int
	// Failed counts rows whose rebalance failed or will not happen: a Failed
	// result, or a scheduling failure, or a trigger the scheduler ignores.
	Failed int
	// Pending counts rows still without a result, or whose outcome the
	// scheduler had not shown yet, when the context ended.
	Pending int
}

// RequestError is a request the caller has to fix before anything can be
// retried, such as one the API server refused for lack of permission.
type RequestError struct {
	// Verb is the API verb: get, list, watch or patch.
	Verb string
	// Resource is the resource with its group, e.g. resourcebindings.work.karmada.io.
	Resource string
	// Namespace and Name locate the object; both may be empty.
	Namespace, Name string
	// Err is the API server's answer.
	Err error
}

func (e *RequestError) Error() string {
	target := e.Resource
	switch {
	case e.Namespace != "" && e.Name != "":
		target += " " + e.Namespace + "/" + e.Name
	case e.Name != "":
		target += " " + e.Name
	case e.Namespace != "":
		target += " in namespace " + e.Namespace
	}
	return fmt.Sprintf("%s %s: %v", e.Verb, target, e.Err)
}

func (e *RequestError) Unwrap() error { return e.Err }

// Runner rebalances workloads the way a WorkloadRebalancer does, and then
// watches what the scheduler makes of it.
type Runner struct {
	// API reaches the bindings.
	API BindingAPI
	// Clock is fed by the responses of API; trigger times come from it.
	Clock *ServerClock
	// Failures, when set, tells a binding that was failing before its trigger
	// and failed again after it; without it such a binding waits until the
	// run ends.
	Failures FailureEvents
	// Lister, when set, re-reads the awaited bindings of a namespace with one
	// list instead of a get each, once a watch lost its place in history or
	// a scope is polled (see refresh).
	Lister BindingLister
	Options
}

// entry is the state of one target during a run.
type entry struct {
	target Target
	row    Row
	// binding is the binding as last read or written.
	binding *Binding
	// at and written are the trigger time and binding generation the
	// scheduler's answer is judged against.
	at      metav1.Time
	written int64
	// wrote is set once the trigger was written (or accepted in a server dry run).
	wrote bool
	// byVersion guards writes with the resource version rather than a test
	// of the trigger (see TriggerWrite).
	byVersion bool
	// unsure holds the trigger times of writes whose answer was lost: the
	// server may have applied them. reread asks the next attempt to look at
	// the binding before writing again.
	unsure []metav1.Time
	reread bool
	// await is set once the trigger is in place and worth waiting for.
	await bool
	// done is set once the waiting is over for this entry.
	done bool
}

// Run rebalances the targets. Duplicate targets collapse into one row, as
// in the controller. It returns an error only for a problem no retry can
// solve (a *RequestError); the rows then show how far the run got. When ctx
// ends first, unfinished rows are left pending.
func (r *Runner) Run(ctx context.Context, targets []Target) (*Result, error) {
	r.defaults()
	entries := newEntries(targets)
	result := &Result{}

	// Reading: one GET per binding.
	if err := r.forEach(ctx, PhaseReading, entries, r.read); err != nil {
		return r.finish(result, entries), err
	}

	at := r.triggerTime(ctx, entries)
	result.TriggerTime = at

	// A watch must start from a resource version taken before the first
	// write, or it could miss the scheduler's answer to that write.
	var watches map[Scope]string
	if r.Wait && r.DryRun == DryRunNone {
		watches = r.startingPoints(ctx, entries)
	}

	err := r.forEach(ctx, PhaseTriggering, entries, func(ctx context.Context, e *entry) error {
		return r.trigger(ctx, e, at)
	})
	for _, e := range entries {
		if e.wrote {
			result.Written++
		}
	}
	if err != nil {
		return r.finish(result, entries), err
	}
	if r.DryRun == DryRunNone && !anyUnresolved(entries) {
		if now, ok := r.Clock.Now(); ok {
			finish := metav1.NewTime(now)
			result.FinishTime = &finish
		}
	}

	if r.Triggered != nil {
		r.Triggered(r.finish(&Result{TriggerTime: at, FinishTime: result.FinishTime, Written: result.Written}, entries))
	}

	if r.Wait && r.DryRun == DryRunNone {
		if err := r.waitForScheduler(ctx, entries, watches); err != nil {
			return r.finish(result, entries), err
		}
	}
	return r.finish(result, entries), nil
}

// DefaultWorkers is how many workloads a run works on side by side when
// its options do not say.
const DefaultWorkers = 16

// WorkersOr is n, or DefaultWorkers when n is not positive.
func WorkersOr(n int) int {
	if n <= 0 {
		return DefaultWorkers
	}
	return n
}

func (r *Runner) defaults() {
	r.Workers = WorkersOr(r.Workers)
	if r.MaxClockWait <= 0 {
		r.MaxClockWait = 10 * time.Second
	}
	if r.Backoff.Duration == 0 {
		r.Backoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 5 * time.Second}
	}
	if r.DryRun == "" {
		r.DryRun = DryRunNone
	}
}

// newEntries makes one entry per distinct target, in controller order.
func newEntries(targets []Target) []*entry {
	seen := make(map[Workload]*entry, len(targets))
	entries := make([]*entry, 0, len(targets))
	for _, t := range targets {
		if e, ok := seen[t.Workload]; ok {
			// The same workload listed twice, once with a known uid.
			if e.target.UID == "" {
				e.target.UID = t.UID
			}
			continue
		}
		e := &entry{target: t, row: Row{Workload: t.Workload, Binding: BindingNameFor(t.Workload)}}
		seen[t.Workload] = e
		entries = append(entries, e)
	}
	sortByKey(entries, func(e *entry) Workload { return e.target.Workload })
	return entries
}

// finish fills the counts of result and hands out the rows.
func (r *Runner) finish(result *Result, entries []*entry) *Result {
	result.Rows = make([]Row, 0, len(entries))
	for _, e := range entries {
		row := e.row
		result.Rows = append(result.Rows, row)
		switch {
		case failedRow(row):
			result.Failed++
		case row.Observation.Outcome == OutcomeWaiting,
			row.Result == "" && r.DryRun == DryRunNone:
			result.Pending++
		}
	}
	return result
}

// anyUnresolved reports whether some entry has no CRD result yet.
func anyUnresolved(entries []*entry) bool {
	for _, e := range entries {
		if e.row.Result == "" {
			return true
		}
	}
	return false
}

// read fetches the binding of e and checks that it belongs to the workload.
func (r *Runner) read(ctx context.Context, e *entry) error {
	w := e.target.Workload
	return r.retry(ctx, e, "timed out before the binding could be read", func() (bool, error) {
		b, err := r.API.Get(ctx, w.Namespace, e.row.Binding)
		if err != nil {
			return r.readFailed(ctx, e, "get", err)
		}
		r.adopt(e, b)
		return true, nil
	})
}

// readFailed handles an error reading the binding of e. It reports whether
// the entry is settled and any error that should stop the run.
func (r *Runner) readFailed(ctx context.Context, e *entry, verb string, err error) (bool, error) {
	w := e.target.Workload
	switch {
	case apierrors.IsNotFound(err):
		e.binding = nil
		e.row.Result, e.row.Reason = appsv1alpha1.RebalanceFailed, appsv1alpha1.RebalanceObjectNotFound
		e.row.Message = BindingRef(w) + " not found"
		if r.Explain != nil {
			if why := r.Explain(ctx, e.target); why != "" {
				e.row.Message += ": " + why
			}
		}
		return true, nil
	case isFatal(err):
		return false, bindingRequestError(verb, w, e.row.Binding, err)
	}
	if ctx.Err() == nil || e.row.Message == "" {
		// A request cut short by the end of the run says nothing new: the
		// row keeps the server's last answer.
		e.row.Message = fmt.Sprintf("reading %s failed, retrying: %v", BindingRef(w), err)
	}
	return false, nil
}

// adopt records a freshly read binding on e, refusing it when it belongs
// to another workload.
func (r *Runner) adopt(e *entry, b *Binding) {
	e.binding = b
	e.row.Before = b.Spec.Clusters
	e.row.After = b.Spec.Clusters
	e.row.Message = ""
	e.row.Unchangeable = UnchangeableReason(&b.Spec)
	if err := VerifyBinding(e.target.Workload, e.target.UID, b.Name, b.Spec.Resource, b.OwnerReferences); err != nil {
		// The controller would write the trigger anyway; the plugin does not
		// reschedule a workload the user did not ask for.
		e.binding = nil
		e.row.Result, e.row.Reason, e.row.ClientReason = appsv1alpha1.RebalanceFailed, "", ReasonBindingMismatch
		e.row.Message = err.Error()
	}
}

// triggerTime picks the run's trigger time: the API server's time, or, when
// a binding was last scheduled in that second or later (same second, or a
// scheduler clock ahead of the API server's), the first server second after
// the latest such schedule, waited for up to MaxClockWait. A client dry run
// does not wait; it reports the time it would have waited for.
func (r *Runner) triggerTime(ctx context.Context, entries []*entry) metav1.Time {
	if r.TriggerAt != nil {
		return *r.TriggerAt
	}
	now, ok := r.Clock.Now()
	if !ok {
		return metav1.Time{}
	}
	limit := now.Add(r.MaxClockWait)
	var latest time.Time
	for _, e := range entries {
		if e.binding == nil {
			continue
		}
		b := e.binding
		if PreTriggerIgnoreReason(b.Labels, b.Spec, b.Status, metav1.NewTime(now)) != ReasonTriggerNotAfterLastSchedule {
			continue
		}
		last := b.Status.LastScheduledTime.Time.Truncate(time.Second)
		if last.Before(limit) && last.After(latest) {
			latest = last
		}
	}
	if latest.IsZero() {
		return metav1.NewTime(now)
	}
	if r.DryRun != DryRunNone {
		return metav1.NewTime(latest.Add(time.Second))
	}
	later, err := r.Clock.WaitUntilAfter(ctx, latest, r.MaxClockWait)
	if err != nil {
		// Only the context ending gets here; the rows end up pending.
		return metav1.NewTime(now)
	}
	return metav1.NewTime(later)
}

// trigger writes the trigger at to the binding of e unless it holds one at
// least as late. The write is conditional on the trigger read; when that
// changed, or a schedule landed in the trigger's second just before the
// write, the binding is looked at again and the write retried.
func (r *Runner) trigger(ctx context.Context, e *entry, at metav1.Time) error {
	if e.binding == nil || e.row.Result != "" {
		return nil
	}
	w := e.target.Workload
	var lostErr error
	err := r.retry(ctx, e, "timed out before the trigger could be written", func() (bool, error) {
		if e.reread {
			// The last write's answer was lost: it may have landed. Look
			// before writing again, or the retry could move a trigger the
			// scheduler has already answered.
			fresh, err := r.API.Get(ctx, w.Namespace, e.row.Binding)
			if err != nil {
				return r.readFailed(ctx, e, "get", err)
			}
			e.reread = false
			before := e.row.Before
			r.adopt(e, fresh)
			if e.binding == nil {
				return true, nil
			}
			e.row.Before = before
			if r.landed(e) {
				return true, nil
			}
		}
		b := e.binding
		when, check := r.laterIfNeeded(ctx, b, at)
		if ctx.Err() != nil {
			return false, nil
		}

		if !NeedsTrigger(b.Spec.RescheduleTriggeredAt, when) || (r.HeldSince != nil && !NeedsTrigger(b.Spec.RescheduleTriggeredAt, *r.HeldSince)) {
			e.row.Result = appsv1alpha1.RebalanceSuccessful
			e.at, e.written = *b.Spec.RescheduleTriggeredAt, b.Generation
			e.row.TriggeredAt = &e.at
			if e.wrote {
				// Our own write, which could not be moved past a schedule
				// stamped too far ahead by the scheduler's clock.
				e.row.Message = ""
				e.row.Observation = check
				return true, nil
			}
			// A trigger this late is already there (another run in the same
			// second): the controller counts that as done, and writing again
			// would change nothing.
			e.row.Message = fmt.Sprintf("the binding already holds trigger %s; nothing written", formatTime(e.at.Time))
			if e.target.Before != nil {
				// Someone else wrote the run's trigger (Karmada's controller
				// acting on the run's record): spec.clusters may hold the
				// scheduler's answer already, even while its status does not
				// say so yet. The caller's read is what came before.
				e.row.Before = e.target.Before
			}
			r.settleObservation(e, PreTriggerCheck(b.Labels, b.Spec, b.Status, e.at), true)
			return true, nil
		}
		if r.DryRun == DryRunClient {
			e.row.TriggeredAt = &when
			e.row.Message = fmt.Sprintf("dry run: would set spec.rescheduleTriggeredAt to %s", formatTime(when.Time))
			e.row.Observation = check
			return true, nil
		}

		write := TriggerWrite{Namespace: b.Namespace, Name: b.Name, At: when, Expected: b.Spec.RescheduleTriggeredAt, DryRun: r.DryRun == DryRunServer}
		if e.byVersion {
			write.ResourceVersion = b.ResourceVersion
		}
		writeCtx, cancel := WriteContext(ctx)
		patched, err := r.API.PatchTrigger(writeCtx, write)
		cancel()
		switch {
		case err == nil:
			e.row.TriggeredAt = &when
			e.wrote = true
			if r.DryRun == DryRunServer {
				e.row.Message = fmt.Sprintf("dry run: the API server accepted spec.rescheduleTriggeredAt %s", formatTime(when.Time))
				e.row.Observation = check
				return true, nil
			}
			if scheduledInOrAfter(patched, when) {
				// The scheduler finished a pass in the trigger's second just
				// before the write landed, so it will not act on it: move
				// the trigger past that pass.
				r.adopt(e, patched)
				e.row.Message = "the binding was scheduled again just before the trigger landed; moving the trigger"
				return e.binding == nil, nil
			}
			e.binding = patched
			e.row.Result = appsv1alpha1.RebalanceSuccessful
			e.at, e.written = when, patched.Generation
			e.row.Message = ""
			r.settleObservation(e, check, false)
			return true, nil
		case errors.Is(err, ErrTriggerChanged), apierrors.IsConflict(err):
			// Someone changed the binding since it was read: look again.
			fresh, getErr := r.API.Get(ctx, w.Namespace, e.row.Binding)
			if getErr != nil {
				return r.readFailed(ctx, e, "get", getErr)
			}
			if errors.Is(err, ErrTriggerChanged) && sameTrigger(fresh.Spec.RescheduleTriggeredAt, b.Spec.RescheduleTriggeredAt) {
				// The trigger did not change, only its spelling differs from
				// how it reads back (written by hand, say): guard the next
				// write with the resource version instead.
				e.byVersion = true
			}
			r.adopt(e, fresh)
			if e.binding == nil {
				return true, nil
			}
			e.row.Message = "the binding changed while it was being triggered; retrying"
			return false, nil
		case apierrors.IsNotFound(err):
			return r.readFailed(ctx, e, "patch", err)
		case isFatal(err):
			return false, bindingRequestError("patch", w, e.row.Binding, err)
		case isRejected(err):
			e.row.Result, e.row.Reason, e.row.ClientReason = appsv1alpha1.RebalanceFailed, "", ReasonTriggerRejected
			e.row.Message = fmt.Sprintf("the API server rejected the trigger on %s: %v", BindingRef(w), err)
			return true, nil
		}
		if r.DryRun == DryRunNone && mayHaveLanded(err) {
			e.unsure = append(e.unsure, when)
			e.reread, lostErr = true, err
		}
		if ctx.Err() == nil || e.row.Message == "" {
			e.row.Message = fmt.Sprintf("triggering %s failed, retrying: %v", BindingRef(w), err)
		}
		return false, nil
	})
	if e.row.Result == "" && e.reread && lostErr != nil {
		// Left pending right after a write whose answer never came: the
		// trigger may be in place, and the next run will find it.
		e.row.Message = fmt.Sprintf("timed out after a trigger write on %s whose answer was lost (it may have landed): %v", BindingRef(w), lostErr)
	}
	return err
}

// landed settles e when its binding holds a trigger this run sent in a write
// whose answer was lost: that write landed, and it is the run's one trigger,
// whatever the scheduler has made of it since. A scheduler that answered it
// has already set lastScheduledTime at or after the trigger, which must not
// be mistaken for a schedule that came just before the write: moving the
// trigger past it would write the binding a second time.
func (r *Runner) landed(e *entry) bool {
	b := e.binding
	held := b.Spec.RescheduleTriggeredAt
	if held == nil || !slices.ContainsFunc(e.unsure, func(t metav1.Time) bool { return sameTrigger(&t, held) }) {
		return false
	}
	e.wrote = true
	e.row.Result = appsv1alpha1.RebalanceSuccessful
	e.at, e.written = *held, b.Generation
	e.row.TriggeredAt = &e.at
	e.row.Message = ""
	// Scheduled at or after the trigger is the scheduler's answer here: let
	// the wait classify it, as for a trigger found in place.
	r.settleObservation(e, PreTriggerCheck(b.Labels, b.Spec, b.Status, e.at), true)
	return true
}

// mayHaveLanded reports whether a failed write may still have been applied:
// anything but an answer that says the server refused it (a failed test or
// precondition, throttling, not found, forbidden, invalid), such as a reset
// connection, a timeout or a 5xx.
func mayHaveLanded(err error) bool {
	switch {
	case errors.Is(err, ErrTriggerChanged), apierrors.IsConflict(err), apierrors.IsTooManyRequests(err),
		apierrors.IsNotFound(err), isFatal(err), isRejected(err):
		return false
	}
	return true
}

// scheduledInOrAfter reports whether b was last scheduled at or after the
// second of at.
func scheduledInOrAfter(b *Binding, at metav1.Time) bool {
	last := b.Status.LastScheduledTime
	return last != nil && !truncate(last.Time).Before(truncate(at.Time))
}

// sameTrigger reports whether two optional trigger times are equal at the
// API server's precision.
func sameTrigger(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return truncate(a.Time).Equal(truncate(b.Time))
}

// laterIfNeeded returns the trigger time to use on b, given the run's time
// at, and what the scheduler would make of it. When b was scheduled in at's
// second or later (typically found after a conflict), it waits for the
// server's clock to pass that schedule, within MaxClockWait.
func (r *Runner) laterIfNeeded(ctx context.Context, b *Binding, at metav1.Time) (metav1.Time, Observation) {
	check := PreTriggerCheck(b.Labels, b.Spec, b.Status, at)
	if check.Reason != ReasonTriggerNotAfterLastSchedule || r.TriggerAt != nil {
		return at, check
	}
	last := b.Status.LastScheduledTime.Time
	var later time.Time
	if r.DryRun != DryRunNone {
		later = last.Truncate(time.Second).Add(time.Second)
		if later.Sub(at.Time) > r.MaxClockWait {
			return at, check
		}
	} else {
		var err error
		if later, err = r.Clock.WaitUntilAfter(ctx, last, r.MaxClockWait); err != nil {
			// Too far ahead: the scheduler's clock leads the API server's by
			// more than the wait allows. Write anyway, as the controller
			// would, and report that the scheduler will ignore it.
			return at, check
		}
	}
	when := metav1.NewTime(later)
	return when, PreTriggerCheck(b.Labels, b.Spec, b.Status, when)
}

// settleObservation records what is known before waiting: an ignored
// trigger is final; otherwise the entry waits for the scheduler.
func (r *Runner) settleObservation(e *entry, check Observation, existing bool) {
	if check.Outcome == OutcomeIgnored {
		if existing && check.Reason == ReasonTriggerNotAfterLastSchedule {
			// An existing trigger the binding was scheduled after has been
			// answered already; let the wait classify it.
			e.await = true
			return
		}
		e.row.Observation = check
		return
	}
	e.await = true
}

// retry runs attempt until it settles the entry, fails fatally, or ctx ends,
// backing off between attempts. An ended context leaves the entry pending
// and is not an error.
func (r *Runner) retry(ctx context.Context, e *entry, timedOut string, attempt func() (bool, error)) error {
	var attemptErr error
	// Until ctx ends: once the backoff reaches its cap it stays there.
	// (ExponentialBackoffWithContext would stop at the cap, leaving a
	// binding pending after a dozen seconds of an apiserver restart.)
	err := r.Backoff.DelayFunc().Until(ctx, true, false, func(context.Context) (bool, error) {
		done, err := attempt()
		attemptErr = err
		return done, err
	})
	switch {
	case attemptErr != nil:
		return attemptErr
	case err == nil:
		return nil
	}
	// The context ended: still pending.
	if e.row.Message == "" {
		e.row.Message = timedOut
	} else {
		e.row.Message = timedOut + "; last error: " + e.row.Message
	}
	return nil
}

// forEach runs fn on every entry with at most Workers at a time. The first
// error stops the entries not yet started and is returned.
func (r *Runner) forEach(ctx context.Context, phase string, entries []*entry, fn func(context.Context, *entry) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu       sync.Mutex
		firstErr error
		done     int
		wg       sync.WaitGroup
	)
	work := make(chan *entry)
	workers := min(r.Workers, len(entries))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				err := fn(ctx, e)
				mu.Lock()
				done++
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				r.report(phase, done, len(entries))
				mu.Unlock()
			}
		}()
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			break
		}
		work <- e
	}
	close(work)
	wg.Wait()
	return firstErr
}

// report passes progress on when someone listens.
func (r *Runner) report(phase string, done, total int) {
	if r.Progress != nil {
		r.Progress(Progress{Phase: phase, Done: done, Total: total})
	}
}

// isFatal reports errors no retry can fix.
func isFatal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}

// isRejected reports a write the API server refused on its merits.
func isRejected(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err)
}

// bindingRequestError wraps err from a request on the binding of w.
func bindingRequestError(verb string, w Workload, name string, err error) error {
	resource := "resourcebindings.work.karmada.io"
	if IsClusterScoped(w) {
		resource = "clusterresourcebindings.work.karmada.io"
	}
	var reqErr *RequestError
	if errors.As(err, &reqErr) {
		return err
	}
	return &RequestError{Verb: verb, Resource: resource, Namespace: w.Namespace, Name: name, Err: err}
}
