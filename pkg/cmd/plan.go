package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/completion"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

var (
	planLong = templates.LongDesc(`
		Predict, without writing anything, where a fresh reschedule would put
		each workload's replicas, and what would move.

		The prediction runs Karmada's own scheduling algorithm (the generic
		scheduler, its default plugins and the general estimator, from the
		Karmada module this plugin is built with) over the live Cluster objects
		and each binding's placement and replica requirements. Where
		karmada-scheduler also asks a karmada-scheduler-estimator per member
		(--scheduler-estimator), the free capacity it would answer is computed
		with the estimator's code from each member's nodes and pods, read
		through the Karmada cluster proxy or --member-kubeconfig. Workloads are
		predicted in the order kubectl rebalance triggers them. Like
		karmada-scheduler with its default feature gates, every decision of a
		batch reads the same resource summaries (members refresh them only
		every status update period); a warning names each cluster the batch
		would give more replicas than it has room for. With
		--overcommit-protection each decision instead deducts its footprint
		before the next one, as karmada-scheduler does with the
		SchedulingOvercommitProtection feature gate.

		Where the Karmada release the control plane runs (told from the API it
		serves) schedules differently from the module's, the prediction
		follows the release: replicas are divided by the Webster method from
		v1.16 and by floor shares and remainders before, and resource models
		are counted the way the release counts them. A workload whose
		placement the release decides at random, or by a rule the control
		plane's release cannot be told apart on, is CannotPredict, and the
		message says why.

		Every workload gets a verdict: WouldMove, Unchanged, CannotFit (the
		scheduler would fail; with NoClusterFit it would empty the placement),
		CannotPredict (the scheduler would consult something the client cannot
		see: a karmada-scheduler-estimator of a member whose nodes and pods
		could not be read, or a cluster that is not Ready; or data is
		missing), or CannotChange (the scheduler ignores the
		trigger, or the placement is Duplicated or divided by static weights).
		The table is followed by the replicas per cluster before and after
		and the counts of each verdict. -o wide adds the division and the
		reason of each verdict; -o report-json and -o report-yaml print a
		report for scripts (see docs/plan.md); -o yaml and -o json print a
		WorkloadRebalancer of the selected workloads, to apply or to pass to
		kubectl rebalance -f.

		Workloads are named as for kubectl rebalance. -C/--clusters keeps the
		workloads that would gain replicas on one of the clusters named,
		--changed-only those whose placement would change. Reads cost one LIST of clusters and one
		LIST of bindings per namespace (one in all with -A), whatever the
		number of workloads.`)

	planExample = templates.Examples(`
		# What would a rebalance of every Deployment do?
		kubectl rebalance plan deployments -A

		# Which workloads would come back to member1, which recovered from a failure?
		kubectl rebalance plan deployments -A -C member1

		# The same with the division and the reason of each verdict
		kubectl rebalance plan deployments -A -C member1 -o wide

		# A WorkloadRebalancer of only the workloads that would change, to review and apply
		kubectl rebalance plan deployments -n shop --all --changed-only -o yaml > rebalancer.yaml

		# A report for scripts
		kubectl rebalance plan deployments -A -o report-json | jq '.summary'`)
)

// PlanOptions holds the flags and the state of `kubectl rebalance plan`.
type PlanOptions struct {
	// targets name the workloads and reach the Karmada apiserver, as for
	// kubectl rebalance.
	targets    *targetOptions
	PrintFlags *genericclioptions.PrintFlags
	NoHeaders  bool
	// Selection holds -C/--clusters and --changed-only.
	Selection predict.Selection
	// Options hold --overcommit-protection.
	Options predict.Options

	// Set by Complete.
	OutputFormat string
	printer      printers.ResourcePrinter

	genericiooptions.IOStreams
}

