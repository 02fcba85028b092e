package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
)

var (
	failbackStatusLong = templates.LongDesc(`
		Show what the failback daemon running in the cluster sees and does: each
		member cluster (Healthy, Failed, Recovering with the time left in its
		stabilization window, FailingBack, or CoolingDown after a failback), the
		workloads each failure displaced that the daemon holds to fail back, and
		the last failbacks it recorded.

		It reads only what the daemon writes to the Karmada apiserver, so it
		works from any machine: the view the leader publishes in a ConfigMap
		named and placed like its Lease (kubectl-rebalance-failback in
		karmada-system, see --leader-elect-resource-name and
		--leader-elect-resource-namespace), the Lease itself (who leads), and
		the failback records (WorkloadRebalancers labelled
		app.kubernetes.io/managed-by=kubectl-rebalance-failback). Times left are
		counted from the API server's clock. A daemon that has not published
		for more than three heartbeats (90s) may not be running: the view is
		then its last one, and the command says so.

		Exit codes: 0 when the view was shown (also when no daemon has
		published one: the records are still listed); 1 when the Karmada
		apiserver could not be read (for instance no permission: see
		deploy/rbac/kubectl-rebalance-optional.yaml).`)

	failbackStatusExample = templates.Examples(`
		# What the failback daemon sees: clusters, displaced workloads, the last failbacks
		kubectl rebalance failback status

		# With the recovery keys, the records' finish times and more records
		kubectl rebalance failback status -o wide --last 20

		# As YAML, for scripts (clusters[].timeLeft is left of a window or a cooldown)
		kubectl rebalance failback status -o yaml`)
)

// defaultFailbackStatusLast is how many failback records status lists.
const defaultFailbackStatusLast = 10

// staleAfter is how old a published view may be before status says the
// daemon may not be running: three heartbeats.
const staleAfter = 3 * failback.PublishHeartbeat

// FailbackStatusOptions holds the flags and the state of `failback status`.
type FailbackStatusOptions struct {
	OutputFormat   string
	NoHeaders      bool
	Timeout        time.Duration
	Last           int
	LeaseNamespace string
	LeaseName      string

	// Set by Complete.
	configFlags *genericclioptions.ConfigFlags
	kube        kubernetes.Interface
	karmada     karmadaclient.Interface
	clock       *rebalance.ServerClock
	guard       *requestGuard
	now         func() time.Time

	genericiooptions.IOStreams
}

// NewCmdFailbackStatus builds `failback status`.
func NewCmdFailbackStatus(streams genericiooptions.IOStreams) *cobra.Command {
	o := &FailbackStatusOptions{
		Timeout:        defaultGetTimeout,
		Last:           defaultFailbackStatusLast,
		LeaseNamespace: "karmada-system",
		LeaseName:      defaultFailbackLeaseName,
		guard:          &requestGuard{},
		now:            time.Now,
		IOStreams:      streams,
	}
	cmd := &cobra.Command{
		Use:                   "status [-o wide|yaml|json] [--last N]",
		DisableFlagsInUseLine: true,
		Short:                 "Show the failback daemon's view: clusters, windows, displaced workloads, last failbacks",
		Long:                  failbackStatusLong,
		Example:               failbackStatusExample,
		ValidArgsFunction:     cobra.NoFileCompletions,
		SilenceUsage:          true,
		SilenceErrors:         true,
		RunE:                  runSteps(o.Run, o.Complete),
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withExitCode(ExitError, cmdutil.UsageErrorf(c, "%v", err))
	})
	flags := cmd.Flags()
	flags.StringVarP(&o.OutputFormat, "output", "o", o.OutputFormat, "Output format. One of: (wide, yaml, json). The default is tables.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"wide", "yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
	flags.BoolVar(&o.NoHeaders, "no-headers", o.NoHeaders, "Leave out the tables' header lines (default and wide output).")
	flags.DurationVar(&o.Timeout, "timeout", o.Timeout, "How long to wait for the Karmada apiserver before giving up (exit code 1).")
	flags.IntVar(&o.Last, "last", o.Last, "How many of the latest failback records to list; 0 lists them all.")
	flags.StringVar(&o.LeaseNamespace, "leader-elect-resource-namespace", o.LeaseNamespace, "Namespace of the daemon's Lease, where it publishes its view (the daemon's flag of the same name).")
	flags.StringVar(&o.LeaseName, "leader-elect-resource-name", o.LeaseName, "Name of the daemon's Lease and of the ConfigMap of its view (the daemon's flag of the same name).")
	return cmd
}

