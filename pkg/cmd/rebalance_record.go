package cmd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// maxControllerWait bounds how long --server-side waits for the in-cluster
// controller to record a status before it says that none runs.
const maxControllerWait = 30 * time.Second

// generatedNamePrefix starts the names of WorkloadRebalancers the command
// names itself: rebalance-YYYYMMDD-HHMMSS-xxxxx sorts by creation time.
const generatedNamePrefix = "rebalance-"

// recordOptions are the flags that make a run a recorded WorkloadRebalancer.
type recordOptions struct {
	// Name is --name: the WorkloadRebalancer to create, or to reconcile again.
	Name string
	// TTLFlag is --ttl as typed; ttl is its value once validated.
	TTLFlag string
	ttl     *int32
	// WaitTTL is --wait-ttl: after the run, wait for the TTL and delete.
	WaitTTL bool
	// ServerSide is --server-side: leave the triggers to the in-cluster controller.
	ServerSide bool
}

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
}

// addRecordFlags registers the flags of recorded runs.
func (o *RebalanceOptions) addRecordFlags(cmd *cobra.Command) {
	flags := cmd.Flags()
	flags.StringVar(&o.Name, "name", "", "Record the run as a WorkloadRebalancer (apps.karmada.io/v1alpha1) of this name. An existing one that lists the same workloads is reconciled again; one that lists others is left alone.")
	flags.StringVar(&o.TTLFlag, "ttl", "", "Record the run (with a generated name unless --name is given) and set spec.ttlSecondsAfterFinished: the WorkloadRebalancer is deleted this many seconds after it finished; 0 deletes it at once.")
	flags.BoolVar(&o.WaitTTL, "wait-ttl", true, "With a TTL, keep watching the recorded WorkloadRebalancer after the run, reconcile spec edits, and delete it when the TTL runs out. With false, return after the run and leave the deletion to Karmada's controller or a later 'kubectl rebalance workloadrebalancer/NAME'.")
	flags.BoolVar(&o.ServerSide, "server-side", false, "Record the run, but leave the triggers to Karmada's in-cluster workloadRebalancer controller: create or update the WorkloadRebalancer and follow the status the controller writes. Fails when no controller records a status within --timeout (at most 30s).")
}

// validateRecord checks the recording flags.
func (o *RebalanceOptions) validateRecord(cmd *cobra.Command) error {
	o.ttl = nil
	if cmd.Flags().Changed("ttl") {
		seconds, err := strconv.ParseInt(strings.TrimSpace(o.TTLFlag), 10, 32)
		if err != nil {
			return cmdutil.UsageErrorf(cmd, "invalid --ttl %q: give a whole number of seconds, e.g. --ttl 300 (0 deletes the workloadrebalancer as soon as it finished)", o.TTLFlag)
		}
		if seconds < 0 {
			return cmdutil.UsageErrorf(cmd, "invalid --ttl %d: a ttl cannot be negative; give 0 to delete the workloadrebalancer as soon as it finished, or leave --ttl out to keep it", seconds)
		}
		ttl := int32(seconds)
		o.ttl = &ttl
	}
	if cmd.Flags().Changed("name") {
		if problems := validation.IsDNS1123Subdomain(o.Name); len(problems) > 0 {
			return cmdutil.UsageErrorf(cmd, "invalid --name %q: %s", o.Name, strings.Join(problems, "; "))
		}
	}
	if o.recordFlagsGiven() && o.DryRun != rebalance.DryRunNone {
		return cmdutil.UsageErrorf(cmd, "a dry run records nothing: leave out --dry-run, or --name, --ttl and --server-side")
	}
	return nil
}

// recordFlagsGiven reports whether a flag asks for a recorded run.
func (o *RebalanceOptions) recordFlagsGiven() bool {
	return o.Name != "" || o.ttl != nil || o.ServerSide
}

