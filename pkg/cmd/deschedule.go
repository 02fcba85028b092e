package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/version"
)

var (
	descheduleLong = templates.LongDesc(`
		Give replicas that member clusters cannot schedule back to the Karmada
		scheduler, as karmada-descheduler does, without its scheduler-estimators.

		A pass lists the ResourceBindings of the workload kinds of --kinds
		(Deployments, StatefulSets and Jobs by default; any custom resource
		Karmada divides when named) whose applied placement divides replicas
		dynamically (Divided with Aggregated, or with dynamic weights), leaving
		out templates annotated deschedule.kubectl-rebalance.io/skip=true. For
		every target cluster with fewer ready replicas than assigned, it counts
		the pods of the member's copy of the workload (found through their
		controller owner references; only the current ReplicaSet of a
		Deployment, the update revision of a StatefulSet) that have been
		unschedulable for longer than --unschedulable-threshold, and lowers the
		cluster's assignment by that many, never below its ready replicas. The Karmada scheduler then sees
		fewer replicas assigned than wanted and places the rest elsewhere. A
		binding whose clusters cannot all be counted is left alone. Updates use
		the binding's resourceVersion, and each one is recorded as a
		DescheduleBindingSucceed (or DescheduleBindingFailed) event on the
		binding and on its template.

		Without karmada-scheduler-estimator, karmada-scheduler sizes members by
		their resource summary, which still counts cordoned and tainted nodes,
		and may put an evicted replica straight back where it cannot run. A
		pass that finds this reports the cluster as bounced-back (in the table,
		a DescheduleBindingBouncedBack warning event and the metrics) and leaves
		it alone for --retry-bounced-after instead of evicting in a loop.

		Member pods are read through the Karmada cluster proxy (the default,
		--estimator=proxy), or through kubeconfig contexts named like the member
		clusters (--estimator=kubeconfig). Each member cluster is listed once
		per pass, whatever the number of bindings.

		Without --interval the command runs one pass, prints a row per target
		cluster of every binding it had to look at, and a summary line on
		stderr. With --interval it is a daemon: a pass at start and then every
		interval, structured logs on stderr, Prometheus metrics on
		--metrics-bind-address and /healthz and /readyz on
		--health-probe-bind-address. It speaks karmada-descheduler's flags
		(--descheduling-interval, --leader-elect-resource-namespace,
		--kube-api-qps, --logging-format, -v). Like karmada-descheduler it
		elects a leader by default, on the same Lease (karmada-descheduler in
		karmada-system), so that several replicas run with one active and never
		beside a karmada-descheduler. It refuses to start while a
		karmada-descheduler holds that Lease, unless --force makes it stand by
		and take over when karmada-descheduler stops. In a daemon, events go
		through client-go's event recorder (aggregated, rate-limited, written in
		the background); their source is kubectl-rebalance-deschedule. SIGINT
		and SIGTERM stop it between two writes, never in the middle of one.

		Exit codes of a single pass:

		* 0: the pass ran and every write it needed succeeded.
		* 1: bad usage, or the bindings could not be listed.
		* 2: a member cluster could not be listed, a write failed, or the pass
		  was interrupted before it finished.`)

	descheduleExample = templates.Examples(`
		# See what a pass would change in the current namespace, writing nothing
		kubectl rebalance deschedule --dry-run=client

		# Deschedule everywhere, except in kube-system, moving at most 20 replicas
		kubectl rebalance deschedule -A --exclude-namespace kube-system --max-replicas-per-pass 20

		# Only workloads labelled app=web, counting pods unschedulable for 10 minutes
		kubectl rebalance deschedule -n shop -l app=web --unschedulable-threshold 10m

		# A custom resource too; "*" takes every kind Karmada divides
		kubectl rebalance deschedule -A --kinds deployments.apps,statefulsets.apps,jobs.batch,flinkdeployments.flink.apache.org

		# Read member pods through kubeconfig contexts named like the clusters
		kubectl rebalance deschedule -A --estimator kubeconfig --member-kubeconfig ~/.kube/members

		# Run as a daemon with leader election, metrics and probes, like karmada-descheduler
		kubectl rebalance deschedule -A --interval 2m --metrics-bind-address :8080 --health-probe-bind-address :10358 --logging-format json

		# Keep the pass result as JSON
		kubectl rebalance deschedule -A -o json > pass.json`)
)

// deprecatedDescheduleFlags are the daemon's former flag names, renamed to
// karmada-descheduler's, and their new names.
var deprecatedDescheduleFlags = map[string]string{
	"leader-elect-namespace": "leader-elect-resource-namespace",
	"leader-elect-name":      "leader-elect-resource-name",
	"log-format":             "logging-format",
}

// ignoredEstimatorFlagsReason says why karmada-descheduler's flags for its
// scheduler-estimator connections have no effect here.
const ignoredEstimatorFlagsReason = "this command counts unschedulable pods by reading the members through --estimator (the cluster proxy or member kubeconfigs), not through karmada-scheduler-estimator"

// karmadaEstimatorFlags holds the values of karmada-descheduler's
// --scheduler-estimator-* flags. They are accepted, with their types and
// defaults, so that its arguments run here unchanged, and then ignored.
type karmadaEstimatorFlags struct {
	timeout          time.Duration
	port             int
	certFile         string
	keyFile          string
	caFile           string
	insecure         bool
	serviceNamespace string
	servicePrefix    string
}