// Complete checks the flags and builds the clients.
func (o *FailbackStatusOptions) Complete(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return cmdutil.UsageErrorf(cmd, "failback status takes no arguments, got %q", args)
	}
	switch o.OutputFormat {
	case "", "wide", "yaml", "json":
	default:
		return cmdutil.UsageErrorf(cmd, "invalid --output %q: use wide, yaml or json (or leave it out for tables)", o.OutputFormat)
	}
	switch {
	case o.Timeout <= 0:
		return cmdutil.UsageErrorf(cmd, "--timeout must be greater than zero, got %s", o.Timeout)
	case o.Last < 0:
		return cmdutil.UsageErrorf(cmd, "--last must be 0 (all) or more, got %d", o.Last)
	case o.LeaseNamespace == "" || o.LeaseName == "":
		return cmdutil.UsageErrorf(cmd, "--leader-elect-resource-namespace and --leader-elect-resource-name must not be empty")
	}
	o.configFlags = inheritConfigFlags(cmd.Flags())
	if f := cmd.Flags().Lookup("karmada-context"); f != nil && f.Changed {
		if c := cmd.Flags().Lookup("context"); c != nil && c.Changed && c.Value.String() != f.Value.String() {
			return fmt.Errorf("--karmada-context %q and --context %q disagree; give only one of them", f.Value.String(), c.Value.String())
		}
		*o.configFlags.Context = f.Value.String()
	}
	config, err := o.configFlags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("cannot use the kubeconfig: %v; check --kubeconfig and --karmada-context (or $KUBECONFIG)", err)
	}
	config = o.guard.wrapConfig(rest.CopyConfig(config))
	// Times left are counted from the API server's clock, which the
	// daemon's follows, not from this machine's.
	o.clock = rebalance.NewServerClock()
	config.Wrap(o.clock.Wrap)
	if o.kube, err = kubernetes.NewForConfig(config); err != nil {
		return fmt.Errorf("cannot use the kubeconfig: %v; check --kubeconfig and --karmada-context (or $KUBECONFIG)", err)
	}
	if o.karmada, err = karmadaclient.NewForConfig(config); err != nil {
		return fmt.Errorf("cannot use the kubeconfig: %v; check --kubeconfig and --karmada-context (or $KUBECONFIG)", err)
	}
	return nil
}

// FailbackStatus is what `failback status -o yaml|json` prints.
type FailbackStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Daemon says who published the view and when; nil when none did.
	Daemon *FailbackDaemonView `json:"daemon,omitempty"`
	// Clusters are the member clusters as the daemon sees them, with the
	// workloads their failure displaced.
	Clusters []failback.ClusterView `json:"clusters"`
	// Failbacks are the latest failback records, newest first.
	Failbacks []failback.RecordView `json:"failbacks"`
}

// FailbackDaemonView is the daemon behind the view.
type FailbackDaemonView struct {
	// Holder published the view, at PublishedAt (the daemon's clock).
	Holder      string      `json:"holder"`
	PublishedAt metav1.Time `json:"publishedAt"`
	// Stale: not published for more than three heartbeats; the daemon may
	// not be running.
	Stale    bool            `json:"stale,omitempty"`
	Window   metav1.Duration `json:"window"`
	Cooldown metav1.Duration `json:"cooldown"`
	// Leader holds the Lease now, renewed at RenewTime; empty without a
	// Lease (no leader election) or when it cannot be read.
	Leader    string       `json:"leader,omitempty"`
	RenewTime *metav1.Time `json:"renewTime,omitempty"`
}

