package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/completion"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

var (
	rebalanceLong = templates.LongDesc(`
		Trigger a fresh reschedule of Karmada workloads and show where their
		replicas went.

		For every workload this does what Karmada's WorkloadRebalancer controller
		does, from the client: find the workload's ResourceBinding (or
		ClusterResourceBinding), check that it belongs to the workload, and set
		spec.rescheduleTriggeredAt to the API server's current time unless the
		binding already holds a trigger that late. Results use the controller's
		words and order: Successful, Failed (ReferencedBindingNotFound) or
		pending.

		Unlike the controller, the command makes sure the scheduler can act: a
		binding scheduled in the same second (or by a scheduler whose clock is
		ahead) gets a trigger from the next server second, and bindings the
		scheduler ignores (scheduling suspended, another scheduler, no
		propagation policy, never scheduled) are reported as Ignored. By default
		it then waits until the scheduler has answered every trigger and shows
		the placement before and after.

		Without arguments, the command prints this help.

		Workloads are named as for kubectl get: TYPE/NAME, TYPE NAME..., a
		label selector, --all, or files (-f). A file may hold a WorkloadRebalancer
		manifest; its spec.workloads are rebalanced. The Karmada apiserver is
		the kubeconfig's current context, or the one named by --karmada-context
		(same as --context).

		A run can be recorded as a real WorkloadRebalancer: --name, --ttl or
		--server-side create one, and so does a single WorkloadRebalancer
		manifest given with -f (an existing object of that name gets the
		manifest's spec). Its workloads are triggered at its
		creationTimestamp, as Karmada's controller does, and its status is
		written with the controller's rules. With a ttl (a duration, or
		seconds), when Karmada's workloadRebalancer controller is seen to
		handle the record (it is one of karmada-controller-manager's default
		controllers), the command says when the controller deletes it and
		returns; otherwise, or with --wait-ttl, it waits and deletes it itself
		ttl after it finished. --server-side leaves the
		triggers to Karmada's own controller and follows its status. List
		records with 'kubectl rebalance get'. A recorded run writes its history
		as events on its WorkloadRebalancer (RebalanceStarted,
		WorkloadRescheduled, WorkloadTriggered, WorkloadFailed,
		RebalanceInterrupted, RebalanceFinished), which 'kubectl describe
		workloadrebalancer NAME' shows.

		--max-in-flight N rebalances in waves: at most N workloads between
		their trigger and done (rescheduled and, unless --wait-ready=false,
		the replicas of the new placement ready, as the binding's
		aggregatedStatus reports them); the next one starts as an earlier one
		finishes. --progress-deadline fails a workload that takes too long,
		--max-failures stops starting new ones after that many failures, and
		Ctrl-C stops starting new ones at once. A recorded waved run (--name)
		continues where it stopped when run again, never triggering a workload
		twice. A run of more than 5 workloads says what it is about to do
		first; -i asks before writing.

		Exit codes:

		* 0: every workload was triggered and, when waiting, rescheduled.
		* 1: bad usage or input, or the Karmada apiserver could not be used.
		* 2: some workload failed: it has no binding, its binding belongs to
		  another workload, the scheduler failed, the scheduler ignores the trigger,
		  or (in waves) it was not done within --progress-deadline.
		* 3: the timeout expired while some workload was still pending, or the
		  wait for a recorded WorkloadRebalancer's ttl was interrupted.`)

	rebalanceExample = templates.Examples(`
		# Rebalance one Deployment after a member cluster came back
		kubectl rebalance deploy/nginx

		# Rebalance several workloads of different kinds at once
		kubectl rebalance deploy/nginx clusterrole/nginx-reader configmap/nginx-config

		# Rebalance every Deployment labelled app=web in all namespaces
		kubectl rebalance deployments -l app=web -A

		# Rebalance the workloads listed in a WorkloadRebalancer manifest
		kubectl rebalance -f rebalancer.yaml

		# Show what would be triggered, without writing anything
		kubectl rebalance deployments --all -n shop --dry-run=client

		# Trigger without waiting, and keep the equivalent WorkloadRebalancer
		kubectl rebalance deploy/nginx --wait=false -o yaml > rebalancer.yaml

		# Record the run as a WorkloadRebalancer that is deleted 5 minutes after it finished
		kubectl rebalance deploy/nginx --name nginx-after-failover --ttl 5m

		# Create or update the WorkloadRebalancer of a manifest, as Karmada's controller would handle it
		kubectl rebalance -f rebalancer.yaml

		# See the history of that recorded run: started, each workload rescheduled or failed, finished
		kubectl describe workloadrebalancer nginx-after-failover

		# Leave the triggers to Karmada's in-cluster controller and follow its status
		kubectl rebalance deploy/nginx --server-side --ttl 60

		# Rebalance every Deployment in waves: 20 at a time, each rescheduled and ready within 5m, stopping after 3 failures
		kubectl rebalance deployments -A --max-in-flight 20 --progress-deadline 5m --max-failures 3 --name fleet-rebalance

		# Move one workload and wait; after 'kubectl rebalance approve shop-canary' (from any machine) move the rest
		kubectl rebalance deployments --all -n shop --name shop-canary --steps 1,100%

		# Use a Karmada apiserver context from a kubeconfig shared with member clusters
		kubectl rebalance deploy/nginx --karmada-context karmada-apiserver`)
)