// recordPlan decides whether the run is recorded, and as what: a run driven
// by one WorkloadRebalancer (a manifest, or an object named on the command
// line) applies that object; --name, --ttl or --server-side record any
// other selection under a name of its own. It returns nil for a run that is
// not recorded.
func (o *RebalanceOptions) recordPlan(resolved *rebalance.Resolved) (*recordPlan, error) {
	if o.DryRun != rebalance.DryRunNone {
		return nil, nil
	}
	if len(resolved.Rebalancers) == 1 && len(resolved.Targets) == len(resolved.Rebalancers[0].Spec.Workloads) {
		manifest := resolved.Rebalancers[0]
		if o.Name != "" && manifest.Name != "" && o.Name != manifest.Name {
			return nil, fmt.Errorf("the manifest names workloadrebalancer %s but --name says %s; give the name in one place only", manifest.Name, o.Name)
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
			desired.Name = o.Name
		}
		if o.ttl != nil {
			desired.Spec.TTLSecondsAfterFinished = o.ttl
		}
		return &recordPlan{
			desired:      desired,
			apply:        record.ApplyOptions{UpdateSpec: true},
			generate:     desired.Name == "",
			fromManifest: true,
		}, nil
	}
	if !o.recordFlagsGiven() {
		return nil, nil
	}
	if len(resolved.Targets) == 0 {
		what := "--name, --ttl or --server-side"
		return nil, fmt.Errorf("nothing to record: the selection holds no workload, and a workloadrebalancer needs at least one (%s was given); nothing was created", what)
	}
	return &recordPlan{
		desired: &appsv1alpha1.WorkloadRebalancer{
			ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: o.embed.recordLabels()},
			Spec: appsv1alpha1.WorkloadRebalancerSpec{
				Workloads:               rebalance.DistinctWorkloads(resolved.Targets),
				TTLSecondsAfterFinished: o.ttl,
			},
		},
		apply:    record.ApplyOptions{AnyTTL: o.ttl == nil},
		generate: o.Name == "",
	}, nil
}

// rebalancerKindError explains a failure to map the WorkloadRebalancer kind
// of a manifest: the control plane predates the CRD.
func (o *RebalanceOptions) rebalancerKindError(err error) error {
	if meta.IsNoMatchError(err) && strings.Contains(err.Error(), appsv1alpha1.ResourceKindWorkloadRebalancer) {
		return o.rebalancerNotServed()
	}
	return err
}

// rebalancerNotServed says that the control plane has no WorkloadRebalancer CRD.
func (o *RebalanceOptions) rebalancerNotServed() error {
	return fmt.Errorf("the Karmada control plane behind context %q (%s) does not serve %s: it is older than Karmada v1.10, which introduced WorkloadRebalancers; "+
		"rebalance without --name, --ttl, --server-side or a WorkloadRebalancer manifest (nothing is recorded then), or upgrade Karmada",
		o.contextName(), o.serverURL(), record.RebalancerResource)
}