func (f *karmadaEstimatorFlags) add(flags *pflag.FlagSet) {
	usage := func(what string) string {
		return "Ignored: karmada-descheduler's flag for " + what + "; here member pods are read through --estimator, not karmada-scheduler-estimator."
	}
	durationVar(flags, &f.timeout, "scheduler-estimator-timeout", 3*time.Second, usage("the timeout of a call to a scheduler-estimator"))
	flags.IntVar(&f.port, "scheduler-estimator-port", 10352, usage("the scheduler-estimators' port"))
	flags.StringVar(&f.certFile, "scheduler-estimator-cert-file", "", usage("the client certificate for the scheduler-estimators"))
	flags.StringVar(&f.keyFile, "scheduler-estimator-key-file", "", usage("the client key for the scheduler-estimators"))
	flags.StringVar(&f.caFile, "scheduler-estimator-ca-file", "", usage("the CA of the scheduler-estimators"))
	flags.BoolVar(&f.insecure, "insecure-skip-estimator-verify", false, usage("skipping the verification of the scheduler-estimators' certificates"))
	flags.StringVar(&f.serviceNamespace, "scheduler-estimator-service-namespace", "karmada-system", usage("the namespace of the scheduler-estimators' Services"))
	flags.StringVar(&f.servicePrefix, "scheduler-estimator-service-prefix", "karmada-scheduler-estimator", usage("the prefix of the scheduler-estimators' Service names"))
	// They do nothing here, so help does not show them; given, they print
	// a notice (Complete).
	for _, name := range ignoredDescheduleFlags {
		_ = flags.MarkHidden(name)
	}
}

// ignoredDescheduleFlags are the names karmadaEstimatorFlags registers.
var ignoredDescheduleFlags = []string{
	"insecure-skip-estimator-verify", "scheduler-estimator-ca-file", "scheduler-estimator-cert-file", "scheduler-estimator-key-file",
	"scheduler-estimator-port", "scheduler-estimator-service-namespace", "scheduler-estimator-service-prefix", "scheduler-estimator-timeout",
}

// Estimators: where member pod counts come from.
const (
	estimatorProxy      = "proxy"
	estimatorKubeconfig = "kubeconfig"
)

// Deadlines of the deschedule command.
const (
	// defaultDescheduleTimeout bounds a single pass; a pass over 5,000
	// bindings takes seconds (docs/performance.md).
	defaultDescheduleTimeout = 10 * time.Minute
	// defaultDescheduleRequestTimeout bounds every request unless
	// --request-timeout says otherwise.
	defaultDescheduleRequestTimeout = time.Minute
)

// eventFlushTimeout bounds the wait for the last events when a daemon stops
// on an error; after a signal, the shutdown budget (daemon.ShutdownBudget)
// bounds it, shared with the Lease's release.
const eventFlushTimeout = 10 * time.Second

// Defaults of karmada-descheduler's client to the Karmada apiserver.
const (
	defaultDescheduleQPS   = 40
	defaultDescheduleBurst = 60
)

// DescheduleOptions holds the flags and the state of `kubectl rebalance deschedule`.
type DescheduleOptions struct {
	// ConfigFlags are the kubeconfig flags. The root command defines them
	// as persistent flags; Complete copies their values from there.
	ConfigFlags *genericclioptions.ConfigFlags
	PrintFlags  *genericclioptions.PrintFlags

	Interval               time.Duration
	UnschedulableThreshold time.Duration
	RetryBouncedAfter      time.Duration
	Estimator              string
	MemberKubeconfig       string
	DryRunFlag             string
	MaxReplicasPerPass     int32
	MaxReplicasPerCluster  int32
	AllNamespaces          bool
	Kinds                  []string
	LabelSelector          string
	ExcludeNamespaces      []string
	NoHeaders              bool
	QPS                    float32
	Burst                  int
	Timeout                time.Duration

	daemonFlags
	Force bool
	// Master overrides the Karmada apiserver's address of the kubeconfig,
	// as --server does (karmada-descheduler's name).
	Master string
	// EnablePprof serves Go's profiles on ProfilingBindAddress in a daemon.
	EnablePprof          bool
	ProfilingBindAddress string

	estimatorFlags karmadaEstimatorFlags

	// Set by Complete.
	Namespace      string
	leaderElectSet bool
	DryRun         deschedule.DryRun
	kinds          []schema.GroupKind
	karmadaMapper  meta.ResettableRESTMapper
	OutputFormat   string
	printer        printers.ResourcePrinter
	restConfig     *rest.Config
	// outlivingConfig is restConfig for the requests a daemon makes on its
	// way out (the Lease's release, its last events), each bounded by its
	// own timeout rather than cut by the signal.
	outlivingConfig *rest.Config
	logger          *slog.Logger
	guard           *requestGuard

	genericiooptions.IOStreams
}

