package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// maxControllerWait bounds how long a server-side run waits for the
// in-cluster controller to record a status before it says that none runs.
const maxControllerWait = 30 * time.Second

// generatedNamePrefix starts the names of WorkloadRebalancers a run names
// itself: rebalance-YYYYMMDD-HHMMSS-xxxxx sorts by creation time.
const generatedNamePrefix = "rebalance-"

// recordPlan is what a recorded run creates or updates.
type recordPlan struct {
	// desired is the object to create, or the spec to bring an existing one to.
	desired *appsv1alpha1.WorkloadRebalancer
	// apply says how an existing object of that name is treated.
	apply record.ApplyOptions
	// generate is set when the command picks the name.
	generate bool
	// fromManifest is set when a WorkloadRebalancer manifest drives the run.
	fromManifest bool
	// grow, set for a waved run, holds its workloads in the order the waves
	// start them: the record is created with the first one only and grows
	// as the others start, and an existing record whose workloads are all
	// part of the run is continued.
	grow []rebalance.Workload
}

// recordPlan decides whether the run is recorded, and as what: a run driven
// by one WorkloadRebalancer (a manifest, or an object named on the command
// line) applies that object; --name, --ttl or --server-side record any
// other selection under a name of its own. It returns nil for a run that is
// not recorded.
func (o Request) recordPlan() (*recordPlan, error) {
	if o.DryRun != rebalance.DryRunNone {
		return nil, nil
	}
	if len(o.Rebalancers) == 1 && len(o.Targets) == len(o.Rebalancers[0].Spec.Workloads) {
		manifest := o.Rebalancers[0]
		if o.Record.Name != "" && manifest.Name != "" && o.Record.Name != manifest.Name {
			return nil, fmt.Errorf("the manifest names workloadrebalancer %s but --name says %s; give the name in one place only", manifest.Name, o.Record.Name)
		}
		desired := &appsv1alpha1.WorkloadRebalancer{
			ObjectMeta: metav1.ObjectMeta{
				Name:         manifest.Name,
				GenerateName: manifest.GenerateName,
				Labels:       manifest.Labels,
				Annotations:  manifest.Annotations,
			},
			Spec: *manifest.Spec.DeepCopy(),
		}
		if desired.Name == "" {
			desired.Name = o.Record.Name
		}
		if o.Record.TTL != nil {
			desired.Spec.TTLSecondsAfterFinished = o.Record.TTL
		}
		return &recordPlan{
			desired:      desired,
			apply:        record.ApplyOptions{UpdateSpec: true},
			generate:     desired.Name == "",
			fromManifest: true,
		}, nil
	}
	if !o.Record.asked() {
		return nil, nil
	}
	if len(o.Targets) == 0 {
		what := "--name, --ttl or --server-side"
		return nil, fmt.Errorf("nothing to record: the selection holds no workload, and a workloadrebalancer needs at least one (%s was given); nothing was created", what)
	}
	return &recordPlan{
		desired: &appsv1alpha1.WorkloadRebalancer{
			ObjectMeta: metav1.ObjectMeta{Name: o.Record.Name, Labels: cloneLabels(o.Record.Labels), Annotations: cloneLabels(o.Record.Annotations)},
			Spec: appsv1alpha1.WorkloadRebalancerSpec{
				Workloads:               rebalance.DistinctWorkloads(o.Targets),
				TTLSecondsAfterFinished: o.Record.TTL,
			},
		},
		apply:    record.ApplyOptions{AnyTTL: o.Record.TTL == nil},
		generate: o.Record.Name == "",
	}, nil
}