// runRecorded runs the rebalance as a WorkloadRebalancer: create or update
// it, reconcile it (or, server-side, follow the controller's status), print
// the rows, and follow its TTL.
func (o *RebalanceOptions) runRecorded(ctx context.Context, mapper meta.RESTMapper, resolved *rebalance.Resolved, plan *recordPlan) error {
	checkCtx, cancelCheck := deadlineContext(ctx, o.deadline)
	err := o.mapKind(checkCtx, mapper, rebalance.RebalancerGroupKind, appsv1alpha1.GroupVersion.Version)
	cancelCheck()
	if err != nil {
		if meta.IsNoMatchError(err) {
			return withExitCode(ExitError, o.rebalancerNotServed())
		}
		return o.startupError(ctx, checkCtx, withExitCode(ExitError, o.apiError(err)))
	}

	client, clock, err := o.clockedClient()
	if err != nil {
		return err
	}

	progress := newProgressLine(o.ErrOut)
	notify := func(message string) {
		progress.Clear()
		fmt.Fprintln(o.ErrOut, message)
	}
	notes := newAffinityNotes(rebalance.NewBindingAPI(client))
	api := rebalance.BindingAPI(notes)
	uids := map[rebalance.Workload]types.UID{}
	for _, t := range resolved.Targets {
		if t.UID != "" {
			uids[t.Workload] = t.UID
		}
	}
	rec := &record.Recorder{
		Client: client.AppsV1alpha1().WorkloadRebalancers(),
		Runner: &rebalance.Runner{
			API:      api,
			Clock:    clock,
			Failures: o.failureEvents(),
			Lister:   waves.NewBindingLister(client),
			Options: rebalance.Options{
				Wait:     o.Wait,
				Workers:  o.Burst,
				Settle:   settleWindow,
				Progress: progress.Update,
				Explain:  o.explainMissingBinding(mapper),
			},
		},
		UIDs:   uids,
		Notify: notify,
	}
	engine, closeWaves := o.recordWaves(rec, resolved, client)
	defer closeWaves()

	runCtx, cancel := deadlineContext(ctx, o.deadline)
	defer cancel()

	obj, applied, prepared, err := o.applyRecord(runCtx, rec, resolved, plan)
	progress.Clear()
	if err != nil && runCtx.Err() != nil {
		why := "interrupted"
		if ctx.Err() == nil {
			why = fmt.Sprintf("timed out after %s", o.Timeout)
		}
		return withExitCode(ExitPending, fmt.Errorf("%s before the workloadrebalancer was created or updated; nothing was written", why))
	}
	if err != nil {
		return withExitCode(ExitError, err)
	}
	fmt.Fprintf(o.ErrOut, "workloadrebalancer.%s/%s %s\n", appsv1alpha1.GroupName, obj.Name, applied)

	var (
		rows    []rebalance.Row
		passErr error
	)
	if o.ServerSide {
		obj, rows, passErr = o.followController(runCtx, rec, api, obj, prepared)
	} else {
		var pass *record.Pass
		pass, passErr = rec.Reconcile(runCtx, obj)
		progress.Clear()
		closeWaves()
		if pass != nil {
			obj, rows = pass.Rebalancer, pass.Rows
		}
		if errors.Is(passErr, record.ErrRebalancerGone) && o.Wait && runCtx.Err() == nil {
			// Karmada's controller may finish the record and delete it at
			// the end of its ttl before this run has read the scheduler's
			// answers; the bindings still tell what the triggers did.
			observeRows(runCtx, api, obj.CreationTimestamp, rows, func(row rebalance.Row) bool {
				return row.Result == appsv1alpha1.RebalanceSuccessful && row.Observation.Outcome == rebalance.OutcomeWaiting
			})
		}
	}
	if rows != nil {
		var waveResult *waves.Result
		if engine != nil {
			waveResult = engine.Last
		}
		o.embed.report(rows, waveResult)
		if err := o.printRecorded(obj, rows); err != nil {
			return withExitCode(ExitError, err)
		}
	}
	notes.print(o.ErrOut, o.karmadaRelease)
	if engine != nil {
		o.reportWaveStop(engine.Last, obj.Name)
	}
	var noController *record.NoControllerError
	switch {
	case errors.Is(passErr, record.ErrRebalancerGone):
		// Deleted by someone else (Karmada's controller after a ttl of 0,
		// say) while it was reconciled: what was triggered stays.
		fmt.Fprintf(o.ErrOut, "workloadrebalancer %s was deleted by someone else while it was reconciled; the triggers already written stay\n", obj.Name)
		return o.rowsExitCode(rows, false)
	case errors.As(passErr, &noController):
		return withExitCode(ExitError, passErr)
	case passErr != nil:
		return withExitCode(ExitError, o.recordError(obj, passErr))
	}

	interrupted := false
	if ctx.Err() != nil {
		// Ctrl-C during the run: the status holds what was done.
		interrupted = true
		notify(o.leftMessage("interrupted", obj))
	} else if obj.Spec.TTLSecondsAfterFinished != nil && (record.HasPending(obj.Status) || obj.Status.ObservedGeneration < obj.Generation) {
		// Nothing to count down from: the record is not finished.
		fmt.Fprintf(o.ErrOut, "workloadrebalancer %s still has pending workloads, so its ttl has not started; run `kubectl rebalance workloadrebalancer/%s` to retry them\n", obj.Name, obj.Name)
	} else if obj.Spec.TTLSecondsAfterFinished != nil {
		var followRows []rebalance.Row
		followRows, interrupted, err = o.followTTL(ctx, rec, obj)
		if followRows != nil {
			rows = followRows
		}
		if err != nil {
			return withExitCode(ExitError, o.recordError(obj, err))
		}
	}

	return o.rowsExitCode(rows, interrupted)
}

// rowsExitCode gives the exit code of a recorded run from its rows: failed
// workloads, pending ones, or a wait cut short.
func (o *RebalanceOptions) rowsExitCode(rows []rebalance.Row, interrupted bool) error {
	failed, pending := rebalance.CountRows(rows)
	switch {
	case failed > 0:
		return withExitCode(ExitFailed, silentError{msg: fmt.Sprintf("%d workload(s) failed", failed)})
	case pending > 0:
		return withExitCode(ExitPending, silentError{msg: fmt.Sprintf("%d workload(s) still pending", pending)})
	case interrupted:
		return withExitCode(ExitPending, silentError{msg: "interrupted before the workloadrebalancer was deleted"})
	}
	return nil
}

