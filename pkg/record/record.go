package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	appsclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/typed/apps/v1alpha1"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// RebalancerResource names the WorkloadRebalancer resource in messages.
const RebalancerResource = "workloadrebalancers.apps.karmada.io"

// rebalancerStatusResource names the status subresource in messages.
const rebalancerStatusResource = "workloadrebalancers.apps.karmada.io/status"

// Recorder runs a rebalance as a real WorkloadRebalancer: it creates or
// updates the object, triggers its pending workloads at its
// creationTimestamp, and writes the status through the status subresource
// with the controller's rules. Every write is conditional on the object's
// resource version, so a recorder, another recorder and Karmada's own
// controller can work on one object and still end in one status.
type Recorder struct {
	// Client reaches the WorkloadRebalancers.
	Client appsclient.WorkloadRebalancerInterface
	// Runner triggers the bindings. Its trigger time and hook are set for
	// each pass; everything else (API, server clock, waiting) is used as is.
	Runner *rebalance.Runner
	// Known holds the targets as the caller resolved them: the template
	// uid, so that a binding left over from a deleted template is noticed,
	// and the placement read before the run (rebalance.Target.Before).
	Known map[rebalance.Workload]rebalance.Target
	// Notify, when set, hears one line per step worth telling a user.
	Notify func(message string)
	// StatusTimeout bounds the status write that still happens after the
	// context ended (Ctrl-C, timeout). Zero means 15 seconds.
	StatusTimeout time.Duration
	// Backoff paces retries of requests that may succeed later. Zero means
	// 200ms doubling up to 5s.
	Backoff wait.Backoff
	// Execute, when set, runs a pass's pending workloads instead of
	// runner.Run (a waved run, say). It gets the pass's runner (trigger
	// time: the creationTimestamp), fresh, which selects the workloads to
	// trigger at the server's time when they start instead, and ledger,
	// which records the rows it is handed (a trigger written) in the record
	// and returns ErrRebalancerGone once the record was deleted. It returns
	// what runner.Run would.
	Execute func(ctx context.Context, runner *rebalance.Runner, targets []rebalance.Target, fresh func(rebalance.Workload) bool, ledger func(*rebalance.Result) error) (*rebalance.Result, error)
	// Planned, when set, are the workloads of a waved run in the order
	// given: those the record does not hold yet are started by Reconcile
	// and appended to spec.workloads as their triggers are written.
	Planned []rebalance.Target
	// HeldTTL, when set, is the ttl of a waved run's record, created
	// without one: it is set once every planned workload is in the record,
	// so that neither Karmada's controller nor a later run deletes a record
	// whose listed workloads are done while the run still has others to
	// start (or was stopped before it could).
	HeldTTL *int32
}

// Pass is the result of one reconciliation of a WorkloadRebalancer.
type Pass struct {
	// Rebalancer is the object as recorded at the end of the pass.
	Rebalancer *appsv1alpha1.WorkloadRebalancer
	// Rows has one row per observed workload, in status order. Workloads
	// this pass triggered carry the run's detail; the others are rebuilt
	// from the status.
	Rows []rebalance.Row
	// Ran holds the workloads this pass's runs handled (their rows carry
	// the run's detail), as opposed to those whose rows are rebuilt from
	// the status an earlier pass or another writer recorded.
	Ran map[rebalance.Workload]bool
	// Triggered counts the workloads this pass tried to trigger.
	Triggered int
	// Written counts the bindings whose trigger this pass wrote.
	Written int
}

// ErrRebalancerGone says that the WorkloadRebalancer was deleted while it
// was worked on.
var ErrRebalancerGone = errors.New("the workloadrebalancer was deleted meanwhile")

// SpecConflictError says that the name asked for is taken by a
// WorkloadRebalancer with another spec.
type SpecConflictError struct {
	Name     string
	Existing appsv1alpha1.WorkloadRebalancerSpec
}

func (e *SpecConflictError) Error() string {
	return fmt.Sprintf("workloadrebalancer %s already exists with another spec (%s)", e.Name, DescribeSpec(e.Existing))
}