// runRecorded runs the rebalance as a WorkloadRebalancer: create or update
// it, reconcile it (or, server-side, follow the controller's status), hand
// over the rows, and follow its TTL.
func (e *Engine) runRecorded(ctx context.Context, req Request, plan *recordPlan) (*Result, error) {
	notice := req.Hooks.notice
	notes := newAffinityNotes(rebalance.NewBindingAPI(e.Karmada))
	api := rebalance.BindingAPI(notes)
	known := make(map[rebalance.Workload]rebalance.Target, len(req.Targets))
	for _, t := range req.Targets {
		known[t.Workload] = t
	}
	runner := e.runner(req, api)
	// A recorded run always writes; its runner keeps the zero value, which
	// each pass's Run takes for DryRunNone.
	runner.DryRun = ""
	rec := &record.Recorder{
		Client: e.Karmada.AppsV1alpha1().WorkloadRebalancers(),
		Runner: runner,
		Known:  known,
		Notify: notice,
	}
	var engine *waves.Engine
	// The make-before-break mover reads its bindings itself: it shows them
	// to the notes too.
	mover := notes.observing(req.recordMover())
	if req.Waves != nil {
		waved := *req.Waves
		waved.Mover = notes.observing(waved.Mover)
		req.Waves = &waved
	}
	switch {
	case req.waved():
		engine = e.waveEngine(req)
	case mover != nil:
		// A recorded run all at once whose workloads move make-before-break
		// hands them to the wave engine too, up to Workers in flight.
		engine = e.allAtOnceEngine(req, mover)
	}
	if req.waved() || (engine != nil && len(plan.desired.Spec.Workloads) > rebalance.WorkersOr(req.Workers)) {
		// The record grows as the engine starts workloads (see
		// record.grower): created with its first workload only, the only
		// one held before it exists (holdRecorded); every other binding is
		// held by its move when it starts, not before. A run all at once
		// whose moves all start together (no more workloads than Workers)
		// holds them all and creates its record whole, as the CRD's own
		// run would list them.
		rec.Planned = recordTargets(plan.desired.Spec.Workloads, known)
		rec.HeldTTL = plan.desired.Spec.TTLSecondsAfterFinished
		plan.grow = engine.Ordered(rec.Planned)
	}
	events := newRunEvents(e.Events)
	if engine != nil {
		engine.Finished = events.workload
	}
	hold := holdRecorded(mover, plan, known, req.Workers)
	// Workloads an existing record lists whose bindings an earlier run left
	// suspended (found once the record is read, see findLeftovers).
	var left *leftovers
	// recordName is the record's, once it exists.
	var recordName string
	if engine != nil {
		// The record's passes hand their pending workloads to the wave
		// engine, whose ledger is the status.
		rec.Execute = func(ctx context.Context, runner *rebalance.Runner, targets []rebalance.Target, fresh func(rebalance.Workload) bool, ledger func(*rebalance.Result) error) (*rebalance.Result, error) {
			// `kubectl rebalance abort` stops starting workloads, `approve`
			// lets a run paused at a step go on (abort.go, gates.go).
			ctx, watched, stopWatch := e.watchRecord(ctx, recordName, notice)
			defer stopWatch()
			if req.waved() && len(req.Waves.Steps) > 0 {
				gates := &stepGates{engine: e, name: recordName, steps: req.Waves.Steps, total: len(plan.grow),
					watched: watched, events: events, notice: notice}
				gates.place(engine, len(rebalance.DistinctWorkloads(targets)))
			}
			engine.FreshTrigger = fresh
			if mover != nil {
				engine.Handover = recordMoves(mover, runner, engine.WaitReady, fresh, hold, left)
			}
			return engine.ExecuteLedger(ctx, runner, targets, func(r *rebalance.Result) error {
				err := ledger(r)
				if errors.Is(err, record.ErrRebalancerGone) {
					return &waves.LedgerGoneError{Message: "the workloadrebalancer of the run was deleted, so no further workload was started (a workload started now could not be recorded)"}
				}
				return err
			})
		}
	}

	runCtx, cancel := e.withDeadline(ctx, req.Deadline)
	defer cancel()

	obj, applied, prepared, err := e.applyRecord(runCtx, rec, plan, hold)
	if hold != nil {
		// A hold no move took over (the run ended before it started) is
		// lifted; one a move took over is gone already.
		defer hold.lift(ctx, notice)
	}
	if err != nil && runCtx.Err() != nil {
		why := "interrupted"
		if ctx.Err() == nil {
			why = fmt.Sprintf("timed out after %s", req.Timeout)
		}
		return nil, &IncompleteError{Err: fmt.Errorf("%s before the workloadrebalancer was created or updated; nothing was written", why)}
	}
	if err != nil {
		return nil, err
	}
	notice(fmt.Sprintf("workloadrebalancer.%s/%s %s", appsv1alpha1.GroupName, obj.Name, applied))
	events.started(obj, req, applied == record.AppliedCreated, engine)
	recordName = obj.Name
	if applied != record.AppliedCreated && mover != nil {
		// A record run again (a resumed failback, a command run again after
		// SIGKILL): no binding it lists stays suspended by an earlier move.
		found, err := findLeftovers(runCtx, mover, obj, known, req.Workers)
		if err != nil && runCtx.Err() == nil {
			notice(fmt.Sprintf("warning: cannot tell whether an earlier run left bindings of workloadrebalancer %s suspended: %v", obj.Name, e.explain(err)))
		}
		left = found
		left.resume(runCtx, mover, req.Workers, notice)
	}
	if req.waved() {
		// A resumed run keeps the failure budget its earlier runs spent.
		engine.FailuresSpent = record.FailuresSpent(obj)
	}

	var (
		rows    []rebalance.Row
		passErr error
	)
	if req.Record.ServerSide {
		// The workloads this generation triggers, as followController
		// reads them.
		fresh := map[rebalance.Workload]bool{}
		for _, w := range record.PendingWorkloads(record.SyncStatus(obj.Status, obj.Spec, obj.Generation)) {
			fresh[w] = true
		}
		obj, rows, passErr = e.followController(runCtx, req, rec, api, obj, prepared)
		events.pass(rows, func(w rebalance.Workload) bool { return fresh[w] })
	} else {
		var pass *record.Pass
		pass, passErr = rec.Reconcile(runCtx, obj)
		if pass != nil {
			obj, rows = pass.Rebalancer, pass.Rows
			events.pass(rows, func(w rebalance.Workload) bool { return pass.Ran[w] })
		}
		if errors.Is(passErr, record.ErrRebalancerGone) && req.Wait && runCtx.Err() == nil {
			// Karmada's controller may finish the record and delete it at
			// the end of its ttl before this run has read the scheduler's
			// answers; the bindings still tell what the triggers did.
			observeRows(runCtx, api, obj.CreationTimestamp, rows, func(row rebalance.Row) bool {
				return row.Result == appsv1alpha1.RebalanceSuccessful && row.Observation.Outcome == rebalance.OutcomeWaiting
			})
		}
	}
	result := &Result{Record: obj}
	result.setRows(rows)
	if req.waved() {
		result.Waves = engine.Last
	}
	if !errors.Is(passErr, record.ErrRebalancerGone) {
		events.ended(obj, rows, e.stopReason(ctx, runCtx, req, result, passErr))
	}
	if rows != nil && req.Hooks.Rows != nil {
		if err := req.Hooks.Rows(result); err != nil {
			return result, err
		}
	}
	notes.report(notice, e.Release)
	if req.waved() {
		if line := WaveStop(engine.Last, obj.Name); line != "" {
			notice(line)
		}
	}
	var noController *record.NoControllerError
	switch {
	case errors.Is(passErr, record.ErrRebalancerGone):
		// Deleted by someone else (Karmada's controller after a ttl of 0,
		// say) while it was reconciled: what was triggered stays.
		notice(fmt.Sprintf("workloadrebalancer %s was deleted by someone else while it was reconciled; the triggers already written stay", obj.Name))
		return result, nil
	case errors.As(passErr, &noController):
		return result, passErr
	case passErr != nil:
		return result, e.recordError(obj, passErr)
	}

	return result, e.afterRecord(ctx, req, rec, result)
}