// Run reads what the daemon wrote and prints it.
func (o *FailbackStatusOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	ctx = o.guard.runs(ctx)
	reqCtx, cancel := deadlineContext(ctx, time.Now().Add(o.Timeout))
	defer cancel()

	where := o.LeaseNamespace + "/" + o.LeaseName
	cm, err := o.kube.CoreV1().ConfigMaps(o.LeaseNamespace).Get(reqCtx, o.LeaseName, metav1.GetOptions{})
	var state *failback.PublishedState
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return withExitCode(ExitError, o.requestError(ctx, reqCtx, &rebalance.RequestError{Verb: "get", Resource: "configmaps", Namespace: o.LeaseNamespace, Name: o.LeaseName, Err: err},
			"the failback daemon's view"))
	default:
		if state, err = failback.ReadState(cm); err != nil {
			return withExitCode(ExitError, err)
		}
	}
	// Who leads: best effort, the view is the daemon's either way.
	lease, leaseErr := o.kube.CoordinationV1().Leases(o.LeaseNamespace).Get(reqCtx, o.LeaseName, metav1.GetOptions{})
	if leaseErr != nil {
		lease = nil
		if ctx.Err() != nil || reqCtx.Err() != nil {
			return withExitCode(ExitError, o.requestError(ctx, reqCtx, leaseErr, ""))
		}
	}
	selector := labels.SelectorFromSet(labels.Set{failback.LabelManagedBy: failback.ManagedBy}).String()
	records, err := o.karmada.AppsV1alpha1().WorkloadRebalancers().List(reqCtx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return withExitCode(ExitError, o.requestError(ctx, reqCtx, &rebalance.RequestError{Verb: "list", Resource: record.RebalancerResource, Err: err}, "the failback records"))
	}

	now, ok := o.clock.Now()
	if !ok {
		now = o.now()
	}
	status := o.status(state, lease, records.Items, now)
	switch o.OutputFormat {
	case "json":
		data, err := json.MarshalIndent(status, "", "    ")
		if err != nil {
			return withExitCode(ExitError, err)
		}
		_, err = fmt.Fprintln(o.Out, string(data))
		return err
	case "yaml":
		data, err := yaml.Marshal(status)
		if err != nil {
			return withExitCode(ExitError, err)
		}
		_, err = o.Out.Write(data)
		return err
	}
	fmt.Fprintln(o.ErrOut, daemonLine(status.Daemon, where, now))
	return o.printTables(status, now)
}

// status gathers what the command shows.
func (o *FailbackStatusOptions) status(state *failback.PublishedState, lease *coordinationv1.Lease, records []appsv1alpha1.WorkloadRebalancer, now time.Time) *FailbackStatus {
	out := &FailbackStatus{APIVersion: "failback.kubectl-rebalance.io/v1alpha1", Kind: "FailbackStatus", Clusters: []failback.ClusterView{}}
	running := map[string]bool{}
	if state != nil {
		d := &FailbackDaemonView{Holder: state.Holder, PublishedAt: state.PublishedAt, Window: state.Window, Cooldown: state.Cooldown,
			Stale: now.Sub(state.PublishedAt.Time) > staleAfter}
		if lease != nil && lease.Spec.HolderIdentity != nil {
			d.Leader = *lease.Spec.HolderIdentity
			if lease.Spec.RenewTime != nil {
				d.RenewTime = &metav1.Time{Time: lease.Spec.RenewTime.Time}
			}
		}
		out.Daemon = d
		if !d.Stale {
			for _, c := range state.Clusters {
				if c.Record != "" {
					running[c.Record] = true
				}
			}
		}
		out.Clusters = failback.Describe(state, now)
	}
	out.Failbacks = failback.DescribeRecords(records, running, o.Last)
	if out.Failbacks == nil {
		out.Failbacks = []failback.RecordView{}
	}
	return out
}