// applyRecord creates the WorkloadRebalancer of plan, or brings an existing
// one to it. Before creating, it lets the server's clock pass the bindings'
// last schedules, so that the creationTimestamp works as a trigger; the
// client dry run doing that is returned (nil when nothing was created).
func (o *RebalanceOptions) applyRecord(ctx context.Context, rec *record.Recorder, resolved *rebalance.Resolved, plan *recordPlan) (*appsv1alpha1.WorkloadRebalancer, record.Applied, *rebalance.Result, error) {
	desired := plan.desired.DeepCopy()
	targets := make([]rebalance.Target, 0, len(desired.Spec.Workloads))
	for _, w := range desired.Spec.Workloads {
		targets = append(targets, rebalance.Target{Workload: w, UID: rec.UIDs[w]})
	}

	exists := false
	if !plan.generate && desired.Name != "" {
		_, err := rec.Client.Get(ctx, desired.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			exists = true
		case !apierrors.IsNotFound(err):
			return nil, "", nil, o.apiError(&rebalance.RequestError{Verb: "get", Resource: record.RebalancerResource, Name: desired.Name, Err: err})
		}
	}
	var prepared *rebalance.Result
	if !exists {
		var err error
		if prepared, err = rec.PrepareTriggerTime(ctx, targets); err != nil {
			return nil, "", nil, o.apiError(err)
		}
	}

	if plan.generate {
		if desired.GenerateName != "" {
			// The manifest asks the API server to pick the name.
			desired.Name = ""
		} else {
			desired.Name = o.generateName(rec)
		}
		created, err := rec.Create(ctx, desired)
		if err != nil {
			return nil, "", nil, o.apiError(err)
		}
		return created, record.AppliedCreated, prepared, nil
	}

	obj, applied, err := rec.Apply(ctx, desired, plan.apply)
	var conflict *record.SpecConflictError
	if errors.As(err, &conflict) {
		return nil, "", nil, fmt.Errorf("%w; it was left as it is: choose another --name, or change its spec with `kubectl rebalance -f` and a manifest of it (see `kubectl rebalance get %s -o yaml`)",
			err, conflict.Name)
	}
	if err != nil {
		return nil, "", nil, o.apiError(err)
	}
	return obj, applied, prepared, nil
}

// generateName returns a fresh name that says what the object is and sorts
// by time: rebalance-YYYYMMDD-HHMMSS-xxxxx, in the API server's time.
func (o *RebalanceOptions) generateName(rec *record.Recorder) string {
	now, ok := rec.Runner.Clock.Now()
	if !ok {
		now = time.Now()
	}
	return generatedNamePrefix + now.UTC().Format("20060102-150405") + "-" + utilrand.String(5)
}