// stopReason says why a recorded run stopped before every workload was
// done, for its events; "" when it did not: every workload has its result,
// or the scheduler's answer was not waited for.
func (e *Engine) stopReason(ctx, runCtx context.Context, req Request, result *Result, passErr error) string {
	_, pending := rebalance.CountRows(result.Rows)
	switch stop := result.Stopped(); {
	case stop != waves.StopNone && stop != waves.StopLedgerGone:
		return result.Waves.StopMessage
	case ctx.Err() != nil:
		return "interrupted"
	case passErr != nil:
		return "stopped on an error: " + e.explain(passErr).Error()
	case runCtx.Err() != nil && pending > 0:
		return fmt.Sprintf("the timeout of %s expired", req.Timeout)
	}
	return ""
}

// afterRecord is what follows a reconciled record: after Ctrl-C, a word on
// what is left; with a ttl, its wait and the deletion (followTTL).
func (e *Engine) afterRecord(ctx context.Context, req Request, rec *record.Recorder, result *Result) error {
	obj, notice := result.Record, req.Hooks.notice
	switch {
	case ctx.Err() != nil:
		// Ctrl-C during the run: the status holds what was done.
		result.Interrupted, result.TTLCutShort = true, true
		notice(leftMessage("interrupted", obj))
	case obj.Spec.TTLSecondsAfterFinished == nil:
	case record.HasPending(obj.Status) || obj.Status.ObservedGeneration < obj.Generation:
		// Nothing to count down from: the record is not finished.
		notice(fmt.Sprintf("workloadrebalancer %s still has pending workloads, so its ttl has not started; run `kubectl rebalance workloadrebalancer/%s` to retry them", obj.Name, obj.Name))
	default:
		followRows, cutShort, err := e.followTTL(ctx, req, rec, obj)
		if followRows != nil {
			result.setRows(followRows)
		}
		result.TTLCutShort = cutShort
		if err != nil {
			return e.recordError(obj, err)
		}
	}
	return nil
}