// daemonLine says on stderr whose view this is, and how fresh.
func daemonLine(d *FailbackDaemonView, where string, now time.Time) string {
	if d == nil {
		return fmt.Sprintf("no failback daemon has published its view in configmap %s: none runs against this control plane with this --leader-elect-resource-name and namespace, or it runs with --dry-run; the failback records follow", where)
	}
	line := fmt.Sprintf("failback daemon %s: view published %s ago (stabilization window %s, cooldown %s)",
		d.Holder, duration.HumanDuration(max(now.Sub(d.PublishedAt.Time), 0)), d.Window.Duration, d.Cooldown.Duration)
	switch {
	case d.Stale:
		line = fmt.Sprintf("warning: the failback daemon has not published its view for %s (last by %s, at %s): it may not be running; this is its last view",
			duration.HumanDuration(now.Sub(d.PublishedAt.Time)), d.Holder, d.PublishedAt.UTC().Format(time.RFC3339))
	case d.Leader == "" && d.RenewTime != nil:
		line += "; the Lease is free: the daemon is stopping or a standby is about to take over"
	case d.Leader != "" && d.Leader != d.Holder:
		line += fmt.Sprintf("; the Lease is now held by %s, which has not published yet", d.Leader)
	}
	return line
}

var failbackClusterColumns = []metav1.TableColumnDefinition{
	{Name: "Cluster", Type: "string", Description: "The member cluster."},
	{Name: "State", Type: "string", Description: "Healthy, Failed, Recovering (in its stabilization window), FailingBack, or CoolingDown (within --cooldown of its last failback)."},
	{Name: "Since", Type: "string", Description: "How long it has been in its phase."},
	{Name: "Time-Left", Type: "string", Description: "What is left of a Recovering cluster's window, or of a CoolingDown cluster's cooldown."},
	{Name: "Displaced", Type: "integer", Description: "Workloads its failure displaced that are not back yet."},
	{Name: "Detail", Type: "string", Description: "Why, in words."},
	{Name: "Evicting", Type: "integer", Priority: 1, Description: "Displaced workloads Karmada is still evicting."},
	{Name: "Recovery", Type: "string", Priority: 1, Description: "The recovery's key, part of its record's name."},
	{Name: "Last-Failback", Type: "string", Priority: 1, Description: "When its last failback fired."},
}

var failbackDisplacedColumns = []metav1.TableColumnDefinition{
	{Name: "Cluster", Type: "string", Description: "The member cluster whose failure displaced the workload."},
	{Name: "Namespace", Type: "string", Description: "The workload's namespace."},
	{Name: "Workload", Type: "string", Description: "The resource template, as kind.group/name."},
	{Name: "Evicting", Type: "string", Description: "Whether Karmada is still evicting it from the cluster (its failback waits for the end of the eviction)."},
	{Name: "Binding", Type: "string", Priority: 1, Description: "Its ResourceBinding."},
}

var failbackRecordColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Description: "The failback's WorkloadRebalancer."},
	{Name: "Cluster", Type: "string", Description: "The cluster failed back to."},
	{Name: "State", Type: "string", Description: "Running, Finished, BudgetSpent (stopped by --max-failures) or Interrupted (resumed by the leader while its recovery is current)."},
	{Name: "Workloads", Type: "integer", Description: "Workloads it set out to move."},
	{Name: "Successful", Type: "integer", Description: "Workloads triggered."},
	{Name: "Failed", Type: "integer", Description: "Workloads that failed."},
	{Name: "Pending", Type: "integer", Description: "Workloads without a result, not started ones included."},
	{Name: "Age", Type: "string", Description: "Time since the failback fired."},
	{Name: "Recovery", Type: "string", Priority: 1, Description: "The recovery's key."},
	{Name: "Finished", Type: "string", Priority: 1, Description: "status.finishTime."},
}