// NewDescheduleOptions returns options with the flags' defaults.
func NewDescheduleOptions(streams genericiooptions.IOStreams) *DescheduleOptions {
	return &DescheduleOptions{
		ConfigFlags:            genericclioptions.NewConfigFlags(true),
		PrintFlags:             genericclioptions.NewPrintFlags(""),
		UnschedulableThreshold: deschedule.DefaultUnschedulableThreshold,
		RetryBouncedAfter:      deschedule.DefaultRetryBouncedAfter,
		Estimator:              estimatorProxy,
		Kinds:                  slices.Clone(deschedule.DefaultKinds),
		DryRunFlag:             string(deschedule.DryRunNone),
		QPS:                    defaultDescheduleQPS,
		Burst:                  defaultDescheduleBurst,
		daemonFlags:            newDaemonFlags(deschedule.DefaultLeaseName),
		ProfilingBindAddress:   ":6060",
		Timeout:                defaultDescheduleTimeout,
		guard:                  &requestGuard{},
		IOStreams:              streams,
	}
}

// NewCmdDeschedule builds the `deschedule` subcommand. It expects to be added
// to the root command, whose persistent flags carry the kubeconfig options.
func NewCmdDeschedule(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewDescheduleOptions(streams)
	cmd := &cobra.Command{
		Use:                   "deschedule [--interval DURATION] [-n NAMESPACE | -A] [-l SELECTOR] [--dry-run=none|client|server]",
		DisableFlagsInUseLine: true,
		Short:                 "Hand replicas that member clusters cannot schedule back to the Karmada scheduler",
		Long:                  descheduleLong,
		Example:               descheduleExample,
		ValidArgsFunction:     cobra.NoFileCompletions,
		SilenceUsage:          true,
		SilenceErrors:         true,
		RunE:                  runSteps(o.Run, o.Complete, withoutArgs(o.Validate)),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags registers the command's own flags.
func (o *DescheduleOptions) AddFlags(cmd *cobra.Command) {
	flags := cmd.Flags()
	durationVar(flags, &o.Interval, "interval", o.Interval, "Run as a daemon: a pass at start and then every interval (karmada-descheduler's --descheduling-interval, 2m there). 0 runs one pass and exits.")
	durationVar(flags, &o.UnschedulableThreshold, "unschedulable-threshold", o.UnschedulableThreshold, "How long a pod must have been unschedulable to count.")
	durationVar(flags, &o.RetryBouncedAfter, "retry-bounced-after", o.RetryBouncedAfter,
		"How long to leave a cluster alone after karmada-scheduler put replicas evicted from it straight back (it does so without karmada-scheduler-estimator), before evicting from it once more.")
	flags.StringVar(&o.Estimator, "estimator", o.Estimator, `Where member pods are read: "proxy" (the Karmada cluster proxy, needs clusters/proxy; Pull-mode members through their kubeconfig context when there is one) or "kubeconfig" (contexts named like the member clusters).`)
	flags.StringVar(&o.MemberKubeconfig, "member-kubeconfig", o.MemberKubeconfig, "The kubeconfig holding contexts named like the member clusters (the Karmada kubeconfig when empty): every member is read through them with --estimator=kubeconfig, and Pull-mode members, which the cluster proxy usually cannot reach, with --estimator=proxy too.")
	addDryRunFlag(cmd, &o.DryRunFlag, "With client, bindings are only read; with server, updates are sent with dryRun=All and nothing is persisted. No events are recorded in a dry run.")
	flags.Int32Var(&o.MaxReplicasPerPass, "max-replicas-per-pass", o.MaxReplicasPerPass, "Move at most this many replicas in one pass; 0 is no limit.")
	flags.Int32Var(&o.MaxReplicasPerCluster, "max-replicas-per-cluster", o.MaxReplicasPerCluster, "Move at most this many replicas away from any one member cluster in one pass; 0 is no limit.")
	flags.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "Deschedule bindings in all namespaces.")
	flags.StringSliceVar(&o.Kinds, "kinds", o.Kinds, `Workload kinds a pass considers, named as kubectl names resources (deployments.apps, sts, jobs.batch, flinkdeployments.flink.apache.org); "*" for every kind Karmada divides.`)
	flags.StringVarP(&o.LabelSelector, "selector", "l", o.LabelSelector, "Only bindings whose resource template's labels match this selector (e.g. -l app=web,tier!=db).")
	flags.StringSliceVar(&o.ExcludeNamespaces, "exclude-namespace", o.ExcludeNamespaces, "Never deschedule bindings in these namespaces; repeat or separate with commas.")
	flags.BoolVar(&o.NoHeaders, "no-headers", o.NoHeaders, "Leave out the table's header line (default and wide output).")
	addRateLimitFlags(cmd, &o.QPS, &o.Burst, "Requests per second to the Karmada apiserver and to each member cluster (karmada-descheduler's flag of the same name).",
		"Requests sent at once before --kube-api-qps applies.")
	durationVar(flags, &o.Timeout, "timeout", o.Timeout, "How long a single pass (without --interval) may take; when it runs out the pass stops between two writes (exit code 2). Every request, in a daemon too, gives up after --request-timeout (1m when unset).")

	// karmada-descheduler's names for the same settings, so that its
	// arguments work here unchanged: hidden, and with no deprecation
	// notice (they are that program's names, not old ones of this one).
	// --descheduling-interval is 2m there; here 0, a single pass, unless set.
	addFlagAlias(flags, "interval", "descheduling-interval", false)
	flags.StringVar(&o.Master, "master", o.Master, "The address of the Karmada apiserver, overriding the kubeconfig's: the same as --server, under karmada-descheduler's name.")
	_ = flags.MarkHidden("master")
	flags.BoolVar(&o.EnablePprof, "enable-pprof", o.EnablePprof, "With --interval, serve Go's profiles on --profiling-bind-address at /debug/pprof/, as karmada-descheduler does.")
	flags.StringVar(&o.ProfilingBindAddress, "profiling-bind-address", o.ProfilingBindAddress, "With --enable-pprof, the address that serves /debug/pprof/.")
	o.estimatorFlags.add(flags)

	o.daemonFlags.addFlags(cmd, "With --interval, ",
		"With --interval, pass only while holding the Lease in the Karmada apiserver, so that several replicas run with one active; on by default, as in karmada-descheduler.",
		"Name of the leader election Lease; karmada-descheduler's by default, so that the two are never active together.")
	flags.BoolVar(&o.Force, "force", o.Force, "Start even though a karmada-descheduler holds its Lease: with leader election on the same Lease, stand by until it stops; without, run beside it.")
	// Renamed flags keep working, hidden, with pflag's notice on stderr.
	for _, old := range slices.Sorted(maps.Keys(deprecatedDescheduleFlags)) {
		addFlagAlias(flags, deprecatedDescheduleFlags[old], old, true)
	}

	o.PrintFlags.AddFlags(cmd)
	output := flags.Lookup("output")
	output.Usage = fmt.Sprintf("Output format. One of: (wide, %s). The default is a table. A daemon prints each pass only when this is set.", strings.Join(o.outputFormats(), ", "))
	for name, values := range map[string][]string{
		"output":         append([]string{"wide"}, o.outputFormats()...),
		"estimator":      {estimatorProxy, estimatorKubeconfig},
		"logging-format": {"text", "json"},
	} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	}
}