// setRows keeps rows as the result's, with their counts.
func (r *Result) setRows(rows []rebalance.Row) {
	r.Rows = rows
	r.Failed, r.Pending = rebalance.CountRows(rows)
}

// applyRecord creates the WorkloadRebalancer of plan, or brings an existing
// one to it. Before creating, it lets the server's clock pass the bindings'
// last schedules, so that the creationTimestamp works as a trigger, and
// holds the bindings of hold (make-before-break moves, see heldTargets);
// the client dry run is returned (nil when nothing was created).
func (e *Engine) applyRecord(ctx context.Context, rec *record.Recorder, plan *recordPlan, hold *heldTargets) (*appsv1alpha1.WorkloadRebalancer, record.Applied, *rebalance.Result, error) {
	desired := plan.desired.DeepCopy()
	targets := recordTargets(desired.Spec.Workloads, rec.Known)
	opts := plan.apply
	if len(plan.grow) > 0 {
		opts.Grow = true
	}

	exists := false
	if !plan.generate && desired.Name != "" {
		_, err := rec.Client.Get(ctx, desired.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			exists = true
		case !apierrors.IsNotFound(err):
			return nil, "", nil, e.explain(&rebalance.RequestError{Verb: "get", Resource: record.RebalancerResource, Name: desired.Name, Err: err})
		}
	}
	var prepared *rebalance.Result
	if !exists {
		var err error
		if prepared, err = rec.PrepareTriggerTime(ctx, targets); err != nil {
			return nil, "", nil, e.explain(err)
		}
		if len(plan.grow) > 0 {
			// Created with the first workload only, which Karmada's
			// controller may trigger at once at the creationTimestamp, as
			// the waves do: the others are appended as they start. Its ttl
			// is set once they all are (Recorder.HeldTTL).
			desired.Spec.Workloads = plan.grow[:1]
			desired.Spec.TTLSecondsAfterFinished = nil
		}
		if err := hold.take(ctx); err != nil {
			return nil, "", nil, e.explain(err)
		}
	}

	if plan.generate {
		if desired.GenerateName != "" {
			// The manifest asks the API server to pick the name.
			desired.Name = ""
		} else {
			desired.Name = generateName(rec)
		}
		created, err := rec.Create(ctx, desired)
		if err != nil {
			return nil, "", nil, e.explain(err)
		}
		return created, record.AppliedCreated, prepared, nil
	}

	obj, applied, err := rec.Apply(ctx, desired, opts)
	var conflict *record.SpecConflictError
	if errors.As(err, &conflict) {
		return nil, "", nil, fmt.Errorf("%w; it was left as it is: choose another --name, or change its spec with `kubectl rebalance -f` and a manifest of it (see `kubectl rebalance get %s -o yaml`)",
			err, conflict.Name)
	}
	if err != nil {
		return nil, "", nil, e.explain(err)
	}
	return obj, applied, prepared, nil
}