// DescribeSpec summarises a spec for messages: its workloads and TTL.
func DescribeSpec(spec appsv1alpha1.WorkloadRebalancerSpec) string {
	var names []string
	for i, w := range spec.Workloads {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(spec.Workloads)-3))
			break
		}
		names = append(names, rebalance.WorkloadRef(w))
	}
	ttl := "no ttl"
	if spec.TTLSecondsAfterFinished != nil {
		ttl = fmt.Sprintf("ttlSecondsAfterFinished %d", *spec.TTLSecondsAfterFinished)
	}
	return fmt.Sprintf("workloads %s; %s", joinList(names), ttl)
}

func joinList(items []string) string {
	switch len(items) {
	case 0:
		return "<none>"
	case 1:
		return items[0]
	}
	out := items[0]
	for _, item := range items[1:] {
		out += ", " + item
	}
	return out
}

// Applied says what Apply did.
type Applied string

const (
	// AppliedCreated: the object did not exist and was created.
	AppliedCreated Applied = "created"
	// AppliedConfigured: the object existed and its spec was replaced.
	AppliedConfigured Applied = "configured"
	// AppliedUnchanged: the object existed with a matching spec.
	AppliedUnchanged Applied = "unchanged"
)

// ApplyOptions say how Apply treats an existing object.
type ApplyOptions struct {
	// UpdateSpec replaces the spec of an existing object that differs from
	// the desired one. Without it such an object is a *SpecConflictError.
	UpdateSpec bool
	// AnyTTL lets an existing object match whatever its TTL is (only the
	// workloads are compared); used when no TTL was asked for.
	AnyTTL bool
	// Grow is a waved run's: an existing object whose workloads are all
	// part of the desired ones is its record, continued (the waves append
	// the others as they start them). With UpdateSpec, an object holding
	// others keeps only the desired ones among its own.
	Grow bool
}

// Create creates desired as is, for a name nobody else can hold (a
// generated one).
//
// A named object's creation is retried after an error that may pass; when
// a retry finds the name taken, the earlier attempt landed though its answer
// was lost, and the object it created is returned. A name left to the API
// server (generateName) is never retried: a second object would trigger
// every binding a second time.
func (r *Recorder) Create(ctx context.Context, desired *appsv1alpha1.WorkloadRebalancer) (*appsv1alpha1.WorkloadRebalancer, error) {
	backoff := r.backoff()
	retried := false
	for {
		created, err := r.Client.Create(ctx, clean(desired), metav1.CreateOptions{})
		switch {
		case err == nil:
			return created, nil
		case apierrors.IsAlreadyExists(err) && retried:
			if existing, getErr := r.Client.Get(ctx, desired.Name, metav1.GetOptions{}); getErr == nil && specMatches(existing.Spec, desired.Spec, false) {
				return existing, nil
			}
		case desired.Name != "" && retryable(err) && rebalance.SleepContext(ctx, backoff.Step()) == nil:
			retried = true
			continue
		}
		return nil, rebalancerError("create", desired.Name, err)
	}
}