// Defaults of the command's flags.
const (
	defaultTimeout = 2 * time.Minute
	// defaultQPS lets the client write faster than karmada-scheduler answers:
	// it answers a trigger with about two writes of its own, so at its
	// default --kube-api-qps 40 about 20 bindings a second, and about 54 a
	// second on the benchmarks' control plane (QPS 200). A run of one write
	// per workload is then paced by the scheduler, never by this limiter (at
	// 50, 10,000 triggers took at least 200 s against the scheduler's 185 s).
	// The API server stays protected by its own flow control, which the
	// client obeys (429, Retry-After), and a waved run by --max-in-flight:
	// past the first wave it writes only as fast as workloads finish.
	defaultQPS   = 100
	defaultBurst = 100
)

// bindingGroupKind is what a Karmada control plane serves and any other
// cluster does not.
var bindingGroupKind = schema.GroupKind{Group: "work.karmada.io", Kind: "ResourceBinding"}

// RebalanceOptions holds the flags and the state of `kubectl rebalance`.
type RebalanceOptions struct {
	// targetOptions name the workloads and reach the Karmada apiserver.
	*targetOptions
	PrintFlags *genericclioptions.PrintFlags

	// KarmadaContext is the value of --karmada-context, an alias of --context.
	KarmadaContext string
	NoHeaders      bool
	DryRunFlag     string
	Wait           bool
	recordOptions
	predictionOptions
	waveOptions
	handoverOptions

	// typo names the subcommands the first argument may be a typo of
	// (commandTypo); Run asks the server whether it is a resource type.
	typo    []string
	cmdPath string

	// Set by Complete.
	DryRun       rebalance.DryRun
	OutputFormat string
	printer      printers.ResourcePrinter
}

// NewRebalanceOptions returns options with the flags' defaults.
func NewRebalanceOptions(streams genericiooptions.IOStreams) *RebalanceOptions {
	return &RebalanceOptions{
		targetOptions: newTargetOptions(streams),
		PrintFlags:    genericclioptions.NewPrintFlags("rebalanced"),
		DryRunFlag:    "none",
		Wait:          true,
	}
}