// recordTargets makes the targets of a record's workloads, with the
// targets as the caller resolved them (uid, placement read before).
func recordTargets(ws []rebalance.Workload, known map[rebalance.Workload]rebalance.Target) []rebalance.Target {
	targets := make([]rebalance.Target, 0, len(ws))
	for _, w := range ws {
		t := known[w]
		t.Workload = w
		targets = append(targets, t)
	}
	return targets
}

// generateName returns a fresh name that says what the object is and sorts
// by time: rebalance-YYYYMMDD-HHMMSS-xxxxx, in the API server's time.
func generateName(rec *record.Recorder) string {
	now, ok := rec.Runner.Clock.Now()
	if !ok {
		now = time.Now()
	}
	return generatedNamePrefix + now.UTC().Format("20060102-150405") + "-" + utilrand.String(5)
}

// followController waits for the in-cluster controller to record the
// object's generation, and builds the rows from its status; with --wait it
// then waits for the scheduler's answers to the triggers of this generation.
func (e *Engine) followController(ctx context.Context, req Request, rec *record.Recorder, api rebalance.BindingAPI, obj *appsv1alpha1.WorkloadRebalancer, prepared *rebalance.Result) (*appsv1alpha1.WorkloadRebalancer, []rebalance.Row, error) {
	// The workloads this generation has to trigger, as the controller sees them.
	fresh := map[rebalance.Workload]bool{}
	for _, w := range record.PendingWorkloads(record.SyncStatus(obj.Status, obj.Spec, obj.Generation)) {
		fresh[w] = true
	}
	grace := min(req.Timeout, maxControllerWait)
	recorded, err := rec.AwaitStatus(ctx, obj, grace)
	var noController *record.NoControllerError
	switch {
	case errors.As(err, &noController):
		return recorded, nil, fmt.Errorf("%w: Karmada's workloadRebalancer controller does not seem to run (it is one of karmada-controller-manager's default --controllers); "+
			"workloadrebalancer %s is left as it is, its workloads not triggered: run `kubectl rebalance workloadrebalancer/%s` to rebalance them from the client, or `kubectl delete workloadrebalancer %s`",
			err, obj.Name, obj.Name, obj.Name)
	case err != nil && ctx.Err() == nil:
		return recorded, nil, err
	}

	before := map[rebalance.Workload]rebalance.Row{}
	if prepared != nil {
		for _, row := range prepared.Rows {
			before[row.Workload] = row
		}
	}
	ran := map[rebalance.Workload]rebalance.Row{}
	for w := range fresh {
		ran[w] = rebalance.Row{Workload: w, Binding: rebalance.BindingNameFor(w), Before: before[w].Before, Message: before[w].Message}
	}
	rows := record.RowsFromStatus(recorded, ran)
	if req.Wait && ctx.Err() == nil {
		observeRows(ctx, api, recorded.CreationTimestamp, rows, func(row rebalance.Row) bool { return fresh[row.Workload] })
	}
	return recorded, rows, nil
}

// observeRows reads from the bindings what the scheduler made of the
// triggers of the rows that watch selects (triggers at at, the record's
// creationTimestamp), in place, until each has an answer or ctx ends.
func observeRows(ctx context.Context, api rebalance.BindingAPI, at metav1.Time, rows []rebalance.Row, watch func(rebalance.Row) bool) {
	var watched []rebalance.Row
	var index []int
	for i, row := range rows {
		if watch(row) {
			watched = append(watched, row)
			index = append(index, i)
		}
	}
	if len(watched) == 0 {
		return
	}
	rebalance.Observe(ctx, api, at, watched)
	for j, i := range index {
		rows[i] = watched[j]
	}
}