// Apply creates desired, or brings an existing object of that name to the
// desired spec as opts allow, with a resource version precondition.
func (r *Recorder) Apply(ctx context.Context, desired *appsv1alpha1.WorkloadRebalancer, opts ApplyOptions) (*appsv1alpha1.WorkloadRebalancer, Applied, error) {
	backoff := r.backoff()
	for {
		current, err := r.Client.Get(ctx, desired.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			created, createErr := r.Client.Create(ctx, clean(desired), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(createErr) {
				continue // created meanwhile: compare with it
			}
			if retryable(createErr) && rebalance.SleepContext(ctx, backoff.Step()) == nil {
				// The write may have landed with its answer lost: the next
				// read tells.
				continue
			}
			if createErr != nil {
				return nil, "", rebalancerError("create", desired.Name, createErr)
			}
			return created, AppliedCreated, nil
		case err != nil:
			if retryable(err) && rebalance.SleepContext(ctx, backoff.Step()) == nil {
				continue
			}
			return nil, "", rebalancerError("get", desired.Name, err)
		}

		if current.DeletionTimestamp != nil {
			return nil, "", fmt.Errorf("workloadrebalancer %s is being deleted; wait until it is gone or choose another name", desired.Name)
		}
		if specMatches(current.Spec, desired.Spec, opts.AnyTTL) || (opts.Grow && grownFrom(current.Spec, desired.Spec, opts.AnyTTL)) {
			return current, AppliedUnchanged, nil
		}
		if !opts.UpdateSpec {
			return nil, "", &SpecConflictError{Name: desired.Name, Existing: current.Spec}
		}
		spec := desired.Spec
		if opts.Grow {
			// Only what the record already lists may be in its spec: a new
			// entry is appended once its trigger is written.
			spec.Workloads = common(current.Spec.Workloads, desired.Spec.Workloads)
			if len(spec.Workloads) == 0 {
				return nil, "", &SpecConflictError{Name: desired.Name, Existing: current.Spec}
			}
		}
		updated, err := r.patchSpec(ctx, current, spec)
		switch {
		case err == nil:
			return updated, AppliedConfigured, nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			continue // changed or deleted meanwhile: look again
		case retryable(err) && rebalance.SleepContext(ctx, backoff.Step()) == nil:
			continue
		}
		return nil, "", rebalancerError("patch", desired.Name, err)
	}
}

// patchSpec sets the workloads and ttl of current's spec to spec's with a
// merge patch conditional on current's resource version: fields of the
// object our types do not know stay as the server holds them.
func (r *Recorder) patchSpec(ctx context.Context, current *appsv1alpha1.WorkloadRebalancer, spec appsv1alpha1.WorkloadRebalancerSpec) (*appsv1alpha1.WorkloadRebalancer, error) {
	var ttl any // nil removes the field
	if spec.TTLSecondsAfterFinished != nil {
		ttl = *spec.TTLSecondsAfterFinished
	}
	patch := map[string]any{
		"metadata": map[string]any{"resourceVersion": current.ResourceVersion},
		"spec":     map[string]any{"workloads": spec.Workloads, "ttlSecondsAfterFinished": ttl},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	return r.Client.Patch(ctx, current.Name, types.MergePatchType, data, metav1.PatchOptions{})
}

// grownFrom reports whether existing is a waved record of desired: every
// workload it lists is one of desired's (and, unless anyTTL, its ttl is
// desired's or not set yet).
func grownFrom(existing, desired appsv1alpha1.WorkloadRebalancerSpec, anyTTL bool) bool {
	// A record without a ttl may be one whose run held it back.
	if !anyTTL && existing.TTLSecondsAfterFinished != nil && !reflect.DeepEqual(existing.TTLSecondsAfterFinished, desired.TTLSecondsAfterFinished) {
		return false
	}
	want := make(map[rebalance.Workload]bool, len(desired.Workloads))
	for _, w := range desired.Workloads {
		want[w] = true
	}
	for _, w := range existing.Workloads {
		if !want[w] {
			return false
		}
	}
	return true
}

// common returns the workloads of a that b lists too, in a's order.
func common(a, b []rebalance.Workload) []rebalance.Workload {
	in := make(map[rebalance.Workload]bool, len(b))
	for _, w := range b {
		in[w] = true
	}
	var out []rebalance.Workload
	for _, w := range a {
		if in[w] {
			out = append(out, w)
		}
	}
	return out
}

// specMatches reports whether an existing spec already is the desired one.
// With anyTTL only the workloads count, compared as a set (the status the
// controller derives does not depend on their order or repetition).
func specMatches(existing, desired appsv1alpha1.WorkloadRebalancerSpec, anyTTL bool) bool {
	if anyTTL {
		return SameWorkloads(existing.Workloads, desired.Workloads)
	}
	return reflect.DeepEqual(existing, desired)
}

// SameWorkloads reports whether two workload lists name the same workloads,
// ignoring order and repetition.
func SameWorkloads(a, b []rebalance.Workload) bool {
	set := func(ws []rebalance.Workload) map[rebalance.Workload]bool {
		m := make(map[rebalance.Workload]bool, len(ws))
		for _, w := range ws {
			m[w] = true
		}
		return m
	}
	return reflect.DeepEqual(set(a), set(b))
}

// clean drops what a create must not carry: server-owned metadata and the
// status (which the API server ignores on create anyway).
func clean(rb *appsv1alpha1.WorkloadRebalancer) *appsv1alpha1.WorkloadRebalancer {
	out := &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{
			Name:         rb.Name,
			GenerateName: rb.GenerateName,
			Labels:       rb.Labels,
			Annotations:  rb.Annotations,
		},
		Spec: *rb.Spec.DeepCopy(),
	}
	delete(out.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
	return out
}

// Reconcile does what the controller does on one reconciliation of rb:
// bring the status in line with the spec, trigger every pending workload at
// rb's creationTimestamp, and record the results. The status is written as
// soon as the triggers are written and again after the run (when waiting
// for the scheduler, nothing changes then unless the run was cut short).
// When the spec changes meanwhile, the new generation is reconciled too.
//
// With Planned set, the pass also starts the planned workloads the record
// does not hold yet, each with a trigger at the server's time when it
// starts, and appends each to spec.workloads only once its trigger is
// written (see grower): Karmada's controller, which triggers a new entry at
// the creationTimestamp unless its binding already holds a later trigger,
// then finds nothing to do.
//
// A run cut short by ctx leaves the unfinished workloads pending; the
// status is still written, within StatusTimeout. The error is a
// *RequestError for a request no retry can fix, ErrRebalancerGone when the
// object is deleted meanwhile, or the context's error while writing.
func (r *Recorder) Reconcile(ctx context.Context, rb *appsv1alpha1.WorkloadRebalancer) (*Pass, error) {
	pass := &Pass{Rebalancer: rb, Ran: map[rebalance.Workload]bool{}}
	ran := map[rebalance.Workload]rebalance.Row{}
	planned := r.Planned
	for {
		g := newGrower(r, rb)
		gen := rb.Generation
		pending := PendingWorkloads(SyncStatus(rb.Status, rb.Spec, gen))
		unstarted := g.unstarted(planned)
		planned = nil // a later pass (a spec edit) only reconciles the spec

		var runErr error
		if len(pending)+len(unstarted) > 0 {
			pass.Triggered += len(pending) + len(unstarted)
			runner := *r.Runner
			at := rb.CreationTimestamp
			runner.TriggerAt = &at
			if len(unstarted) > 0 {
				runner.HeldSince = &at
			}
			ledger := func(result *rebalance.Result) error {
				// Record the triggers before waiting for the scheduler, as
				// the controller does; a failure is retried after the run.
				written, err := g.record(ctx, result.Rows)
				if written != nil {
					pass.Rebalancer = written
				}
				return err
			}
			targets := make([]rebalance.Target, 0, len(pending)+len(unstarted))
			for _, w := range pending {
				targets = append(targets, r.target(w))
			}
			targets = append(targets, unstarted...)
			for _, t := range targets {
				g.ran[t.Workload] = true
			}
			var result *rebalance.Result
			switch {
			case r.Execute != nil:
				result, runErr = r.Execute(ctx, &runner, targets, g.isFresh, ledger)
			default:
				runner.Triggered = func(result *rebalance.Result) { _ = ledger(result) }
				result, runErr = runner.Run(ctx, targets)
			}
			if result != nil {
				pass.Written += result.Written
				for _, row := range result.Rows {
					if row.Observation.Reason == rebalance.ReasonTriggerNotAfterLastSchedule && !g.isFresh(row.Workload) {
						// The usual advice (a later trigger) does not apply:
						// a WorkloadRebalancer triggers at its creation.
						row.Observation.Message = fmt.Sprintf("trigger %s, the creationTimestamp of workloadrebalancer %s, is not after the binding's lastScheduledTime, so the scheduler ignores it; "+
							"rebalance the workload with a new workloadrebalancer, or without one", rebalance.FormatTime(at.Time), rb.Name)
					}
					ran[row.Workload] = row
					pass.Ran[row.Workload] = true
				}
			}
		}

		writeCtx := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			writeCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), r.statusTimeout())
			defer cancel()
		}
		rows := make([]rebalance.Row, 0, len(ran))
		for _, row := range ran {
			rows = append(rows, row)
		}
		written, err := g.record(writeCtx, rows)
		if err == nil {
			if markErr := g.markUnstarted(writeCtx, written); markErr != nil {
				err = markErr
			}
		}
		if err != nil && ctx.Err() != nil {
			err = cutByShutdown(ctx, rb.Name, err)
		}
		if written != nil {
			pass.Rebalancer = written
			pass.Rows = RowsFromStatus(written, ran)
		} else if pass.Rows == nil {
			pass.Rows = RowsFromStatus(rb, ran)
		}
		if err != nil {
			if runErr != nil {
				return pass, fmt.Errorf("%w; besides, the status could not be written: %v", runErr, err)
			}
			return pass, err
		}
		if runErr != nil {
			return pass, runErr
		}
		if written.Generation > g.generation() && written.Status.ObservedGeneration < written.Generation && ctx.Err() == nil {
			r.notify(fmt.Sprintf("workloadrebalancer %s: the spec changed meanwhile (generation %d); reconciling it", rb.Name, written.Generation))
			rb = written
			continue
		}
		return pass, nil
	}
}