// NewCmdRebalance builds the `kubectl rebalance` command tree.
func NewCmdRebalance(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewRebalanceOptions(streams)
	f := cmdutil.NewFactory(cmdutil.NewMatchVersionFlags(o.ConfigFlags))

	cmd := &cobra.Command{
		Use:                   "rebalance (TYPE[.VERSION][.GROUP] [NAME...] | TYPE[.VERSION][.GROUP]/NAME... | -f FILENAME | TYPE -l SELECTOR | TYPE --all)",
		DisableFlagsInUseLine: true,
		Short:                 "Trigger a fresh Karmada reschedule of workloads and show where replicas went",
		Long:                  rebalanceLong,
		Example:               rebalanceExample,
		Annotations:           map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl rebalance"},
		Args:                  cobra.ArbitraryArgs,
		ValidArgsFunction:     completion.ResourceTypeAndNameCompletionFunc(f),
		SilenceUsage:          true,
		SilenceErrors:         true,
		RunE:                  o.runE(f),
	}
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)

	// The kubeconfig flags and -v apply to every subcommand, as in kubectl.
	o.ConfigFlags.AddFlags(cmd.PersistentFlags())
	// kubectl's usage of --request-timeout says nothing of this plugin's
	// commands, whose 0 means different things.
	cmd.PersistentFlags().Lookup("request-timeout").Usage = "How long to wait for the answer to a single request before giving up (a duration such as 30s, or seconds). " +
		"0, the default, sets no limit of its own: kubectl rebalance, plan and get bound their requests by their --timeout; " +
		"deschedule, and the failback daemon's own requests (clusters, records, events, the Lease), give up on a request after 1m."
	addLogFlags(cmd.PersistentFlags())
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		setupClientLogs(streams.ErrOut)
		if err := checkFlagAliases(c.Flags()); err != nil {
			return withExitCode(ExitError, cmdutil.UsageErrorf(c, "%v", err))
		}
		return nil
	}
	cmd.PersistentFlags().StringVar(&o.KarmadaContext, "karmada-context", "",
		"The kubeconfig context of the Karmada apiserver, as in karmadactl; the same as --context.")
	o.AddFlags(cmd)
	if err := registerCompletions(cmd, f); err != nil {
		panic(err) // a programming error: flags registered twice
	}
	_ = cmd.RegisterFlagCompletionFunc("karmada-context", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return sorted(completion.ListContextsInConfig(toComplete)), cobra.ShellCompDirectiveNoFileComp
	})

	cmd.AddCommand(NewCmdVersion(streams))
	cmd.AddCommand(NewCmdCompletion(streams))
	cmd.AddCommand(NewCmdDeschedule(streams))
	cmd.AddCommand(NewCmdFailback(streams))
	cmd.AddCommand(NewCmdGet(streams))
	cmd.AddCommand(NewCmdAbort(streams))
	cmd.AddCommand(NewCmdApprove(streams))
	cmd.AddCommand(NewCmdResume(streams))
	cmd.AddCommand(NewCmdRecover(streams))
	cmd.AddCommand(NewCmdPlan(f, o, streams))
	cmd.AddCommand(NewCmdOptions(streams))
	useKubectlHelp(cmd)
	// Every subcommand explains its flag errors as the root does.
	cmd.SetFlagErrorFunc(flagError)
	useStderrForFlagNotices(cmd, streams.ErrOut)
	return cmd
}

// runE completes, validates and runs the options of a command built with f.
func (o *RebalanceOptions) runE(f cmdutil.Factory) func(*cobra.Command, []string) error {
	complete := func(cmd *cobra.Command, args []string) error {
		o.typo = commandTypo(cmd, args)
		err := o.Complete(f, cmd, args)
		if err != nil && len(o.typo) > 0 {
			// A likely typo explains more than the kubeconfig it could
			// not be checked against.
			return commandTypoError(cmd.CommandPath(), args, o.typo, false)
		}
		return err
	}
	steps := runSteps(o.Run, complete, func(cmd *cobra.Command, _ []string) error { return o.Validate(cmd) })
	return func(cmd *cobra.Command, args []string) error {
		if printHelpWhenBare(cmd, args) {
			return nil
		}
		return steps(cmd, args)
	}
}