// followTTL waits for the TTL of obj after the run and deletes it (or, with
// --server-side, waits for the controller to). It returns the rows of the
// last reconciliation of a spec edit (nil when there was none) and whether
// Ctrl-C cut the wait short.
func (e *Engine) followTTL(ctx context.Context, req Request, rec *record.Recorder, obj *appsv1alpha1.WorkloadRebalancer) ([]rebalance.Row, bool, error) {
	name, notice := obj.Name, req.Hooks.notice
	passive := req.Record.ServerSide && e.controllerDeletes(name, req.Hooks.notice)
	if req.Record.WaitTTL && req.Record.LeaveTTLToController && !record.Expired(obj, time.Now()) &&
		e.leaveToController(ctx, req, rec, obj, passive) {
		return nil, false, nil
	}
	if !req.Record.WaitTTL {
		if !passive && record.Expired(obj, time.Now()) {
			// A TTL of 0 (or one already over) needs no waiting.
			deleted, _, err := rec.Delete(ctx, name)
			switch {
			case errors.Is(err, record.ErrRebalancerGone):
				notice(fmt.Sprintf("workloadrebalancer %s was deleted by someone else", name))
				return nil, false, nil
			case err != nil:
				return nil, false, err
			case deleted:
				notice(fmt.Sprintf("workloadrebalancer.%s/%s deleted (ttlSecondsAfterFinished %d)", appsv1alpha1.GroupName, name, *obj.Spec.TTLSecondsAfterFinished))
				return nil, false, nil
			}
		}
		notice(leftMessage("not waiting for the ttl (--wait-ttl=false)", obj))
		return nil, false, nil
	}

	result, err := rec.Follow(ctx, obj, record.FollowOptions{Passive: passive, PassTimeout: req.Timeout})
	var rows []rebalance.Row
	if result != nil && len(result.Passes) > 0 {
		last := result.Passes[len(result.Passes)-1]
		rows = last.Rows
		summary := rbprinters.Summarize(rows).String()
		notice(fmt.Sprintf("workloadrebalancer %s, generation %d: %s", name, last.Rebalancer.Generation, summary))
	}
	if err != nil {
		return rows, false, err
	}
	last := result.Rebalancer
	switch result.Outcome {
	case record.FollowDeleted:
		notice(fmt.Sprintf("workloadrebalancer.%s/%s deleted (ttlSecondsAfterFinished %d after finish time %s)", appsv1alpha1.GroupName, name,
			*last.Spec.TTLSecondsAfterFinished, last.Status.FinishTime.UTC().Format(time.RFC3339)))
	case record.FollowDeletedElsewhere:
		notice(fmt.Sprintf("workloadrebalancer %s was deleted by someone else (Karmada's controller, say); nothing is left to do", name))
	case record.FollowNoTTL:
		notice(fmt.Sprintf("workloadrebalancer %s no longer has a ttl (spec.ttlSecondsAfterFinished was removed); it stays", name))
	case record.FollowUnfinished:
		notice(fmt.Sprintf("workloadrebalancer %s still has pending workloads, so its ttl has not started; run `kubectl rebalance workloadrebalancer/%s` to retry them", name, name))
	case record.FollowOverdue:
		notice(fmt.Sprintf("workloadrebalancer %s outlived its ttl and no controller deleted it; run `kubectl rebalance workloadrebalancer/%s` to delete it from the client", name, name))
		return rows, true, nil
	case record.FollowInterrupted:
		notice(leftMessage("interrupted", last))
		return rows, true, nil
	}
	return rows, false, nil
}

// controllerManager is the field manager Karmada's controllers write
// with: the API server records the name client-go's user agent starts
// with, which is the binary's name: karmada-controller-manager in Karmada's
// images, controller-manager when built from Karmada's cmd/controller-manager
// as it is (the test control plane's).
const controllerManager = "karmada-controller-manager"

var controllerManagers = []string{controllerManager, "controller-manager"}

// controllerWrote reports whether Karmada's controllers wrote obj, as its
// managedFields say.
func controllerWrote(obj *appsv1alpha1.WorkloadRebalancer) bool {
	for _, f := range obj.ManagedFields {
		if slices.Contains(controllerManagers, f.Manager) {
			return true
		}
	}
	return false
}