// writeStatus records, for generation gen with spec, the results of rows
// whose workloads are still pending in the status, with the controller's
// rules, and returns the object as written (or as found, when there was
// nothing to change). A conflict means someone else wrote meanwhile: the
// object is read again and the status derived anew, so results recorded by
// the controller are kept, never overwritten. A status that already
// observes a later generation is left alone.
func (r *Recorder) writeStatus(ctx context.Context, name string, spec appsv1alpha1.WorkloadRebalancerSpec, gen int64, rows []rebalance.Row) (*appsv1alpha1.WorkloadRebalancer, error) {
	backoff := r.backoff()
	for {
		current, err := r.Client.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, ErrRebalancerGone
		case err != nil:
			if retryable(err) && rebalance.SleepContext(ctx, backoff.Step()) == nil {
				continue
			}
			return nil, rebalancerError("get", name, err)
		}
		if current.Status.ObservedGeneration > gen {
			return current, nil
		}

		updated := SyncStatus(current.Status, spec, gen)
		for _, row := range rows {
			if row.Result != "" {
				setIfPending(&updated, row)
			}
		}
		if !SetFinishTime(&current.Status, &updated, r.now()) {
			return current, nil
		}
		written, err := r.patchStatus(ctx, current, updated)
		switch {
		case err == nil:
			return written, nil
		case apierrors.IsConflict(err):
			continue
		case apierrors.IsNotFound(err):
			return nil, ErrRebalancerGone
		case retryable(err) && rebalance.SleepContext(ctx, backoff.Step()) == nil:
			continue
		}
		if rebalance.IsFatal(err) {
			return nil, &rebalance.RequestError{Verb: "patch", Resource: rebalancerStatusResource, Name: name, Err: err}
		}
		return nil, rebalancerError("patch", name, err)
	}
}