// outputFormats are the PrintFlags formats that suit a pass report: every one
// but "name", since a pass has no name.
func (o *DescheduleOptions) outputFormats() []string {
	var formats []string
	for _, f := range o.PrintFlags.AllowedFormats() {
		if f != "name" {
			formats = append(formats, f)
		}
	}
	return formats
}

// Complete fills the options from the flags and the kubeconfig.
func (o *DescheduleOptions) Complete(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return cmdutil.UsageErrorf(cmd, "deschedule takes no arguments, got %q; choose bindings with -n, -A, -l and --exclude-namespace", args)
	}
	o.ConfigFlags = inheritConfigFlags(cmd.Flags())
	if f := cmd.Flags().Lookup("karmada-context"); f != nil && f.Changed {
		if c := cmd.Flags().Lookup("context"); c != nil && c.Changed && c.Value.String() != f.Value.String() {
			return fmt.Errorf("--karmada-context %q and --context %q disagree; give only one of them", f.Value.String(), c.Value.String())
		}
		*o.ConfigFlags.Context = f.Value.String()
	}

	if m := cmd.Flags().Lookup("master"); m != nil && m.Changed {
		master := m.Value.String()
		if s := cmd.Flags().Lookup("server"); s != nil && s.Changed && s.Value.String() != master {
			return fmt.Errorf("--master %q and --server %q disagree; give only one of them", master, s.Value.String())
		}
		*o.ConfigFlags.APIServer = master
	}

	o.leaderElectSet = cmd.Flags().Changed("leader-elect")
	for _, name := range ignoredDescheduleFlags {
		if cmd.Flags().Changed(name) {
			fmt.Fprintf(o.ErrOut, "Flag --%s is ignored: %s\n", name, ignoredEstimatorFlagsReason)
		}
	}
	o.daemonFlags.complete()

	mode, err := dryRunMode(o.DryRunFlag, o.ErrOut)
	if err != nil {
		return cmdutil.UsageErrorf(cmd, "%v", err)
	}
	if o.DryRun, err = deschedule.ParseDryRun(mode); err != nil {
		return err
	}

	o.Namespace, _, err = o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return kubeconfigError(o.ConfigFlags, err)
	}
	if o.AllNamespaces {
		o.Namespace = ""
	}

	o.OutputFormat = ""
	if o.PrintFlags.OutputFormat != nil {
		o.OutputFormat = *o.PrintFlags.OutputFormat
	}
	if o.OutputFormat != "" && o.OutputFormat != "wide" {
		if o.OutputFormat == "name" {
			return fmt.Errorf("invalid --output %q: a pass has no name; use one of wide, %s", o.OutputFormat, strings.Join(o.outputFormats(), ", "))
		}
		if o.printer, err = o.PrintFlags.ToPrinter(); err != nil {
			return outputError(o.OutputFormat, err, o.outputFormats())
		}
	}

	raw, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return kubeconfigError(o.ConfigFlags, err)
	}
	o.restConfig = o.clientConfig(raw)
	o.outlivingConfig = o.guard.wrapConfigOutlivingRun(o.clientSettings(raw))

	// Custom kinds are found through the Karmada apiserver's discovery,
	// read only when a kind is not built in.
	disco, err := discovery.NewDiscoveryClientForConfig(o.restConfig)
	if err != nil {
		return fmt.Errorf("cannot build a discovery client for the Karmada apiserver: %w", err)
	}
	o.karmadaMapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	// The kinds are parsed by Run: a custom kind reads discovery, which
	// must wait for the signal handler and the request guard.

	o.logger, err = newLogger(o.ErrOut, o.LogFormat)
	return err
}