// leaveToController decides, for a finished record whose TTL has not run
// out, whether Karmada's workloadRebalancer controller deletes it: the
// controller handles it (a server-side run followed its status; otherwise
// it wrote the record, which it does on every record it reconciles) and
// its release deletes finished records (v1.13 and newer; passive says it
// for a server-side run). Then it says what deletes the record and when,
// and the run returns. Without a sign of the controller the run waits and
// deletes the record itself, as before.
func (e *Engine) leaveToController(ctx context.Context, req Request, rec *record.Recorder, obj *appsv1alpha1.WorkloadRebalancer, passive bool) bool {
	name := obj.Name
	if req.Record.ServerSide {
		if !passive {
			return false
		}
	} else {
		seen := controllerWrote(obj)
		if !seen && rec.Client != nil {
			// The controller's status write may have come after the
			// run's last one: one read of the record, bounded.
			readCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cur, err := rec.Client.Get(readCtx, name, metav1.GetOptions{})
			cancel()
			seen = err == nil && controllerWrote(cur)
		}
		if !seen || !e.controllerDeletes(name, req.Hooks.notice) {
			return false
		}
	}
	expires, _ := record.ExpiresAt(obj)
	req.Hooks.notice(fmt.Sprintf("workloadrebalancer %s is complete; Karmada's workloadRebalancer controller, which handles it, deletes it at %s (ttlSecondsAfterFinished %d after its finish time), so this command does not wait for it: "+
		"`kubectl rebalance get %s` shows it until then, and --wait-ttl makes the command wait and delete it itself",
		name, expires.UTC().Format(time.RFC3339), *obj.Spec.TTLSecondsAfterFinished, name))
	return true
}

// leftMessage says, after the command stopped early, in what state the
// object is and what is left to do.
func leftMessage(why string, obj *appsv1alpha1.WorkloadRebalancer) string {
	name := obj.Name
	next := fmt.Sprintf("`kubectl rebalance get %s` shows it", name)
	switch {
	case record.HasPending(obj.Status) || obj.Status.ObservedGeneration < obj.Generation:
		return fmt.Sprintf("%s: workloadrebalancer %s still has pending workloads; run `kubectl rebalance workloadrebalancer/%s` to finish them (nothing is triggered twice); %s",
			why, name, name, next)
	case obj.Spec.TTLSecondsAfterFinished == nil:
		return fmt.Sprintf("%s: workloadrebalancer %s is complete and has no ttl, so it stays; %s", why, name, next)
	}
	expires, _ := record.ExpiresAt(obj)
	return fmt.Sprintf("%s: workloadrebalancer %s is complete and left as it is; it is due for deletion at %s (ttlSecondsAfterFinished %d): "+
		"Karmada's workloadRebalancer controller deletes it then if it runs, or run `kubectl rebalance workloadrebalancer/%s` to wait and delete it; %s",
		why, name, expires.UTC().Format(time.RFC3339), *obj.Spec.TTLSecondsAfterFinished, name, next)
}

// recordError explains an error of a recorded run that happened after the
// object was created or updated: the object exists, with what status.
func (e *Engine) recordError(obj *appsv1alpha1.WorkloadRebalancer, err error) error {
	if errors.Is(err, record.ErrRebalancerGone) {
		return fmt.Errorf("workloadrebalancer %s was deleted by someone else while it was reconciled; the triggers already written stay", obj.Name)
	}
	msg := e.explain(err).Error()
	var request *rebalance.RequestError
	if errors.As(err, &request) && strings.HasSuffix(request.Resource, "/status") {
		return fmt.Errorf("%s; workloadrebalancer %s exists but its status could not be written (the bindings' triggers that were written stay): once that is allowed, run `kubectl rebalance workloadrebalancer/%s` to record the results (nothing is triggered twice)",
			msg, obj.Name, obj.Name)
	}
	return fmt.Errorf("%s; workloadrebalancer %s exists and its status records what was done: fix the cause, then run `kubectl rebalance workloadrebalancer/%s` to finish (nothing is triggered twice)",
		msg, obj.Name, obj.Name)
}