// patchStatus writes status as the status of current with a merge patch of
// the fields the status has, conditional on current's resource version:
// whatever else the object holds, fields our types lack included, stays as
// the server has it.
func (r *Recorder) patchStatus(ctx context.Context, current *appsv1alpha1.WorkloadRebalancer, status appsv1alpha1.WorkloadRebalancerStatus) (*appsv1alpha1.WorkloadRebalancer, error) {
	var finish any // nil removes the field
	if status.FinishTime != nil {
		finish = status.FinishTime
	}
	observed := status.ObservedWorkloads
	if observed == nil {
		observed = []appsv1alpha1.ObservedWorkload{}
	}
	data, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": current.ResourceVersion},
		"status": map[string]any{
			"observedWorkloads":  observed,
			"observedGeneration": status.ObservedGeneration,
			"finishTime":         finish,
		},
	})
	if err != nil {
		return nil, err
	}
	return r.Client.Patch(ctx, current.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
}

// setIfPending records the result of row on the entries of its workload that
// have none yet: a result someone else recorded first stays.
func setIfPending(status *appsv1alpha1.WorkloadRebalancerStatus, row rebalance.Row) {
	for i := range status.ObservedWorkloads {
		entry := &status.ObservedWorkloads[i]
		if entry.Workload == row.Workload && IsPending(*entry) && Recordable(row.Result, row.Reason) {
			entry.Result, entry.Reason = row.Result, row.Reason
		}
	}
}