// inheritConfigFlags returns kubeconfig flags holding the values of the
// same-named flags in flags, which include the root command's persistent
// ones. Flags that are absent or unset keep their defaults.
func inheritConfigFlags(flags *pflag.FlagSet) *genericclioptions.ConfigFlags {
	cf := genericclioptions.NewConfigFlags(true)
	own := pflag.NewFlagSet("kubeconfig", pflag.ContinueOnError)
	cf.AddFlags(own)
	own.VisitAll(func(f *pflag.Flag) {
		src := flags.Lookup(f.Name)
		if src == nil || !src.Changed || src == f {
			return
		}
		if slice, ok := src.Value.(pflag.SliceValue); ok {
			for _, v := range slice.GetSlice() {
				_ = f.Value.Set(v)
			}
			return
		}
		_ = f.Value.Set(src.Value.String())
	})
	return cf
}

// clientConfig applies the rate limits, the user agent and the request
// guard to a copy of config.
func (o *DescheduleOptions) clientConfig(config *rest.Config) *rest.Config {
	return o.guard.wrapConfig(o.clientSettings(config))
}

// clientSettings applies the rate limits, the user agent and the request
// timeout to a copy of config.
func (o *DescheduleOptions) clientSettings(config *rest.Config) *rest.Config {
	c := rest.CopyConfig(config)
	c.QPS, c.Burst = o.QPS, o.Burst
	c.UserAgent = deschedule.EventComponent + "/" + version.Get().Version
	if c.Timeout == 0 {
		// A hanging server must not stall a pass, or a daemon, for ever.
		c.Timeout = defaultDescheduleRequestTimeout
	}
	return c
}

// newLogger builds the structured logger of the daemon, which also receives
// client-go's logs (leader election among them).
func newLogger(w io.Writer, format string) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: slogLevel(verbosity())}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("invalid --logging-format %q: use text or json", format)
}

// Validate checks that the flags make sense together.
func (o *DescheduleOptions) Validate() error {
	daemon := o.Interval > 0
	switch {
	case o.Interval < 0:
		return fmt.Errorf("--interval must be positive, or 0 for a single pass; got %s", o.Interval)
	case o.UnschedulableThreshold < 0:
		return fmt.Errorf("--unschedulable-threshold must be 0 or positive, got %s: it is how long a pod must have been unschedulable to count (karmada-descheduler's default is 5m)", o.UnschedulableThreshold)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout must be greater than zero, got %s", o.Timeout)
	case o.leaderElectSet && o.LeaderElect && !daemon:
		return errors.New("--leader-elect needs --interval: a single pass does not take a lease")
	case o.MetricsBindAddress != "" && !daemon:
		return errors.New("--metrics-bind-address needs --interval: a single pass serves no metrics")
	case o.HealthProbeBindAddress != "" && !daemon:
		return errors.New("--health-probe-bind-address needs --interval: a single pass serves no probes")
	case o.EnablePprof && !daemon:
		return errors.New("--enable-pprof needs --interval: a single pass serves no profiles")
	case o.EnablePprof && o.ProfilingBindAddress == "":
		return errors.New("--enable-pprof needs --profiling-bind-address")
	case o.Force && !daemon:
		return errors.New("--force needs --interval: only the daemon checks for a running karmada-descheduler")
	case o.Estimator != estimatorProxy && o.Estimator != estimatorKubeconfig:
		return fmt.Errorf("invalid --estimator %q: use proxy or kubeconfig", o.Estimator)
	case o.MaxReplicasPerPass < 0 || o.MaxReplicasPerCluster < 0:
		return fmt.Errorf("--max-replicas-per-pass and --max-replicas-per-cluster must be 0 (no limit) or positive, got %d and %d",
			o.MaxReplicasPerPass, o.MaxReplicasPerCluster)
	case o.RetryBouncedAfter <= 0:
		return fmt.Errorf("--retry-bounced-after must be positive, got %s", o.RetryBouncedAfter)
	}
	if err := validateRateLimits(o.QPS, o.Burst); err != nil {
		return err
	}
	if err := o.daemonFlags.validate(); err != nil {
		return err
	}
	for _, ns := range o.ExcludeNamespaces {
		if ns == o.Namespace && !o.AllNamespaces {
			return fmt.Errorf("namespace %s is both selected (-n or the kubeconfig) and excluded (--exclude-namespace); use -A to deschedule every other namespace", ns)
		}
	}
	return nil
}

