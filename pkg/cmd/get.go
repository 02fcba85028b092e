package cmd

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	appsclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/typed/apps/v1alpha1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/util/templates"

	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
)

var (
	getLong = templates.LongDesc(`
		List the WorkloadRebalancers of the Karmada control plane with a summary
		of each, or show the workloads one of them records.

		Without a name, every WorkloadRebalancer is listed, whether recorded by
		kubectl rebalance or created by anyone else: how many workloads it
		records, how many were Successful, Failed or are still pending, how
		long ago it finished, its age, and how long it has left before its
		ttlSecondsAfterFinished runs out ("due" once it has, until it is
		deleted). A WorkloadRebalancer whose latest spec has not been
		reconciled yet is summarised as the next pass will see it.

		With a name, the table has one row per workload of its status, with
		the result and reason Karmada's controller (or kubectl rebalance)
		recorded and whether the spec still lists it.`)

	getExample = templates.Examples(`
		# List the WorkloadRebalancers, oldest generated name first
		kubectl rebalance get

		# Show the workloads of one WorkloadRebalancer
		kubectl rebalance get rebalance-20261122-021902-x7k2q

		# Print one as YAML, for example to edit and apply it again with kubectl rebalance -f
		kubectl rebalance get nginx-after-failover -o yaml`)
)

// defaultGetTimeout bounds `get`: listing WorkloadRebalancers is one request.
const defaultGetTimeout = 30 * time.Second

// GetOptions holds the flags and the state of `kubectl rebalance get`.
type GetOptions struct {
	PrintFlags *genericclioptions.PrintFlags
	NoHeaders  bool
	Timeout    time.Duration
	// Watch is -w: follow the run live (get_watch.go).
	Watch bool

	// Set by Complete.
	Name         string
	OutputFormat string
	ConfigFlags  *genericclioptions.ConfigFlags
	printer      printers.ResourcePrinter
	client       appsclient.WorkloadRebalancerInterface
	karmada      karmadaclient.Interface
	discovery    discovery.DiscoveryInterface
	guard        *requestGuard
	now          func() time.Time

	genericiooptions.IOStreams
}

// NewGetOptions returns options with the flags' defaults.
func NewGetOptions(streams genericiooptions.IOStreams) *GetOptions {
	return &GetOptions{PrintFlags: genericclioptions.NewPrintFlags(""), IOStreams: streams, now: time.Now, Timeout: defaultGetTimeout, guard: &requestGuard{}}
}