// followController waits for the in-cluster controller to record the
// object's generation, and builds the rows from its status; with --wait it
// then waits for the scheduler's answers to the triggers of this generation.
func (o *RebalanceOptions) followController(ctx context.Context, rec *record.Recorder, api rebalance.BindingAPI, obj *appsv1alpha1.WorkloadRebalancer, prepared *rebalance.Result) (*appsv1alpha1.WorkloadRebalancer, []rebalance.Row, error) {
	// The workloads this generation has to trigger, as the controller sees them.
	fresh := map[rebalance.Workload]bool{}
	for _, w := range record.PendingWorkloads(record.SyncStatus(obj.Status, obj.Spec, obj.Generation)) {
		fresh[w] = true
	}
	grace := min(o.Timeout, maxControllerWait)
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
	if o.Wait && ctx.Err() == nil {
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
func (o *RebalanceOptions) followTTL(ctx context.Context, rec *record.Recorder, obj *appsv1alpha1.WorkloadRebalancer) ([]rebalance.Row, bool, error) {
	name := obj.Name
	passive := o.ServerSide && o.controllerDeletes(name)
	if !o.WaitTTL {
		if !passive && record.Expired(obj, time.Now()) {
			// A TTL of 0 (or one already over) needs no waiting.
			deleted, _, err := rec.Delete(ctx, name)
			switch {
			case errors.Is(err, record.ErrRebalancerGone):
				fmt.Fprintf(o.ErrOut, "workloadrebalancer %s was deleted by someone else\n", name)
				return nil, false, nil
			case err != nil:
				return nil, false, err
			case deleted:
				fmt.Fprintf(o.ErrOut, "workloadrebalancer.%s/%s deleted (ttlSecondsAfterFinished %d)\n", appsv1alpha1.GroupName, name, *obj.Spec.TTLSecondsAfterFinished)
				return nil, false, nil
			}
		}
		fmt.Fprintln(o.ErrOut, o.leftMessage("not waiting for the ttl (--wait-ttl=false)", obj))
		return nil, false, nil
	}

	result, err := rec.Follow(ctx, obj, record.FollowOptions{Passive: passive, PassTimeout: o.Timeout})
	var rows []rebalance.Row
	if result != nil && len(result.Passes) > 0 {
		last := result.Passes[len(result.Passes)-1]
		rows = last.Rows
		summary := rbprinters.Summarize(rows).String()
		fmt.Fprintf(o.ErrOut, "workloadrebalancer %s, generation %d: %s\n", name, last.Rebalancer.Generation, summary)
	}
	if err != nil {
		return rows, false, err
	}
	last := result.Rebalancer
	switch result.Outcome {
	case record.FollowDeleted:
		fmt.Fprintf(o.ErrOut, "workloadrebalancer.%s/%s deleted (ttlSecondsAfterFinished %d after finish time %s)\n", appsv1alpha1.GroupName, name,
			*last.Spec.TTLSecondsAfterFinished, last.Status.FinishTime.UTC().Format(time.RFC3339))
	case record.FollowDeletedElsewhere:
		fmt.Fprintf(o.ErrOut, "workloadrebalancer %s was deleted by someone else (Karmada's controller, say); nothing is left to do\n", name)
	case record.FollowNoTTL:
		fmt.Fprintf(o.ErrOut, "workloadrebalancer %s no longer has a ttl (spec.ttlSecondsAfterFinished was removed); it stays\n", name)
	case record.FollowUnfinished:
		fmt.Fprintf(o.ErrOut, "workloadrebalancer %s still has pending workloads, so its ttl has not started; run `kubectl rebalance workloadrebalancer/%s` to retry them\n", name, name)
	case record.FollowOverdue:
		fmt.Fprintf(o.ErrOut, "workloadrebalancer %s outlived its ttl and no controller deleted it; run `kubectl rebalance workloadrebalancer/%s` to delete it from the client\n", name, name)
		return rows, true, nil
	case record.FollowInterrupted:
		fmt.Fprintln(o.ErrOut, o.leftMessage("interrupted", last))
		return rows, true, nil
	}
	return rows, false, nil
}

// leftMessage says, after the command stopped early, in what state the
// object is and what is left to do.
func (o *RebalanceOptions) leftMessage(why string, obj *appsv1alpha1.WorkloadRebalancer) string {
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
func (o *RebalanceOptions) recordError(obj *appsv1alpha1.WorkloadRebalancer, err error) error {
	if errors.Is(err, record.ErrRebalancerGone) {
		return fmt.Errorf("workloadrebalancer %s was deleted by someone else while it was reconciled; the triggers already written stay", obj.Name)
	}
	msg := o.apiError(err).Error()
	var request *rebalance.RequestError
	if errors.As(err, &request) && strings.HasSuffix(request.Resource, "/status") {
		return fmt.Errorf("%s; workloadrebalancer %s exists but its status could not be written (the bindings' triggers that were written stay): once that is allowed, run `kubectl rebalance workloadrebalancer/%s` to record the results (nothing is triggered twice)",
			msg, obj.Name, obj.Name)
	}
	return fmt.Errorf("%s; workloadrebalancer %s exists and its status records what was done: fix the cause, then run `kubectl rebalance workloadrebalancer/%s` to finish (nothing is triggered twice)",
		msg, obj.Name, obj.Name)
}

// printRecorded writes the rows (or the recorded object) to stdout and the
// summary to stderr.
func (o *RebalanceOptions) printRecorded(obj *appsv1alpha1.WorkloadRebalancer, rows []rebalance.Row) error {
	switch o.OutputFormat {
	case "", "wide":
		opts := rbprinters.RowPrintOptions{Wide: o.OutputFormat == "wide", NoHeaders: o.NoHeaders, WithNamespace: o.AllNamespaces}
		if err := rbprinters.PrintRows(o.Out, rows, opts); err != nil {
			return err
		}
	default:
		if err := o.printer.PrintObj(printable(obj), o.Out); err != nil {
			return fmt.Errorf("printing workloadrebalancer %s failed: %w", obj.Name, err)
		}
	}
	fmt.Fprintln(o.ErrOut, rbprinters.Summarize(rows).String())
	return nil
}

// printable returns a copy of a WorkloadRebalancer read from the server as
// kubectl get prints it: with its kind, without managed fields.
func printable(obj *appsv1alpha1.WorkloadRebalancer) *appsv1alpha1.WorkloadRebalancer {
	out := obj.DeepCopy()
	out.APIVersion, out.Kind = appsv1alpha1.SchemeGroupVersion.String(), appsv1alpha1.ResourceKindWorkloadRebalancer
	out.ManagedFields = nil
	return out
}