// RowsFromStatus returns one row per observed workload of rb, in status
// order. A workload with a row in ran keeps that row's detail; its result is
// the recorded one. The others get a message saying where their result
// comes from.
func RowsFromStatus(rb *appsv1alpha1.WorkloadRebalancer, ran map[rebalance.Workload]rebalance.Row) []rebalance.Row {
	inSpec := make(map[rebalance.Workload]bool, len(rb.Spec.Workloads))
	for _, w := range rb.Spec.Workloads {
		inSpec[w] = true
	}
	status := rb.Status
	if status.ObservedGeneration < rb.Generation {
		// Show the workloads of the current spec, as the next pass will.
		status = SyncStatus(rb.Status, rb.Spec, rb.Generation)
	}
	rows := make([]rebalance.Row, 0, len(status.ObservedWorkloads))
	for _, entry := range status.ObservedWorkloads {
		row, ok := ran[entry.Workload]
		if !ok {
			row = rebalance.Row{Workload: entry.Workload, Binding: rebalance.BindingNameFor(entry.Workload)}
			switch {
			case !inSpec[entry.Workload]:
				row.Message = "no longer in spec.workloads; kept in the status because it was triggered"
			case IsPending(entry):
				row.Message = "not triggered yet"
			default:
				row.Message = "recorded by an earlier pass"
			}
		}
		switch {
		case IsPending(entry) && ok && !Recordable(row.Result, row.Reason):
			// A refusal of the plugin's own (a binding of another workload,
			// a rejected write): Karmada's controller would leave the entry
			// pending and retry it, and so does the record.
			row.Result, row.Reason = "", ""
			row.Message = joinMessage(row.Message, "left pending in the status, as Karmada's controller would leave it: the next pass tries again")
		case IsPending(entry) && ok && row.Result != "":
			// The run got a result the status does not hold (its write
			// failed): show what happened.
		case row.Result != entry.Result && ok && row.Result != "":
			row.Message = joinMessage(row.Message, fmt.Sprintf("recorded as %s by another writer", entry.Result))
			row.Result, row.Reason = entry.Result, entry.Reason
		default:
			row.Result, row.Reason = entry.Result, entry.Reason
		}
		rows = append(rows, row)
	}
	// Workloads of a waved run the record does not hold (never started, or
	// started and not recorded yet) keep the run's rows, after the others.
	observed := make(map[rebalance.Workload]bool, len(status.ObservedWorkloads))
	for _, entry := range status.ObservedWorkloads {
		observed[entry.Workload] = true
	}
	var extra []rebalance.Row
	for w, row := range ran {
		if !observed[w] {
			extra = append(extra, row)
		}
	}
	slices.SortFunc(extra, func(a, b rebalance.Row) int { return rebalance.CompareWorkloads(a.Workload, b.Workload) })
	return append(rows, extra...)
}

func joinMessage(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// PrepareTriggerTime makes sure that an object created right after it
// returns gets a creationTimestamp after the last schedule of every binding
// of targets, as far as the server's clock allows: a trigger in the second
// of the last schedule, or earlier, is ignored by the scheduler. It reads
// each binding once (a client dry run, whose rows it returns) and waits, up
// to the runner's MaxClockWait, for the server's clock to pass the latest
// such schedule.
func (r *Recorder) PrepareTriggerTime(ctx context.Context, targets []rebalance.Target) (*rebalance.Result, error) {
	reader := *r.Runner
	reader.DryRun = rebalance.DryRunClient
	reader.Wait = false
	reader.Progress, reader.Explain, reader.Triggered, reader.TriggerAt = nil, nil, nil, nil
	result, err := reader.Run(ctx, targets)
	if err != nil {
		return result, err
	}
	now, ok := r.Runner.Clock.Now()
	if !ok || !result.TriggerTime.After(now) {
		return result, nil
	}
	maxWait := r.Runner.MaxClockWait
	if maxWait <= 0 {
		maxWait = 10 * time.Second
	}
	last := result.TriggerTime.Add(-time.Second)
	r.notify(fmt.Sprintf("waiting for the API server's clock to pass %s, when a binding was last scheduled", rebalance.FormatTime(last)))
	if _, err := r.Runner.Clock.WaitUntilAfter(ctx, last, maxWait); err != nil && !errors.Is(err, rebalance.ErrWaitTooLong) {
		return result, err
	}
	return result, nil
}

// Delete deletes rb once it is due, and reports whether it did. It reads
// the object again first and deletes with a precondition on that read's uid
// and resource version, so an object changed meanwhile (a spec edit, a new
// finish time) is never deleted by mistake, nor one with pending workloads; the caller looks at the object
// returned then. ErrRebalancerGone means someone else deleted it.
func (r *Recorder) Delete(ctx context.Context, name string) (bool, *appsv1alpha1.WorkloadRebalancer, error) {
	backoff := r.backoff()
	for {
		fresh, err := r.Client.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, nil, ErrRebalancerGone
		case err != nil:
			if retryable(err) && rebalance.SleepContext(ctx, backoff.Step()) == nil {
				continue
			}
			return false, nil, rebalancerError("get", name, err)
		}
		if fresh.DeletionTimestamp != nil {
			return false, nil, ErrRebalancerGone
		}
		if fresh.Status.ObservedGeneration < fresh.Generation || HasPending(fresh.Status) || !Expired(fresh, r.now().Time) {
			return false, fresh, nil
		}
		uid, rv := fresh.UID, fresh.ResourceVersion
		err = r.Client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		switch {
		case err == nil:
			return true, fresh, nil
		case apierrors.IsNotFound(err):
			return false, nil, ErrRebalancerGone
		case apierrors.IsConflict(err):
			continue // changed meanwhile: look again
		case retryable(err) && rebalance.SleepContext(ctx, backoff.Step()) == nil:
			continue
		}
		return false, fresh, rebalancerError("delete", name, err)
	}
}