// printTables prints the clusters, the displaced workloads and the
// failbacks, as kubectl get prints several kinds: one table each.
func (o *FailbackStatusOptions) printTables(s *FailbackStatus, now time.Time) error {
	wide := o.OutputFormat == "wide"
	printed := false
	printOne := func(table *rbprinters.Table) error {
		if table.Len() == 0 {
			return nil
		}
		if printed {
			fmt.Fprintln(o.Out)
		}
		printed = true
		return table.Print(o.Out, wide, o.NoHeaders)
	}

	// Clusters and failback records are cluster-scoped, and the displaced
	// table names the namespace in its own column: no namespace column.
	clusters := rbprinters.NewTable(failbackClusterColumns, metav1.TableColumnDefinition{}, false)
	displaced := rbprinters.NewTable(failbackDisplacedColumns, metav1.TableColumnDefinition{}, false)
	var cut []string
	for _, c := range s.Clusters {
		left := "<none>"
		if c.TimeLeft != nil {
			left = duration.HumanDuration(c.TimeLeft.Duration)
			if c.TimeLeft.Duration == 0 {
				left = "0s"
			}
		}
		last := "<none>"
		if c.LastFailback != nil {
			last = c.LastFailback.UTC().Format(time.RFC3339)
		}
		clusters.AddRow("", c.Name, c.State, ageText(c.Since, now), left, c.Displaced, noneIfEmpty(c.Detail), c.Evicting, noneIfEmpty(c.Recovery), last)
		for _, w := range c.Workloads {
			displaced.AddRow("", c.Name, noneIfEmpty(w.Workload.Namespace), rbprinters.WorkloadName(w.Workload), yesNo(w.Evicting), w.Binding)
		}
		if len(c.Workloads) < c.Displaced {
			cut = append(cut, fmt.Sprintf("%s: %d of %d", c.Name, len(c.Workloads), c.Displaced))
		}
	}
	records := rbprinters.NewTable(failbackRecordColumns, metav1.TableColumnDefinition{}, false)
	for _, r := range s.Failbacks {
		finished := "<none>"
		if r.Finished != nil {
			finished = r.Finished.UTC().Format(time.RFC3339)
		}
		records.AddRow("", r.Name, noneIfEmpty(r.Cluster), r.State, r.Workloads, r.Successful, r.Failed, r.Pending, ageText(r.Created, now), noneIfEmpty(r.Recovery), finished)
	}
	for _, t := range []*rbprinters.Table{clusters, displaced, records} {
		if err := printOne(t); err != nil {
			return err
		}
	}
	if len(cut) > 0 {
		fmt.Fprintf(o.ErrOut, "displaced workloads listed (the daemon publishes at most %d per cluster): %s\n", failback.MaxPublishedWorkloads, strings.Join(cut, ", "))
	}
	if len(s.Failbacks) == 0 {
		fmt.Fprintln(o.ErrOut, "no failback records")
	}
	return nil
}

// requestError explains a failed read: the run's end, --timeout, or the
// API server's answer (what names what could not be read).
func (o *FailbackStatusOptions) requestError(ctx, reqCtx context.Context, err error, what string) error {
	base := &session{ConfigFlags: o.configFlags, guard: o.guard}
	switch {
	case ctx.Err() != nil:
		return errors.New("interrupted before the Karmada apiserver answered; nothing was shown")
	case reqCtx.Err() != nil:
		return fmt.Errorf("--timeout %s ran out: the API server at %s (context %q) did not answer %s in time; check that it is up, or try again with a longer --timeout",
			o.Timeout, base.serverURL(), base.contextName(), describeRequest(o.guard.lastFailed()))
	}
	explained := base.apiError(err)
	if apierrors.IsForbidden(err) && what != "" {
		return fmt.Errorf("%w (reading %s; deploy/rbac/kubectl-rebalance-optional.yaml grants it)", explained, what)
	}
	return explained
}