// Run runs one pass, or the daemon when --interval is set.
func (o *DescheduleOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	ctx = o.guard.runs(ctx)
	klog.SetSlogLogger(o.logger)
	rest.SetDefaultWarningHandler(rest.NewWarningWriter(o.ErrOut, rest.WarningWriterOptions{Deduplicate: true}))
	if err := o.parseKinds(ctx); err != nil {
		if o.Interval > 0 && ctx.Err() != nil {
			// A daemon stopped while it starts stops as it does later.
			o.logger.Info("stopped", "component", deschedule.EventComponent)
			return nil
		}
		return err
	}

	host, err := os.Hostname()
	if err != nil {
		return withExitCode(ExitError, fmt.Errorf("cannot read the host name: %w", err))
	}
	kube, err := kubernetes.NewForConfig(o.restConfig)
	if err != nil {
		return withExitCode(ExitError, fmt.Errorf("cannot build a Kubernetes client for the Karmada apiserver: %w", err))
	}
	if o.Interval <= 0 {
		// A single pass writes its events one by one, so that it knows
		// they are stored before it exits and reports those refused.
		events := deschedule.NewEventClient(kube, deschedule.EventComponent)
		events.Host = host
		descheduler, err := o.descheduler(events)
		if err != nil {
			return withExitCode(ExitError, err)
		}
		return o.runOnce(ctx, descheduler)
	}

	// A daemon records events through client-go's recorder, as Kubernetes
	// components do: repeated events are aggregated and counted, floods are
	// rate-limited per object, and writes happen in the background. On the
	// way out it waits a while for the events of its last pass.
	eventsKube, err := kubernetes.NewForConfig(o.outlivingConfig)
	if err != nil {
		return withExitCode(ExitError, fmt.Errorf("cannot build a Kubernetes client for the Karmada apiserver: %w", err))
	}
	events := daemon.NewEventRecorder(eventsKube, deschedule.EventComponent, host)
	defer func() {
		flushCtx, cancel := context.WithTimeout(daemon.Shutdown(ctx), eventFlushTimeout)
		defer cancel()
		if err := events.Flush(flushCtx); err != nil {
			o.logger.Warn("some events may not have been recorded", "err", err)
		}
		events.Shutdown()
	}()
	descheduler, err := o.descheduler(events)
	if err != nil {
		return withExitCode(ExitError, err)
	}

	// The Lease gets a client of its own: a pass writing many events must
	// not make the renewals wait for the rate limiter and lose the Lease.
	// The client notes the server's clock, to tell whether a Lease another
	// program holds is still fresh.
	clock := rebalance.NewServerClock()
	leaseConfig := rest.CopyConfig(o.outlivingConfig)
	leaseConfig.UserAgent += " leader-election"
	leaseConfig.Wrap(clock.Wrap)
	leases, err := kubernetes.NewForConfig(leaseConfig)
	if err != nil {
		return withExitCode(ExitError, fmt.Errorf("cannot build a client for the leader election Lease: %w", err))
	}
	if err := o.checkKarmadaDescheduler(ctx, leases, clock.Now); err != nil {
		return withExitCode(ExitError, err)
	}
	return o.runDaemon(ctx, descheduler, leases, host)
}

// parseKinds turns --kinds into kinds. A kind that is not built in is
// looked up in the Karmada apiserver's discovery, within --timeout and
// until Ctrl-C, which end a pass as they end its listing of the bindings.
func (o *DescheduleOptions) parseKinds(ctx context.Context) error {
	parseCtx, cancel := deadlineContext(ctx, time.Now().Add(o.Timeout))
	defer cancel()
	defer o.guard.bind(o.guard.bind(parseCtx))
	kinds, err := deschedule.ParseKinds(o.Kinds, o.karmadaMapper)
	switch {
	case err != nil && ctx.Err() != nil:
		return withExitCode(ExitFailed, errors.New("interrupted before the bindings were listed; nothing was written"))
	case err != nil && parseCtx.Err() != nil:
		return withExitCode(ExitFailed, fmt.Errorf("--timeout %s ran out before the bindings were listed: the API server at %s (context %q) did not answer %s in time; nothing was written, run it again with a longer --timeout",
			o.Timeout, o.restConfig.Host, o.contextName(), describeRequest(o.guard.lastFailed())))
	case err != nil:
		return withExitCode(ExitError, fmt.Errorf("invalid --kinds: %w", err))
	}
	o.kinds = kinds
	return nil
}

// checkKarmadaDescheduler refuses to start while a karmada-descheduler holds
// its Lease, unless --force. The Lease checked is karmada-descheduler's in
// the lease namespace, whatever --leader-elect-resource-name says: a daemon
// on a Lease of its own would run beside karmada-descheduler.
func (o *DescheduleOptions) checkKarmadaDescheduler(ctx context.Context, leases kubernetes.Interface, serverNow func() (time.Time, bool)) error {
	var found *deschedule.ForeignLeader
	err := daemon.RetryStartup(ctx, o.logger, "reading karmada-descheduler's lease", daemonRetriable(ctx), func() (err error) {
		found, err = deschedule.FindForeignLeader(ctx, leases, o.LeaderElectNamespace, deschedule.DefaultLeaseName, serverNow)
		return o.endpoint().explainKeep(err)
	})
	if err != nil || found == nil {
		return err
	}
	if !o.Force {
		return found
	}
	if o.LeaderElect && o.LeaderElectName == deschedule.DefaultLeaseName {
		o.logger.Warn("karmada-descheduler holds its lease; --force: standing by on the same lease until it stops",
			"lease", found.Namespace+"/"+found.Name, "holder", found.Holder)
	} else {
		o.logger.Warn("karmada-descheduler holds its lease; --force: descheduling beside it, both may evict the same replicas",
			"lease", found.Namespace+"/"+found.Name, "holder", found.Holder)
	}
	return nil
}

// daemonRetriable accepts the errors of a daemon's start-up requests that a
// passing fault explains: those a command retries (isTransient) and, as a
// daemon has nobody at a terminal to tell at once and an orchestrator would
// only restart it, a request that ran out of --request-timeout and a refused
// connection (an apiserver restarting). Nothing is retried once ctx ends.
func daemonRetriable(ctx context.Context) func(error) bool {
	return func(err error) bool {
		return ctx.Err() == nil && (isTransient(err) || errors.Is(err, context.DeadlineExceeded) || utilnet.IsConnectionRefused(err))
	}
}