// now is the server's time for finish times and TTLs: the server clock's
// lower bound, or the local clock before any response arrived.
func (r *Recorder) now() metav1.Time {
	if r.Runner != nil && r.Runner.Clock != nil {
		if now, ok := r.Runner.Clock.Now(); ok {
			return metav1.NewTime(now)
		}
	}
	return metav1.NewTime(time.Now().Truncate(time.Second))
}

func (r *Recorder) notify(message string) {
	if r.Notify != nil {
		r.Notify(message)
	}
}

// cutByShutdown says so when the last status write after a stop request
// failed because the shutdown budget ran out: client-go's error only says
// "context canceled", which reads like a server that cannot be reached.
func cutByShutdown(ctx context.Context, name string, err error) error {
	if !errors.Is(context.Cause(daemon.Shutdown(ctx)), daemon.ErrShutdownBudget) {
		return err
	}
	return fmt.Errorf("the status of workloadrebalancer %s could not be written before %w, so it may not list every trigger written; "+
		"run the same command again to bring it up to date (it finds the triggers already written and writes none twice): %v", name, daemon.ErrShutdownBudget, err)
}

func (r *Recorder) statusTimeout() time.Duration {
	if r.StatusTimeout <= 0 {
		return 15 * time.Second
	}
	return r.StatusTimeout
}

// backoff paces the Recorder's retries. Its loops are written out rather
// than handed to retry.RetryOnConflict or wait.ExponentialBackoffWithContext
// because each mixes two kinds of retry: an immediate re-read after a
// conflict or a concurrent create (the state changed, look again), and a
// backoff step after a transient error (the server is busy, wait).
func (r *Recorder) backoff() wait.Backoff {
	if r.Backoff.Duration == 0 {
		return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 5 * time.Second}
	}
	return r.Backoff
}

// retryable reports errors that may go away: throttling, timeouts, a busy or
// briefly unavailable server, the network.
func retryable(err error) bool {
	if err == nil || rebalance.IsFatal(err) || rebalance.IsRejected(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return true
}

// rebalancerError wraps an error of a request on the WorkloadRebalancer
// name; errors that need the user's action become a *RequestError.
func rebalancerError(verb, name string, err error) error {
	var reqErr *rebalance.RequestError
	if errors.As(err, &reqErr) {
		return err
	}
	if rebalance.IsFatal(err) || rebalance.IsRejected(err) {
		return &rebalance.RequestError{Verb: verb, Resource: RebalancerResource, Name: name, Err: err}
	}
	return fmt.Errorf("%s workloadrebalancer %s: %w", verb, name, err)
}

// target is w as the caller resolved it, or with nothing known but its name.
func (r *Recorder) target(w rebalance.Workload) rebalance.Target {
	t := r.Known[w]
	t.Workload = w
	return t
}