// AddFlags registers the command's own flags.
func (o *RebalanceOptions) AddFlags(cmd *cobra.Command) {
	flags := cmd.Flags()
	cmdutil.AddFilenameOptionFlags(cmd, &o.FilenameOptions, "identifying the workloads to rebalance, or a WorkloadRebalancer manifest to create (or update) and reconcile.")
	cmdutil.AddLabelSelectorFlagVar(cmd, &o.LabelSelector)
	flags.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "Rebalance the selected workloads in all namespaces.")
	flags.BoolVar(&o.All, "all", o.All, "Rebalance all workloads of the given types in the namespace.")
	flags.BoolVar(&o.NoHeaders, "no-headers", o.NoHeaders, "Leave out the table's header line (default and wide output).")
	addDryRunFlag(cmd, &o.DryRunFlag, "With client, bindings are only read; with server, the triggers are sent with dryRun=All and nothing is persisted. Nothing is waited for.")
	flags.BoolVar(&o.Wait, "wait", o.Wait, "Wait until the scheduler has answered every trigger, and show the placement it chose.")
	durationVar(flags, &o.Timeout, "timeout", o.Timeout, "How long to retry failed requests and wait for the scheduler before giving up (a duration, or seconds); rows still unfinished are reported as pending (exit code 3). It bounds a make-before-break batch too: no move starts staging after it and a move still waiting for its new replicas is undone, but a move past its settle write (the new replicas took over) finishes, within its own --move-timeout.")
	addRateLimitFlags(cmd, &o.QPS, &o.Burst,
		"Requests per second the client may send to the Karmada apiserver. The default writes faster than karmada-scheduler answers, so that the scheduler sets the pace of a large run; --max-in-flight bounds how much is outstanding.",
		"Requests the client may send at once before --kube-api-qps applies; also the number of bindings handled in parallel.")
	o.addRecordFlags(cmd)
	addSelectionFlags(cmd, &o.Selection, "Rebalance only")
	addEstimatorFlags(cmd, &o.estimatorOptions)
	o.addWaveFlags(cmd)
	o.handoverOptions.addFlags(cmd)

	o.PrintFlags.AddFlags(cmd)
	formats := append([]string{"wide", rbprinters.OutputReportJSON, rbprinters.OutputReportYAML}, o.PrintFlags.AllowedFormats()...)
	flags.Lookup("output").Usage = fmt.Sprintf("Output format. One of: (%s). The default is a table; report-json and report-yaml print a report of a run that is not recorded, for scripts; yaml and json print the WorkloadRebalancer equivalent to the run.",
		strings.Join(formats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// Complete fills the options from the flags, the arguments and the kubeconfig.
func (o *RebalanceOptions) Complete(f cmdutil.Factory, cmd *cobra.Command, args []string) error {
	o.Args = args
	o.factory = f
	o.cmdPath = cmd.CommandPath()

	if cmd.Flags().Changed("karmada-context") {
		if cmd.Flags().Changed("context") && *o.ConfigFlags.Context != o.KarmadaContext {
			return fmt.Errorf("--karmada-context %q and --context %q disagree; give only one of them", o.KarmadaContext, *o.ConfigFlags.Context)
		}
		*o.ConfigFlags.Context = o.KarmadaContext
	}

	mode, err := dryRunMode(o.DryRunFlag, o.ErrOut)
	if err != nil {
		return cmdutil.UsageErrorf(cmd, "%v", err)
	}
	o.DryRun = rebalance.DryRun(mode)

	o.Namespace, o.EnforceNamespace, err = f.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return o.kubeconfigError(err)
	}

	o.OutputFormat = ""
	if o.PrintFlags.OutputFormat != nil {
		o.OutputFormat = *o.PrintFlags.OutputFormat
	}
	if o.OutputFormat != "" && o.OutputFormat != "wide" && !isReport(o.OutputFormat) {
		if o.printer, err = o.PrintFlags.ToPrinter(); err != nil {
			return outputError(o.OutputFormat, err, append([]string{rbprinters.OutputReportJSON, rbprinters.OutputReportYAML}, o.PrintFlags.AllowedFormats()...))
		}
	}
	return nil
}

// Validate checks that the flags and arguments make sense together.
func (o *RebalanceOptions) Validate(cmd *cobra.Command) error {
	noFiles := cmdutil.IsFilenameSliceEmpty(o.Filenames, o.Kustomize)
	switch {
	case len(o.Args) == 0 && noFiles:
		return cmdutil.UsageErrorf(cmd, "name the workloads to rebalance: give TYPE/NAME, TYPE NAME..., TYPE -l SELECTOR, TYPE --all or -f FILENAME")
	case len(o.Args) > 0 && !noFiles:
		return cmdutil.UsageErrorf(cmd, "give the workloads either as arguments or with -f, not both")
	case o.All && o.LabelSelector != "":
		return cmdutil.UsageErrorf(cmd, "--all and --selector cannot be combined: --all already selects every workload of the type")
	case o.Timeout <= 0:
		return cmdutil.UsageErrorf(cmd, "--timeout must be greater than zero, got %s", o.Timeout)
	}
	if err := validateRateLimits(o.QPS, o.Burst); err != nil {
		return cmdutil.UsageErrorf(cmd, "%v", err)
	}
	if err := o.validateEstimator(); err != nil {
		return cmdutil.UsageErrorf(cmd, "%v", err)
	}
	if o.printer == nil && o.OutputFormat != "" && o.OutputFormat != "wide" && !isReport(o.OutputFormat) {
		return cmdutil.UsageErrorf(cmd, "invalid --output %q", o.OutputFormat)
	}
	if err := o.validateWaves(cmd); err != nil {
		return err
	}
	if err := checkBudgetFlags(&o.handoverOptions); err != nil {
		return cmdutil.UsageErrorf(cmd, "%v", err)
	}
	if err := o.handoverOptions.validate(); err != nil {
		return cmdutil.UsageErrorf(cmd, "%v", err)
	}
	return o.validateRecord(cmd)
}

// Run rebalances the workloads and prints the result.
func (o *RebalanceOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// Ctrl-C ends the run like the timeout does: what was written is
	// still reported. A second Ctrl-C ends the process at once.
	ctx, stop := signalContext(ctx)
	defer stop()
	o.quietenClientLogs()
	ctx = o.guard.runs(ctx)
	// --timeout bounds the whole run, from the first request on.
	o.deadline = time.Now().Add(o.Timeout)
	if err := o.checkTypo(ctx); err != nil {
		return err
	}

	mapper, resolved, err := o.startup(ctx)
	if err != nil {
		return err
	}
	if o.needsPrediction() {
		predictCtx, cancel := deadlineContext(ctx, o.deadline)
		var err error
		o.predictions, err = o.selectTargets(predictCtx, resolved, o.Selection)
		cancel()
		if err != nil {
			return err
		}
		if len(resolved.Targets) == 0 && !o.Selection.IsZero() {
			// The selection line on stderr said why nothing is rebalanced.
			if isReport(o.OutputFormat) {
				return o.printReport(&run.Result{})
			}
			return nil
		}
	}
	o.waveDeadline()
	if len(resolved.Targets) > 0 {
		if goOn, err := o.announce(resolved.Targets); err != nil || !goOn {
			return withExitCode(ExitError, err)
		}
	}
	req := o.request(resolved)
	recorded, err := req.Recorded()
	switch {
	case err != nil:
		return withExitCode(ExitError, err)
	case recorded && isReport(o.OutputFormat):
		return withExitCode(ExitError, fmt.Errorf("-o %s reports plain runs; a recorded run (--name, --ttl, --server-side or a WorkloadRebalancer manifest) is shown by 'kubectl rebalance get NAME'", o.OutputFormat))
	case !recorded && len(o.steps) > 0:
		return withExitCode(ExitError, fmt.Errorf("--steps needs a recorded run, so that `kubectl rebalance approve NAME` can find it: add --name NAME (e.g. --name canary %s); nothing was written", waves.StepsExample))
	case recorded:
		if err := o.checkRebalancerServed(ctx, mapper); err != nil {
			return err
		}
	case len(resolved.Targets) == 0:
		o.printNothingFound()
		return nil
	}

	engine, err := o.engine(mapper)
	if err != nil {
		return err
	}
	var events *daemon.EventRecorder
	if recorded {
		// The run's history, on its WorkloadRebalancer for kubectl describe.
		if events, err = o.runEvents(); err != nil {
			return withExitCode(ExitError, err)
		}
		engine.Events = events.Recorder()
	}
	if !o.ServerSide {
		// A server-side run leaves its triggers to Karmada's controller;
		// every other run, recorded or not, moves make-before-break (a
		// recorded one grows its record as the moves release, see
		// run.Engine.runRecorded).
		if mover := o.handoverMover(engine, req.Targets); mover != nil {
			req.Mover = mover
			if req.Waves != nil {
				req.Waves.Mover = mover
			}
		}
	}
	out := o.newRunOutput(resolved)
	defer out.close()
	req.Hooks = out.hooks()
	result, err := engine.Run(ctx, req)
	out.close()
	if events != nil {
		o.flushRunEvents(ctx, events, result)
	}
	return o.exitCode(result, err, recorded)
}

// checkTypo refuses a first argument that is likely a mistyped
// subcommand (o.typo) unless the Karmada apiserver serves a resource type
// of that name. A server that cannot be asked does not make a typo a type.
func (o *RebalanceOptions) checkTypo(ctx context.Context) error {
	if len(o.typo) == 0 {
		return nil
	}
	checkCtx, cancel := deadlineContext(ctx, o.deadline)
	defer cancel()
	defer o.guard.bind(o.guard.bind(checkCtx))
	mapper, err := o.factory.ToRESTMapper()
	if err == nil {
		_, err = mapper.ResourceFor(schema.GroupVersionResource{Resource: strings.ToLower(o.Args[0])})
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return withExitCode(ExitPending, errors.New("interrupted before any binding was read; nothing was written"))
	}
	return withExitCode(ExitError, commandTypoError(o.cmdPath, o.Args, o.typo, meta.IsNoMatchError(err)))
}

// request turns the flags and the resolved workloads into a run.
func (o *RebalanceOptions) request(resolved *rebalance.Resolved) run.Request {
	req := run.Request{
		Targets:     resolved.Targets,
		Rebalancers: resolved.Rebalancers,
		DryRun:      o.DryRun,
		Wait:        o.Wait,
		Workers:     o.Burst,
		Timeout:     o.Timeout,
		Deadline:    o.deadline,
		Record: run.Recording{
			Name:    o.Name,
			TTL:     o.ttl,
			WaitTTL: o.WaitTTL,
			// Unless --wait-ttl is given, a record Karmada's controller
			// deletes is left to it.
			LeaveTTLToController: !o.waitTTLGiven,
			ServerSide:           o.ServerSide,
		},
	}
	if o.MaxInFlight > 0 {
		req.Waves = &run.Waves{
			Options: waves.Options{
				MaxInFlight:      o.MaxInFlight,
				WaitReady:        o.WaitReady,
				ProgressDeadline: o.ProgressDeadline,
				MaxFailures:      o.MaxFailures,
				Pause:            o.Pause,
			},
			Given: o.Order == orderGiven,
			Steps: o.steps,
		}
		// What `get -w` and `kubectl rebalance resume` need of a waved
		// record beyond what it lists (rebalance_planned.go).
		req.Record.Annotations = o.planAnnotations(resolved.Targets)
	}
	return req
}

// exitCode gives the command's answer for how the run ended: an error of
// its own, failed workloads, pending ones, or a wait cut short.
func (o *RebalanceOptions) exitCode(result *run.Result, err error, recorded bool) error {
	var incomplete *run.IncompleteError
	switch {
	case errors.As(err, &incomplete):
		return withExitCode(ExitPending, err)
	case err != nil:
		return withExitCode(ExitError, err)
	}
	if !recorded && result.Interrupted && result.Waves == nil {
		fmt.Fprintln(o.ErrOut, interruptedSummary(&rebalance.Result{Rows: result.Rows, Written: result.Written}, o.DryRun))
	}
	pendingAfter := ""
	if !recorded {
		pendingAfter = " after " + o.Timeout.String()
	}
	switch {
	case result.Failed > 0:
		return withExitCode(ExitFailed, silentError{msg: fmt.Sprintf("%d workload(s) failed", result.Failed)})
	case result.Pending > 0:
		return withExitCode(ExitPending, silentError{msg: fmt.Sprintf("%d workload(s) still pending%s", result.Pending, pendingAfter)})
	case result.TTLCutShort:
		return withExitCode(ExitPending, silentError{msg: "interrupted before the workloadrebalancer was deleted"})
	}
	return nil
}

// printNothingFound says, like kubectl get, that the selection was empty.
func (o *targetOptions) printNothingFound() {
	switch {
	case o.AllNamespaces:
		fmt.Fprintln(o.ErrOut, "No resources found")
	default:
		fmt.Fprintf(o.ErrOut, "No resources found in %s namespace.\n", o.Namespace)
	}
}