// NewCmdGet builds the `get` subcommand.
func NewCmdGet(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewGetOptions(streams)
	cmd := &cobra.Command{
		Use:                   "get [NAME] [-o FORMAT]",
		DisableFlagsInUseLine: true,
		Short:                 "List WorkloadRebalancers with a summary, or show the workloads of one",
		Long:                  getLong,
		Example:               getExample,
		Args:                  maxArgs(1, "name", "run 'kubectl rebalance get' to list every WorkloadRebalancer, or 'kubectl rebalance get NAME' for one"),
		SilenceUsage:          true,
		SilenceErrors:         true,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 || o.Complete(cmd, nil) != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			list, err := o.client.List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, rb := range list.Items {
				if strings.HasPrefix(rb.Name, toComplete) {
					names = append(names, rb.Name)
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: runSteps(o.Run, o.Complete),
	}
	o.PrintFlags.AddFlags(cmd)
	output := cmd.Flags().Lookup("output")
	output.Usage = fmt.Sprintf("Output format. One of: (wide, %s). The default is a table.", strings.Join(o.PrintFlags.AllowedFormats(), ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(append([]string{"wide"}, o.PrintFlags.AllowedFormats()...), cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", o.NoHeaders, "Leave out the table's header line (default and wide output).")
	durationVar(cmd.Flags(), &o.Timeout, "timeout", o.Timeout, "How long to wait for the Karmada apiserver before giving up (exit code 1).")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", o.Watch, "Follow the run live, from watches of the WorkloadRebalancer and its workloads' bindings: one row per workload as its state changes (waiting, held, staging, settling, released, done, failed, ignored), a summary line on stderr, and, with a NAME, the final table once the run is finished.")
	return cmd
}

// Complete reads the kubeconfig flags of the root command and builds the client.
func (o *GetOptions) Complete(cmd *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.Name = args[0]
	}
	o.ConfigFlags = inheritConfigFlags(cmd.Flags())
	if f := cmd.Flags().Lookup("karmada-context"); f != nil && f.Changed {
		if c := cmd.Flags().Lookup("context"); c != nil && c.Changed && c.Value.String() != f.Value.String() {
			return fmt.Errorf("--karmada-context %q and --context %q disagree; give only one of them", f.Value.String(), c.Value.String())
		}
		*o.ConfigFlags.Context = f.Value.String()
	}

	o.OutputFormat = ""
	if o.PrintFlags.OutputFormat != nil {
		o.OutputFormat = *o.PrintFlags.OutputFormat
	}
	if o.OutputFormat != "" && o.OutputFormat != "wide" {
		printer, err := o.PrintFlags.ToPrinter()
		if err != nil {
			return outputError(o.OutputFormat, err, o.PrintFlags.AllowedFormats())
		}
		o.printer = printer
	}

	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout must be greater than zero, got %s", o.Timeout)
	}
	if o.Watch && o.printer != nil {
		return fmt.Errorf("--watch prints tables only; leave out -o %s (or use -o wide)", o.OutputFormat)
	}

	config, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return kubeconfigError(o.ConfigFlags, err)
	}
	config = o.guard.wrapConfig(rest.CopyConfig(config))
	client, err := karmadaclient.NewForConfig(config)
	if err != nil {
		return kubeconfigError(o.ConfigFlags, err)
	}
	o.client = client.AppsV1alpha1().WorkloadRebalancers()
	o.karmada = client
	o.discovery = client.Discovery()
	return nil
}

// Run lists the WorkloadRebalancers or shows one.
func (o *GetOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	ctx = o.guard.runs(ctx)
	if o.Watch {
		return o.runWatch(ctx)
	}
	reqCtx, cancel := deadlineContext(ctx, time.Now().Add(o.Timeout))
	defer cancel()
	if o.Name != "" {
		rb, err := o.client.Get(reqCtx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && !isUnservedResource(err) {
			return withExitCode(ExitError, fmt.Errorf("workloadrebalancer %s not found; run `kubectl rebalance get` to list them", o.Name))
		}
		if err != nil {
			return withExitCode(ExitError, o.requestError(ctx, reqCtx, "get", err))
		}
		if err := o.printOne(rb); err != nil {
			return err
		}
		o.warnLeftovers(reqCtx, rb)
		return nil
	}
	list, err := o.client.List(reqCtx, metav1.ListOptions{})
	if err != nil {
		return withExitCode(ExitError, o.requestError(ctx, reqCtx, "list", err))
	}
	return o.printList(list)
}

// warnLeftovers warns, after a record, of each workload it lists whose
// binding an unfinished make-before-break move holds (its phase, owner,
// age and deadline), with one LIST of bindings per namespace the record
// lists; nothing when they cannot be listed (a person may read records
// without reading bindings).
func (o *GetOptions) warnLeftovers(ctx context.Context, rb *appsv1alpha1.WorkloadRebalancer) {
	if o.ConfigFlags == nil {
		return
	}
	config, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return
	}
	listed := map[string]map[string]bool{}
	for _, w := range rb.Spec.Workloads {
		if w.Namespace == "" {
			continue // the daemons and recover look at ResourceBindings
		}
		if listed[w.Namespace] == nil {
			listed[w.Namespace] = map[string]bool{}
		}
		listed[w.Namespace][rebalance.BindingNameFor(w)] = true
	}
	namespaces := make([]string, 0, len(listed))
	for ns := range listed {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		r, err := leftoverScope{namespace: ns}.recoverer(config, "", false)
		if err != nil {
			return
		}
		found, err := r.Find(ctx, ns, false)
		if err != nil {
			return
		}
		for _, lo := range found {
			if listed[ns][lo.Name] {
				fmt.Fprintf(o.ErrOut, "warning: %s; `kubectl rebalance recover -n %s` recovers it\n", lo, ns)
			}
		}
	}
}

// isUnservedResource recognises the 404 of a resource the API server does
// not serve at all, as opposed to a missing object.
func isUnservedResource(err error) bool {
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		return false
	}
	s := status.Status()
	return s.Details == nil || s.Details.Name == "" || strings.Contains(s.Message, "the server could not find the requested resource")
}

// requestError explains a failed request in the words of `kubectl rebalance`.
func (o *GetOptions) requestError(ctx, reqCtx context.Context, verb string, err error) error {
	base := &session{ConfigFlags: o.ConfigFlags, guard: o.guard}
	switch {
	case ctx.Err() != nil:
		return errors.New("interrupted before the Karmada apiserver answered; nothing was shown")
	case reqCtx.Err() != nil:
		return fmt.Errorf("--timeout %s ran out: the API server at %s (context %q) did not answer %s in time; check that it is up, or try again with a longer --timeout",
			o.Timeout, base.serverURL(), base.contextName(), describeRequest(o.guard.lastFailed()))
	case apierrors.IsNotFound(err) && isUnservedResource(err):
		if o.discovery != nil {
			probeCtx, cancel := deadlineContext(ctx, time.Now().Add(o.Timeout))
			defer cancel()
			defer o.guard.bind(o.guard.bind(probeCtx))
			if _, derr := o.discovery.ServerResourcesForGroupVersion("work.karmada.io/v1alpha2"); apierrors.IsNotFound(derr) {
				return fmt.Errorf("the cluster behind context %q (%s) is not a Karmada control plane: Karmada is not installed there (resourcebindings.work.karmada.io is not served); "+
					"point --karmada-context or --kubeconfig at the Karmada apiserver", base.contextName(), base.serverURL())
			}
		}
		return base.rebalancerNotServed()
	case apierrors.IsForbidden(err):
		return base.apiError(&rebalance.RequestError{Verb: verb, Resource: record.RebalancerResource, Name: o.Name, Err: err})
	}
	return base.apiError(err)
}

// rebalancerSummary counts what a WorkloadRebalancer records.
type rebalancerSummary struct {
	workloads, successful, failed, pending int
}

// view returns the status as the next pass will see it: the recorded one,
// brought in line with a spec not reconciled yet.
func view(rb *appsv1alpha1.WorkloadRebalancer) appsv1alpha1.WorkloadRebalancerStatus {
	if rb.Status.ObservedGeneration < rb.Generation {
		return record.SyncStatus(rb.Status, rb.Spec, rb.Generation)
	}
	return rb.Status
}

func summarize(rb *appsv1alpha1.WorkloadRebalancer) rebalancerSummary {
	status := view(rb)
	s := rebalancerSummary{workloads: len(status.ObservedWorkloads)}
	for _, entry := range status.ObservedWorkloads {
		switch entry.Result {
		case appsv1alpha1.RebalanceSuccessful:
			s.successful++
		case appsv1alpha1.RebalanceFailed:
			s.failed++
		default:
			s.pending++
		}
	}
	return s
}

var listColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Description: "The WorkloadRebalancer's name."},
	{Name: "Workloads", Type: "integer", Description: "Workloads in its status (or its spec, before the first pass)."},
	{Name: "Successful", Type: "integer", Description: "Workloads whose trigger was written."},
	{Name: "Failed", Type: "integer", Description: "Workloads that could not be triggered."},
	{Name: "Pending", Type: "integer", Description: "Workloads without a result yet."},
	{Name: "Finished", Type: "string", Description: "How long ago status.finishTime was; <none> while pending."},
	{Name: "Age", Type: "string", Description: "Time since creation."},
	{Name: "TTL-Left", Type: "string", Description: "Time left before ttlSecondsAfterFinished runs out; due once it has."},
	{Name: "Generation", Type: "string", Priority: 1, Description: "status.observedGeneration/metadata.generation."},
	{Name: "TTL", Type: "string", Priority: 1, Description: "spec.ttlSecondsAfterFinished."},
	{Name: "Finish-Time", Type: "string", Priority: 1, Description: "status.finishTime."},
}