// NewCmdPlan builds the `plan` subcommand. It reads the kubeconfig flags of
// the root command through root and f.
func NewCmdPlan(f cmdutil.Factory, root *RebalanceOptions, streams genericiooptions.IOStreams) *cobra.Command {
	targets := newTargetOptions(streams)
	targets.ConfigFlags = root.ConfigFlags
	// The clients built from root's flags report to root's guard, so
	// plan's Ctrl-C, --timeout and messages must use that one.
	targets.guard = root.guard
	o := &PlanOptions{targets: targets, PrintFlags: genericclioptions.NewPrintFlags(""), IOStreams: streams}

	cmd := &cobra.Command{
		Use:                   "plan (TYPE[.VERSION][.GROUP] [NAME...] | TYPE[.VERSION][.GROUP]/NAME... | -f FILENAME | TYPE -l SELECTOR | TYPE --all)",
		DisableFlagsInUseLine: true,
		Short:                 "Predict where a fresh reschedule would put workloads, without writing anything",
		Long:                  planLong,
		Example:               planExample,
		Args:                  cobra.ArbitraryArgs,
		ValidArgsFunction:     completion.ResourceTypeAndNameCompletionFunc(f),
		SilenceUsage:          true,
		SilenceErrors:         true,
		RunE: runSteps(o.Run,
			func(cmd *cobra.Command, args []string) error { return o.Complete(f, root, cmd, args) },
			func(cmd *cobra.Command, _ []string) error { return o.Validate(cmd) }),
	}
	flags := cmd.Flags()
	cmdutil.AddFilenameOptionFlags(cmd, &targets.FilenameOptions, "identifying the workloads to predict, or a WorkloadRebalancer manifest whose workloads to predict.")
	cmdutil.AddLabelSelectorFlagVar(cmd, &targets.LabelSelector)
	flags.BoolVarP(&targets.AllNamespaces, "all-namespaces", "A", false, "Predict the selected workloads in all namespaces.")
	flags.BoolVar(&targets.All, "all", false, "Predict all workloads of the given types in the namespace.")
	flags.BoolVar(&o.NoHeaders, "no-headers", false, "Leave out the table's header line (default and wide output).")
	durationVar(flags, &targets.Timeout, "timeout", targets.Timeout, "How long to wait for the API server before giving up (a duration, or seconds).")
	addSelectionFlags(cmd, &o.Selection, "Keep only")
	addEstimatorFlags(cmd, &targets.estimatorOptions)
	flags.BoolVar(&o.Options.OvercommitProtection, "overcommit-protection", false,
		"Predict for a karmada-scheduler running with --feature-gates=SchedulingOvercommitProtection=true: each decision of a batch deducts its whole footprint from the clusters it lands on before the next one. By default every decision reads the clusters' summaries as reported now, as the scheduler does without that gate.")
	o.PrintFlags.AddFlags(cmd)
	formats := append([]string{"wide", rbprinters.OutputReportJSON, rbprinters.OutputReportYAML}, o.PrintFlags.AllowedFormats()...)
	flags.Lookup("output").Usage = fmt.Sprintf("Output format. One of: (%s). The default is a table; yaml and json print a WorkloadRebalancer of the selected workloads.", strings.Join(formats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// addSelectionFlags registers -C/--clusters and --changed-only, which plan
// and kubectl rebalance share; verb starts their help.
func addSelectionFlags(cmd *cobra.Command, sel *predict.Selection, verb string) {
	addClustersFlag(cmd.Flags(), &sel.Clusters, verb+" the workloads whose predicted placement gives one of these member clusters more replicas than it has now (e.g. -C member1,member2, or -C member1 -C member2).")
	// --to-cluster named one cluster before -C/--clusters, karmadactl's
	// name, took a list.
	addFlagAlias(cmd.Flags(), "clusters", "to-cluster", true)
	cmd.Flags().BoolVar(&sel.ChangedOnly, "changed-only", false, verb+" the workloads whose predicted placement differs from the current one.")
}

// Complete fills the options from the flags, the arguments and the kubeconfig.
func (o *PlanOptions) Complete(f cmdutil.Factory, root *RebalanceOptions, cmd *cobra.Command, args []string) error {
	t := o.targets
	t.Args, t.factory = args, f
	if cmd.Flags().Changed("karmada-context") {
		if cmd.Flags().Changed("context") && *t.ConfigFlags.Context != root.KarmadaContext {
			return fmt.Errorf("--karmada-context %q and --context %q disagree; give only one of them", root.KarmadaContext, *t.ConfigFlags.Context)
		}
		*t.ConfigFlags.Context = root.KarmadaContext
	}
	var err error
	t.Namespace, t.EnforceNamespace, err = f.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return t.kubeconfigError(err)
	}
	o.OutputFormat = ""
	if o.PrintFlags.OutputFormat != nil {
		o.OutputFormat = *o.PrintFlags.OutputFormat
	}
	switch o.OutputFormat {
	case "", "wide", rbprinters.OutputReportJSON, rbprinters.OutputReportYAML:
	default:
		if o.printer, err = o.PrintFlags.ToPrinter(); err != nil {
			return fmt.Errorf("invalid --output %q: use one of wide, %s, %s, %s", o.OutputFormat,
				rbprinters.OutputReportJSON, rbprinters.OutputReportYAML, strings.Join(o.PrintFlags.AllowedFormats(), ", "))
		}
	}
	return nil
}

// Validate checks that the flags and arguments make sense together.
func (o *PlanOptions) Validate(cmd *cobra.Command) error {
	t := o.targets
	noFiles := cmdutil.IsFilenameSliceEmpty(t.Filenames, t.Kustomize)
	switch {
	case len(t.Args) == 0 && noFiles:
		return cmdutil.UsageErrorf(cmd, "name the workloads to predict: give TYPE/NAME, TYPE NAME..., TYPE -l SELECTOR, TYPE --all or -f FILENAME")
	case len(t.Args) > 0 && !noFiles:
		return cmdutil.UsageErrorf(cmd, "give the workloads either as arguments or with -f, not both")
	case t.All && t.LabelSelector != "":
		return cmdutil.UsageErrorf(cmd, "--all and --selector cannot be combined: --all already selects every workload of the type")
	case t.Timeout <= 0:
		return cmdutil.UsageErrorf(cmd, "--timeout must be greater than zero, got %s", t.Timeout)
	}
	if err := t.validateEstimator(); err != nil {
		return cmdutil.UsageErrorf(cmd, "%v", err)
	}
	return nil
}

// Run predicts and prints.
func (o *PlanOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	t := o.targets
	ctx = t.guard.runs(ctx)
	t.quietenClientLogs()
	// --timeout bounds the whole run, from the first request on.
	t.deadline = time.Now().Add(t.Timeout)

	source, err := t.predictSource(predict.EstimatorMode(t.Estimator))
	if err != nil {
		return err
	}
	// Once the types are mapped, what predicting reads is read while the
	// workloads are resolved, where their namespace is known already.
	t.mapped = func(mapper meta.RESTMapper) { t.ahead = t.startReadAhead(ctx, mapper, source) }
	defer func() { t.ahead.Stop() }()
	_, resolved, err := t.startup(ctx)
	if err != nil {
		return err
	}
	if len(resolved.Targets) == 0 {
		t.printNothingFound()
		return nil
	}
	runCtx := ctx
	ctx, cancel := context.WithDeadline(ctx, t.deadline)
	defer cancel()
	if o.Options.OvercommitProtection && !t.hasOvercommitGate() {
		info, err := t.karmadaRelease()
		fmt.Fprintf(t.ErrOut, "warning: --overcommit-protection ignored: %s, whose karmada-scheduler has no SchedulingOvercommitProtection feature gate (added in v1.18); "+
			"predicting as it schedules, every decision of the batch reading the same resource summaries\n", karmadaversion.Describe(info, err))
		o.Options.OvercommitProtection = false
	}
	predictions, clusters, err := t.predict(ctx, resolved.Targets, o.Selection, predict.EstimatorMode(t.Estimator), o.Options)
	if err != nil {
		return t.predictError(runCtx, ctx, err)
	}
	selected := predict.Select(predictions, o.Selection)
	if err := o.print(selected); err != nil {
		return err
	}
	if !o.Options.OvercommitProtection {
		warnOvercommits(t.ErrOut, predict.Overcommits(clusters, selected), t.hasOvercommitGate())
	}
	return nil
}

// predictError turns an error of predict's reads into the interruption or
// the timeout that caused it, when one did: plan writes nothing, and the
// user hears why nothing was predicted (exit 3, as before the workloads
// were read).
func (o *session) predictError(runCtx, ctx context.Context, err error) error {
	switch {
	case runCtx.Err() != nil:
		return withExitCode(ExitPending, errors.New("interrupted before the bindings and clusters were read; nothing was predicted, and plan writes nothing"))
	case ctx.Err() != nil, !time.Now().Before(o.deadline):
		// The read ahead has a deadline of its own at the same time, which
		// may pass a moment before ctx's.
		return withExitCode(ExitPending, fmt.Errorf("--timeout %s ran out before the bindings and clusters were read: the API server at %s (context %q) did not answer %s in time; run plan again with a longer --timeout",
			o.Timeout, o.serverURL(), o.contextName(), describeRequest(o.guard.lastFailed())))
	}
	return err
}

// predict reads the bindings and clusters of targets (or takes those read
// ahead, o.ahead) and predicts them. It fails when --clusters names a
// cluster the control plane does not have.
func (o *targetOptions) predict(ctx context.Context, targets []rebalance.Target, sel predict.Selection, mode predict.EstimatorMode, opts predict.Options) ([]predict.Prediction, []*clusterv1alpha1.Cluster, error) {
	in, ok, err := o.ahead.Input(ctx, targets, o.AllNamespaces)
	if !ok {
		source, serr := o.predictSource(mode)
		if serr != nil {
			return nil, nil, serr
		}
		// The release is told from the ResourceBinding schema, one or two
		// GETs and a large document to decode: that goes on while the
		// bindings are listed instead of after them (karmadaRelease reads it
		// once; the call below waits for this one).
		go func() { _, _ = o.karmadaRelease() }()
		in, err = source.Read(ctx, targets, o.AllNamespaces)
	}
	if err != nil {
		return nil, nil, withExitCode(ExitError, o.apiError(err))
	}
	for _, want := range sel.Clusters {
		if slices.ContainsFunc(in.Clusters, func(c *clusterv1alpha1.Cluster) bool { return c.Name == want }) {
			continue
		}
		names := make([]string, 0, len(in.Clusters))
		for _, c := range in.Clusters {
			names = append(names, c.Name)
		}
		return nil, nil, withExitCode(ExitError, fmt.Errorf("--clusters %q: no such member cluster on %s (clusters: %s); name a cluster from 'kubectl get clusters'",
			want, o.serverURL(), strings.Join(names, ", ")))
	}
	// The release decides where its scheduler differs from the pinned one
	// (one or two GETs). Unknown, the pinned rules apply, and the user is told.
	if info, err := o.karmadaRelease(); err == nil {
		opts.Release = &info
	} else {
		fmt.Fprintf(o.ErrOut, "warning: %s; predicting with the rules of the scheduler this plugin is built with (Karmada %s)\n",
			karmadaversion.Describe(info, err), karmadaversion.NewestTested)
	}
	if opts.InFlight == 0 {
		// A rebalance writes its triggers with --burst writers (plan, which
		// has no such flag, assumes the default): the order the scheduler
		// takes the batch in is bounded by it.
		opts.InFlight = o.Burst
	}
	predictions, err := predict.Predict(ctx, in, targets, opts)
	if err != nil {
		return nil, nil, withExitCode(ExitError, fmt.Errorf("predicting the placements failed: %w", err))
	}
	return predictions, in.Clusters, nil
}

// print writes the plan in the chosen format.
func (o *PlanOptions) print(predictions []predict.Prediction) error {
	switch o.OutputFormat {
	case "", "wide":
		if len(predictions) > 0 {
			err := rbprinters.PrintPlan(o.Out, predictions, rbprinters.PlanPrintOptions{
				Wide: o.OutputFormat == "wide", NoHeaders: o.NoHeaders, WithNamespace: o.targets.AllNamespaces})
			if err != nil {
				return withExitCode(ExitError, err)
			}
			fmt.Fprintln(o.Out)
			for _, line := range rbprinters.ClusterLines(predict.ByCluster(predictions)) {
				fmt.Fprintln(o.Out, line)
			}
		}
		fmt.Fprintln(o.Out, o.countsLine(predictions))
		return nil
	case rbprinters.OutputReportJSON, rbprinters.OutputReportYAML:
		if err := rbprinters.PrintPlanReport(o.Out, predictions, o.Selection, o.OutputFormat); err != nil {
			return withExitCode(ExitError, err)
		}
	case "name":
		for _, p := range predictions {
			obj := &metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{APIVersion: p.Workload.APIVersion, Kind: p.Workload.Kind},
				ObjectMeta: metav1.ObjectMeta{Namespace: p.Workload.Namespace, Name: p.Workload.Name},
			}
			if err := o.printer.PrintObj(obj, o.Out); err != nil {
				return withExitCode(ExitError, fmt.Errorf("printing %s failed: %w", rbprinters.WorkloadName(p.Workload), err))
			}
		}
	default:
		if len(predictions) == 0 {
			// A WorkloadRebalancer must list at least one workload.
			break
		}
		if err := o.printer.PrintObj(planRebalancer(predictions), o.Out); err != nil {
			return withExitCode(ExitError, fmt.Errorf("printing the workloadrebalancer failed: %w", err))
		}
	}
	fmt.Fprintln(o.ErrOut, o.countsLine(predictions))
	return nil
}

// warnOvercommits says which clusters a batch would give more replicas than
// they have room for.
func warnOvercommits(w io.Writer, over []predict.Overcommit, gate bool) {
	for _, o := range over {
		if !gate {
			fmt.Fprintf(w, "Warning: %s would gain %d replicas but its resource summary has room for %d pods; karmada-scheduler of this release places them all the same (every decision reads the same summary) and the rest stay Pending in the member; rebalance fewer workloads at a time\n",
				o.Cluster, o.Gain, o.Room)
			continue
		}
		fmt.Fprintf(w, "Warning: %s would gain %d replicas but its resource summary has room for %d pods; karmada-scheduler without the SchedulingOvercommitProtection feature gate places them all the same (every decision reads the same summary) and the rest stay Pending in the member; rebalance fewer workloads at a time, or plan with --overcommit-protection if the scheduler runs with that gate\n",
			o.Cluster, o.Gain, o.Room)
	}
}

// countsLine is the counts line, naming the selection that made it.
func (o *PlanOptions) countsLine(predictions []predict.Prediction) string {
	line := rbprinters.CountsLine(predictions)
	if by := selectionText(o.Selection); by != "" {
		line += " (selected by " + by + ")"
	}
	return line
}

// planRebalancer is a WorkloadRebalancer of the planned workloads, ready to
// be applied or given to kubectl rebalance -f.
func planRebalancer(predictions []predict.Prediction) *appsv1alpha1.WorkloadRebalancer {
	rb := &appsv1alpha1.WorkloadRebalancer{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1alpha1.SchemeGroupVersion.String(), Kind: appsv1alpha1.ResourceKindWorkloadRebalancer},
		ObjectMeta: metav1.ObjectMeta{Name: "rebalance-plan-" + time.Now().UTC().Format("20060102-150405")},
	}
	for _, p := range predictions {
		rb.Spec.Workloads = append(rb.Spec.Workloads, p.Workload)
	}
	return rb
}