// descheduler wires the engine to the Karmada apiserver, the member
// clusters and events.
func (o *DescheduleOptions) descheduler(events deschedule.EventWriter) (*deschedule.Descheduler, error) {
	karmada, err := karmadaclient.NewForConfig(o.restConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot build a Karmada client: %w", err)
	}
	pods, err := o.podSource()
	if err != nil {
		return nil, err
	}
	opts := deschedule.Options{
		Namespace:              o.Namespace,
		Kinds:                  o.kinds,
		WorkloadSelector:       o.LabelSelector,
		ExcludedNamespaces:     o.ExcludeNamespaces,
		UnschedulableThreshold: o.UnschedulableThreshold,
		RetryBouncedAfter:      o.RetryBouncedAfter,
		DryRun:                 o.DryRun,
		MaxReplicasPerPass:     o.MaxReplicasPerPass,
		MaxReplicasPerCluster:  o.MaxReplicasPerCluster,
	}
	metaClient, err := metadata.NewForConfig(o.restConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot build a metadata client for the Karmada apiserver: %w", err)
	}
	opts.Templates = deschedule.NewMetadataTemplateLister(metaClient, o.karmadaMapper)
	return deschedule.New(karmada, pods, events, opts)
}

// podSource reads member clusters through the Karmada proxy or kubeconfig contexts.
func (o *DescheduleOptions) podSource() (deschedule.PodSource, error) {
	raw, err := o.memberContexts()
	if err != nil && (o.Estimator != estimatorProxy || o.MemberKubeconfig != "") {
		return nil, err
	}
	configure := func(c *rest.Config) { *c = *o.clientConfig(c) }
	if o.Estimator == estimatorProxy {
		karmada, err := karmadaclient.NewForConfig(o.restConfig)
		if err != nil {
			return nil, err
		}
		isPull := func(cluster string) (bool, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := karmada.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return c.Spec.SyncMode == clusterv1alpha1.Pull, nil
		}
		return deschedule.NewPullAwareProxyPodSource(o.restConfig, isPull, raw, configure), nil
	}
	return deschedule.NewKubeconfigPodSource(raw, nil, configure), nil
}

// memberContexts is the kubeconfig holding the member clusters' contexts:
// --member-kubeconfig, or the Karmada kubeconfig.
func (o *DescheduleOptions) memberContexts() (clientcmdapi.Config, error) {
	var raw clientcmdapi.Config
	if o.MemberKubeconfig != "" {
		loaded, err := clientcmd.LoadFromFile(o.MemberKubeconfig)
		if err != nil {
			return raw, fmt.Errorf("cannot read --member-kubeconfig %s: %w", o.MemberKubeconfig, err)
		}
		raw = *loaded
	} else {
		loaded, err := o.ConfigFlags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return raw, fmt.Errorf("cannot read the kubeconfig for member contexts, pass --member-kubeconfig: %w", err)
		}
		raw = loaded
	}
	return raw, nil
}

// runOnce runs a single pass and prints it.
func (o *DescheduleOptions) runOnce(ctx context.Context, d *deschedule.Descheduler) error {
	passCtx, cancel := deadlineContext(ctx, time.Now().Add(o.Timeout))
	defer cancel()
	result, err := d.Pass(passCtx)
	switch {
	case err != nil && ctx.Err() != nil:
		return withExitCode(ExitFailed, errors.New("interrupted before the bindings were listed; nothing was written"))
	case err != nil && passCtx.Err() != nil:
		return withExitCode(ExitFailed, fmt.Errorf("--timeout %s ran out before the bindings were listed: the API server at %s (context %q) did not answer %s in time; nothing was written, run it again with a longer --timeout",
			o.Timeout, o.restConfig.Host, o.contextName(), describeRequest(o.guard.lastFailed())))
	case err != nil:
		return withExitCode(ExitError, o.passError(err))
	}
	if err := o.print(result, true); err != nil {
		return withExitCode(ExitError, err)
	}
	o.reportLeftovers(passCtx)
	switch {
	case result.Stopped && ctx.Err() == nil:
		return withExitCode(ExitFailed, fmt.Errorf("--timeout %s ran out before every binding was written; the table shows what was done, run it again to finish", o.Timeout))
	case result.Stopped:
		return withExitCode(ExitFailed, errors.New("the pass was interrupted before every binding was written; the table shows what was done, run it again to finish"))
	case result.Err() != nil:
		return withExitCode(ExitFailed, fmt.Errorf("the pass was incomplete, it is safe to run again:\n%w", result.Err()))
	}
	return nil
}

// passError explains why the bindings could not be listed.
func (o *DescheduleOptions) passError(err error) error {
	var explained *explainedError
	if errors.As(err, &explained) {
		return err
	}
	// The engine says which bindings it listed; the cause is the API's answer.
	cause := err
	if inner := errors.Unwrap(err); inner != nil {
		cause = inner
	}
	if apierrors.IsNotFound(cause) && isUnservedResource(cause) {
		return fmt.Errorf("the cluster behind context %q (%s) is not a Karmada control plane: Karmada is not installed there (resourcebindings.work.karmada.io is not served); "+
			"point --kubeconfig or --karmada-context at the Karmada apiserver", o.contextName(), o.restConfig.Host)
	}
	if e := o.endpoint().explain(cause); e != cause {
		return e
	}
	return err
}

// endpoint names the daemon's API server for the error catalogue.
func (o *DescheduleOptions) endpoint() endpoint {
	return endpoint{context: o.contextName(), server: o.restConfig.Host, guard: o.guard}
}