func (o *GetOptions) printList(list *appsv1alpha1.WorkloadRebalancerList) error {
	items := list.Items
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	if len(items) == 0 && o.OutputFormat != "yaml" && o.OutputFormat != "json" {
		fmt.Fprintln(o.ErrOut, "No resources found")
		return nil
	}
	switch o.OutputFormat {
	case "", "wide":
		now := o.now()
		// WorkloadRebalancers are cluster-scoped: no namespace column.
		table := rbprinters.NewTable(listColumns, metav1.TableColumnDefinition{}, false)
		for i := range items {
			rb := &items[i]
			s := summarize(rb)
			table.AddRow("",
				rb.Name, s.workloads, s.successful, s.failed, s.pending,
				finishedText(rb, now), ageText(rb.CreationTimestamp, now), ttlLeftText(rb, now),
				fmt.Sprintf("%d/%d", rb.Status.ObservedGeneration, rb.Generation), ttlText(rb), finishTimeText(rb))
		}
		return table.Print(o.Out, o.OutputFormat == "wide", o.NoHeaders)
	case "name":
		for i := range items {
			if err := o.printer.PrintObj(printable(&items[i]), o.Out); err != nil {
				return err
			}
		}
		return nil
	}
	out := &appsv1alpha1.WorkloadRebalancerList{
		TypeMeta: metav1.TypeMeta{APIVersion: appsv1alpha1.SchemeGroupVersion.String(), Kind: "WorkloadRebalancerList"},
		ListMeta: metav1.ListMeta{ResourceVersion: list.ResourceVersion},
	}
	for i := range items {
		out.Items = append(out.Items, *printable(&items[i]))
	}
	return o.printer.PrintObj(out, o.Out)
}

var workloadColumns = []metav1.TableColumnDefinition{
	{Name: "Workload", Type: "string", Description: "The resource template, as kind.group/name."},
	{Name: "Result", Type: "string", Description: "The recorded result: Successful, Failed or Pending."},
	{Name: "Reason", Type: "string", Description: "The recorded reason of a Failed result."},
	{Name: "In-Spec", Type: "string", Description: "Whether spec.workloads still lists the workload; a removed one stays in the status only if it succeeded."},
	{Name: "Binding", Type: "string", Priority: 1, Description: "The name of the workload's binding."},
	{Name: "API-Version", Type: "string", Priority: 1, Description: "The workload's apiVersion."},
}

func (o *GetOptions) printOne(rb *appsv1alpha1.WorkloadRebalancer) error {
	if o.OutputFormat != "" && o.OutputFormat != "wide" {
		return o.printer.PrintObj(printable(rb), o.Out)
	}
	status := view(rb)
	inSpec := map[rebalance.Workload]bool{}
	for _, w := range rb.Spec.Workloads {
		inSpec[w] = true
	}
	withNamespace := rbprinters.SpansNamespaces(status.ObservedWorkloads, func(e appsv1alpha1.ObservedWorkload) string { return e.Workload.Namespace })
	table := rbprinters.NewTable(workloadColumns, rbprinters.WorkloadNamespaceColumn, withNamespace)
	for _, entry := range status.ObservedWorkloads {
		result := string(entry.Result)
		if record.IsPending(entry) {
			result = rbprinters.ResultPending
		}
		table.AddRow(entry.Workload.Namespace,
			rbprinters.WorkloadName(entry.Workload), result, noneIfEmpty(string(entry.Reason)), yesNo(inSpec[entry.Workload]),
			rebalance.BindingNameFor(entry.Workload), entry.Workload.APIVersion)
	}
	if err := table.Print(o.Out, o.OutputFormat == "wide", o.NoHeaders); err != nil {
		return err
	}

	now := o.now()
	s := summarize(rb)
	line := fmt.Sprintf("workloadrebalancer %s, generation %d: %d %s: %d successful, %d failed, %d pending",
		rb.Name, rb.Generation, s.workloads, plural(s.workloads, "workload", "workloads"), s.successful, s.failed, s.pending)
	if rb.Status.ObservedGeneration < rb.Generation {
		line += fmt.Sprintf(" (generation %d not reconciled yet)", rb.Generation)
	}
	if rb.Status.FinishTime != nil {
		line += "; finished at " + finishTimeText(rb)
	}
	if mark, ok := record.Aborted(rb); ok {
		line += "; aborted by " + mark.String()
	}
	if steps := record.StepsText(rb); steps != "" {
		line += "; " + steps
	}
	if rb.Spec.TTLSecondsAfterFinished != nil {
		line += "; ttl " + ttlText(rb) + ", left: " + ttlLeftText(rb, now)
	}
	fmt.Fprintln(o.ErrOut, line)
	return nil
}

// finishedText is how long ago the rebalancer finished.
func finishedText(rb *appsv1alpha1.WorkloadRebalancer, now time.Time) string {
	if rb.Status.FinishTime == nil || rb.Status.ObservedGeneration < rb.Generation {
		return "<none>"
	}
	return duration.HumanDuration(now.Sub(rb.Status.FinishTime.Time))
}

// ttlLeftText is the time left before the TTL runs out.
func ttlLeftText(rb *appsv1alpha1.WorkloadRebalancer, now time.Time) string {
	if rb.Spec.TTLSecondsAfterFinished == nil {
		return "<none>"
	}
	expires, ok := record.ExpiresAt(rb)
	if !ok || rb.Status.ObservedGeneration < rb.Generation || record.HasPending(rb.Status) {
		return "<not started>"
	}
	if !expires.After(now) {
		return "due"
	}
	return duration.HumanDuration(expires.Sub(now))
}

func ttlText(rb *appsv1alpha1.WorkloadRebalancer) string {
	if rb.Spec.TTLSecondsAfterFinished == nil {
		return "<none>"
	}
	return fmt.Sprintf("%ds", *rb.Spec.TTLSecondsAfterFinished)
}

func finishTimeText(rb *appsv1alpha1.WorkloadRebalancer) string {
	if rb.Status.FinishTime == nil {
		return "<none>"
	}
	return rb.Status.FinishTime.UTC().Format(time.RFC3339)
}

func ageText(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