// contextName names the kubeconfig context in use, for messages.
func (o *DescheduleOptions) contextName() string { return contextName(o.ConfigFlags) }

// print writes a pass in the chosen format to stdout and its summary to
// stderr. A daemon prints a pass only when an output format was chosen.
func (o *DescheduleOptions) print(result *deschedule.PassResult, once bool) error {
	switch o.OutputFormat {
	case "", "wide":
		if !once && o.OutputFormat == "" {
			return nil
		}
		wide := o.OutputFormat == "wide"
		opts := deschedule.PrintOptions{Wide: wide, NoHeaders: o.NoHeaders, WithNamespace: o.AllNamespaces, HideReady: !wide, ShowSkipped: wide}
		if err := deschedule.PrintPass(o.Out, result, opts); err != nil {
			return err
		}
	default:
		if err := o.printer.PrintObj(result.Report(), o.Out); err != nil {
			return fmt.Errorf("printing the pass as %s failed: %w", o.OutputFormat, err)
		}
	}
	if once {
		return deschedule.PrintSummary(o.ErrOut, result)
	}
	return nil
}

// runDaemon passes every interval until a signal arrives.
func (o *DescheduleOptions) runDaemon(ctx context.Context, d *deschedule.Descheduler, leases kubernetes.Interface, host string) error {
	log := o.logger.With("component", deschedule.EventComponent)
	reg := daemonMetrics()
	metrics, err := deschedule.NewMetrics(reg)
	if err != nil {
		return withExitCode(ExitError, err)
	}
	health := daemon.NewHealth(o.LeaderElect)

	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	profiling := ""
	if o.EnablePprof {
		profiling = o.ProfilingBindAddress
	}
	waitServers, serveErr := serveDaemonEndpoints(serveCtx, log, o.MetricsBindAddress, o.HealthProbeBindAddress, profiling, reg, health)
	if serveErr != nil {
		return withExitCode(ExitError, serveErr)
	}

	opts := deschedule.DaemonOptions{
		Interval:   o.Interval,
		Metrics:    metrics,
		Health:     health,
		Logger:     log,
		Retriable:  daemonRetriable(ctx),
		Explain:    o.endpoint().explainKeep,
		BeforePass: func(ctx context.Context) { o.sweepLeftovers(ctx, log) },
		OnPass: func(result *deschedule.PassResult, err error) {
			logPass(log, result, o.endpoint().explainKeep(err))
			if result != nil {
				if err := o.print(result, false); err != nil {
					log.Error("cannot print the pass", "err", err)
				}
			}
		},
	}
	if o.LeaderElect {
		opts.LeaderElection = o.leaderElection(leases, host)
	}
	log.Info("starting", "version", version.Get().Version, "namespace", orAll(o.Namespace), "kinds", o.Kinds, "selector", o.LabelSelector,
		"excludedNamespaces", o.ExcludeNamespaces, "estimator", o.Estimator, "dryRun", string(o.DryRun),
		"unschedulableThreshold", o.UnschedulableThreshold.String(), "interval", o.Interval.String(), "leaderElect", o.LeaderElect)
	runErr := d.Run(ctx, opts)
	stopServing()
	waitServers()
	if runErr != nil {
		return withExitCode(ExitError, o.passError(runErr))
	}
	return nil
}

// logPass writes one structured line per pass, and one per binding that was
// changed, failed or could not be counted.
func logPass(log *slog.Logger, result *deschedule.PassResult, err error) {
	if result == nil {
		log.Error("pass failed", "result", deschedule.PassError, "err", err)
		return
	}
	summary := []any{
		"result", deschedule.PassResultLabel(result, nil),
		"listed", result.Listed,
		"candidates", len(result.Bindings),
		"descheduled", result.Descheduled,
		"evictedReplicas", result.EvictedReplicas,
		"failed", result.Failed,
		"memberErrors", len(result.ClusterErrors),
		"dryRun", string(result.DryRun),
		"durationSeconds", result.End.Sub(result.Start).Seconds(),
	}
	for cluster, cerr := range result.ClusterErrors {
		log.Error("member cluster could not be listed", "cluster", cluster, "err", cerr)
	}
	for i := range result.Bindings {
		br := &result.Bindings[i]
		binding := []any{"namespace", br.Namespace, "binding", br.Name, "outcome", string(br.Outcome)}
		switch br.Outcome {
		case deschedule.OutcomeDescheduled:
			log.Info("binding descheduled", append(binding, "evictedReplicas", br.Evicted, "message", br.Message)...)
		case deschedule.OutcomeDryRun:
			log.Info("binding would be descheduled", append(binding, "evictedReplicas", br.Evicted, "message", br.Message)...)
		case deschedule.OutcomeFailed:
			log.Error("binding update failed", append(binding, "err", br.Err)...)
		case deschedule.OutcomeBlocked:
			log.Warn("binding left alone", append(binding, "reason", br.Message)...)
		}
		if br.EventErr != nil {
			log.Warn("event not recorded", append(binding, "err", br.EventErr)...)
		}
	}
	if result.Stopped {
		log.Info("pass stopped between writes", summary...)
		return
	}
	log.Info("pass finished", summary...)
}

func orAll(namespace string) string {
	if namespace == "" {
		return "(all)"
	}
	return namespace
}
