package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/version"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

var (
	failbackLong = templates.LongDesc(`
		Bring workloads back to member clusters that recover, without a person:
		a daemon that watches the Cluster objects of the Karmada control plane.

		After a failover Karmada leaves a recovered cluster empty until someone
		asks for a fresh reschedule. When a member cluster becomes Ready again
		and carries no NoSchedule or NoExecute taint, and stays so for
		--stabilization-window, the daemon takes the workloads that cluster's
		failure displaced (those Karmada evicted from it, seen as graceful
		eviction tasks on their bindings, or that lost replicas there while it
		was down; with --rebalance-all, every workload), selects those a fresh
		reschedule would give replicas on that cluster (exactly what
		'kubectl rebalance TYPE -A --clusters CLUSTER' selects, predicted
		with Karmada's own scheduler code) and rebalances them in waves, as
		'kubectl rebalance' does with the same --max-in-flight, --wait-ready,
		--progress-deadline, --max-failures and --pause. Like kubectl rebalance
		it moves make-before-break: the replicas the recovered cluster gains
		start and become ready before another cluster loses any
		(--max-surge, --max-unavailable; --max-unavailable=100% moves in one
		write, as a bare trigger does).

		Workloads whose eviction ends after the window follow on their own.
		A cluster that fails again less than --cooldown after its last
		failback must stay healthy for --cooldown before the next one.
		A cluster that fails during its window starts the window over once it
		recovers; one that fails during its failback stops the waves that
		target it (those in flight finish and are recorded). Each recovery is
		recorded as a WorkloadRebalancer named failback-CLUSTER-RECOVERY,
		labelled app.kubernetes.io/managed-by=kubectl-rebalance-failback, with
		spec.ttlSecondsAfterFinished from --ttl. The record is the ledger: a
		daemon that restarts, or takes over the Lease, continues a failback
		where it stopped and never triggers a workload twice for one recovery.

		Templates annotated failback.kubectl-rebalance.io/skip=true are left
		where they are. -n, -A and -l choose the workloads, --kinds their kinds,
		-C/--clusters the member clusters failed back to. --dry-run logs what each
		failback would do and writes nothing.

		Like kubectl rebalance deschedule, it elects a leader on a Lease in the
		Karmada apiserver (kubectl-rebalance-failback in karmada-system; every
		replica follows the clusters, only the leader acts), serves Prometheus
		metrics and health probes, logs in text or JSON, and records events on
		the Cluster (FailbackWindowStarted, FailbackWindowReset,
		FailbackStarted, FailbackFinished, FailbackStopped), on each binding
		it triggers (FailbackTriggered, FailbackFailed) and on each record (the
		run's history, as for any recorded run), so that kubectl describe
		shows why a workload moved. SIGINT and SIGTERM stop starting workloads,
		let those in flight be recorded and release the Lease.

		The leader publishes its view of the clusters (which is in its
		stabilization window and how long is left, which workloads each
		failure displaced) in a ConfigMap beside its Lease: 'kubectl rebalance
		failback status' shows it, with the last failbacks, from any machine.`)

	failbackExample = templates.Examples(`
		# Fail back the Deployments a failure displaced once their cluster stays healthy for 5 minutes
		kubectl rebalance failback -A

		# StatefulSets too (their pods reattach the volumes left on the recovered cluster)
		kubectl rebalance failback -A --include-stateful

		# See what failbacks would do, writing nothing
		kubectl rebalance failback -A --dry-run

		# 10 workloads at a time, each ready within 5m, stopping after 3 failures; keep records a day
		kubectl rebalance failback -A --max-in-flight 10 --progress-deadline 5m --max-failures 3 --ttl 24h

		# What the daemon running in the cluster sees: windows and time left, displaced workloads, last failbacks
		kubectl rebalance failback status

		# Only labelled workloads of one namespace, only back to member1, with metrics and probes
		kubectl rebalance failback -n shop -l tier=web -C member1 --metrics-bind-address :8080 --health-probe-bind-address :10358`)
)

// Defaults of the failback command.
const (
	defaultStabilizationWindow = 5 * time.Minute
	defaultFailbackCooldown    = 30 * time.Minute
	defaultFailbackMaxInFlight = 10
	defaultFailbackTTL         = 24 * time.Hour
	defaultFailbackLeaseName   = "kubectl-rebalance-failback"
)

// FailbackOptions holds the flags and the state of `kubectl rebalance failback`.
type FailbackOptions struct {
	StabilizationWindow time.Duration
	Cooldown            time.Duration
	RebalanceAll        bool
	IncludeStateful     bool
	Kinds               []string
	Clusters            []string
	AllNamespaces       bool
	LabelSelector       string
	// DryRunFlag is --dry-run: none, client or server; DryRun is set by
	// Complete.
	DryRunFlag string
	DryRun     rebalance.DryRun
	// TTL is --ttl, whole seconds once validated.
	TTL              time.Duration
	MaxInFlight      int
	WaitReady        bool
	ProgressDeadline time.Duration
	MaxFailures      int
	Pause            time.Duration
	QPS              float32
	Burst            int
	estimatorOptions
	// handoverOptions are kubectl rebalance's --max-surge and
	// --max-unavailable: a failback moves make-before-break as it does.
	handoverOptions

	daemonFlags

	// Set by Complete.
	configFlags *genericclioptions.ConfigFlags
	// kubeConfig is the client config the kubeconfig flags give, before
	// the daemon's own settings: each failback's run builds its clients
	// from it (newTargetOptionsForConfig).
	kubeConfig *rest.Config
	namespace  string
	restConfig *rest.Config
	logger     *slog.Logger
	// guard bounds the daemon's requests by its shutdown budget once a
	// signal came; it leaves their ends to their contexts until then.
	guard *requestGuard

	genericiooptions.IOStreams
}

// NewFailbackOptions returns options with the flags' defaults.
func NewFailbackOptions(streams genericiooptions.IOStreams) *FailbackOptions {
	return &FailbackOptions{
		StabilizationWindow: defaultStabilizationWindow,
		Cooldown:            defaultFailbackCooldown,
		Kinds:               []string{"deployments.apps"},
		TTL:                 defaultFailbackTTL,
		DryRunFlag:          dryRunNone,
		DryRun:              rebalance.DryRunNone,
		MaxInFlight:         defaultFailbackMaxInFlight,
		WaitReady:           true,
		ProgressDeadline:    defaultProgressDeadline,
		QPS:                 defaultDescheduleQPS,
		Burst:               defaultDescheduleBurst,
		daemonFlags:         newDaemonFlags(defaultFailbackLeaseName),
		configFlags:         genericclioptions.NewConfigFlags(true),
		IOStreams:           streams,
	}
}

// NewCmdFailback builds the `failback` subcommand.
func NewCmdFailback(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewFailbackOptions(streams)
	cmd := &cobra.Command{
		Use:                   "failback [-n NAMESPACE | -A] [-l SELECTOR] [--stabilization-window DURATION] [--max-in-flight N]",
		DisableFlagsInUseLine: true,
		Short:                 "Bring workloads back to member clusters that recover, as a daemon",
		Long:                  failbackLong,
		Example:               failbackExample,
		ValidArgsFunction:     cobra.NoFileCompletions,
		SilenceUsage:          true,
		SilenceErrors:         true,
		RunE:                  runSteps(o.Run, o.Complete, withoutArgs(o.Validate)),
	}
	o.AddFlags(cmd)
	cmd.AddCommand(NewCmdFailbackStatus(streams))
	return cmd
}

// AddFlags registers the command's own flags.
func (o *FailbackOptions) AddFlags(cmd *cobra.Command) {
	flags := cmd.Flags()
	durationVar(flags, &o.StabilizationWindow, "stabilization-window", o.StabilizationWindow, "How long a recovered cluster must stay Ready and free of NoSchedule/NoExecute taints before its workloads fail back; a failure during the window starts it over.")
	durationVar(flags, &o.Cooldown, "cooldown", o.Cooldown, "A cluster that fails again less than this after its last failback must then stay healthy this long (instead of --stabilization-window) before the next one: a flapping cluster is not failed back on every cycle. 0 turns it off.")
	flags.BoolVar(&o.RebalanceAll, "rebalance-all", o.RebalanceAll, "Fail back every selected workload a fresh reschedule gives replicas on a recovered cluster, not only those its failure displaced (evicted from it, or moved off it while it was down).")
	flags.StringSliceVar(&o.Kinds, "kinds", o.Kinds, "Workload kinds failed back, named as kubectl names resources (deployments.apps, a custom resource's plural.group); StatefulSets need --include-stateful.")
	flags.BoolVar(&o.IncludeStateful, "include-stateful", o.IncludeStateful, "Fail back StatefulSets too (added to the default --kinds, and allowed in --kinds): their pods on the recovered cluster start from the volumes left there before the failover, not from the data written since; see docs/failback.md.")
	addClustersFlag(flags, &o.Clusters, "Fail back only to these member clusters (e.g. -C member1,member2); every cluster when empty.")
	flags.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "Fail back workloads in all namespaces.")
	flags.StringVarP(&o.LabelSelector, "selector", "l", o.LabelSelector, "Only workloads whose labels match this selector (e.g. -l app=web,tier!=db).")
	addDryRunFlag(cmd, &o.DryRunFlag, "Log what each failback would do (the workloads a fresh reschedule gives replicas on the recovered cluster), record no events and no WorkloadRebalancer; with client the bindings are only read, with server the triggers are sent with dryRun=All and nothing is persisted.")
	durationVar(flags, &o.TTL, "ttl", o.TTL, "spec.ttlSecondsAfterFinished of each failback's WorkloadRebalancer (a duration such as 24h, or seconds such as 86400, counted in whole seconds): deleted this long after it finished (by the daemon, or Karmada's controller); 0 deletes it at once.")
	flags.IntVar(&o.MaxInFlight, "max-in-flight", o.MaxInFlight, "At most this many workloads of a failback between \"trigger written\" and \"done\" at a time (as kubectl rebalance --max-in-flight).")
	flags.BoolVar(&o.WaitReady, "wait-ready", o.WaitReady, "A workload is done once rescheduled and the replicas of its new placement are ready; with false, rescheduled is done.")
	durationVar(flags, &o.ProgressDeadline, "progress-deadline", o.ProgressDeadline, "How long each workload may take from its start to done before it counts as failed; 0 means no limit.")
	flags.IntVar(&o.MaxFailures, "max-failures", o.MaxFailures, "Stop starting workloads of a failback once this many failed; those in flight finish, the rest stay pending in its record. 0 means no limit.")
	durationVar(flags, &o.Pause, "pause", o.Pause, "Keep a slot free this long after its workload finished before the next one takes it.")
	addRateLimitFlags(cmd, &o.QPS, &o.Burst, "Requests per second to the Karmada apiserver.", "Requests sent at once before --kube-api-qps applies.")
	addEstimatorFlags(cmd, &o.estimatorOptions)
	o.handoverOptions.addFlags(cmd)

	o.daemonFlags.addFlags(cmd, "",
		"Act only while holding the Lease in the Karmada apiserver, so that several replicas run with one active (every replica follows the clusters).",
		"Name of the leader election Lease.")
}

// Complete fills the options from the flags and the kubeconfig.
func (o *FailbackOptions) Complete(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return cmdutil.UsageErrorf(cmd, "failback takes no arguments, got %q; choose workloads with -n, -A, -l and --kinds", args)
	}
	o.configFlags = inheritConfigFlags(cmd.Flags())
	if f := cmd.Flags().Lookup("karmada-context"); f != nil && f.Changed {
		if c := cmd.Flags().Lookup("context"); c != nil && c.Changed && c.Value.String() != f.Value.String() {
			return fmt.Errorf("--karmada-context %q and --context %q disagree; give only one of them", f.Value.String(), c.Value.String())
		}
		*o.configFlags.Context = f.Value.String()
	}
	mode, err := dryRunMode(o.DryRunFlag, o.ErrOut)
	if err != nil {
		return cmdutil.UsageErrorf(cmd, "%v", err)
	}
	o.DryRun = rebalance.DryRun(mode)
	if o.IncludeStateful && !cmd.Flags().Changed("kinds") {
		o.Kinds = append(o.Kinds, "statefulsets.apps")
	}
	o.daemonFlags.complete()
	o.namespace, _, err = o.configFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return kubeconfigError(o.configFlags, err)
	}
	if o.AllNamespaces {
		o.namespace = ""
	}
	o.kubeConfig, err = o.configFlags.ToRESTConfig()
	if err != nil {
		return kubeconfigError(o.configFlags, err)
	}
	o.restConfig = rest.CopyConfig(o.kubeConfig)
	o.restConfig.QPS, o.restConfig.Burst = o.QPS, o.Burst
	o.restConfig.UserAgent = failback.EventComponent + "/" + version.Get().Version
	if o.restConfig.Timeout == 0 {
		o.restConfig.Timeout = defaultDescheduleRequestTimeout
	}
	o.guard = &requestGuard{}
	o.restConfig = o.guard.wrapConfigOutlivingRun(o.restConfig)
	o.logger, err = newLogger(o.ErrOut, o.LogFormat)
	return err
}

// Validate checks that the flags make sense together.
func (o *FailbackOptions) Validate() error {
	switch {
	case o.Cooldown < 0:
		return fmt.Errorf("--cooldown cannot be negative, got %s: it is how long a cluster that failed again soon after its failback must stay healthy (e.g. 30m), 0 turns it off", o.Cooldown)
	case o.StabilizationWindow < 0:
		return fmt.Errorf("--stabilization-window cannot be negative, got %s: it is how long a recovered cluster must stay healthy before its failback (e.g. 5m)", o.StabilizationWindow)
	case o.MaxInFlight < 1:
		return fmt.Errorf("--max-in-flight must be at least 1, got %d: a failback goes in waves", o.MaxInFlight)
	case o.MaxFailures < 0:
		return fmt.Errorf("--max-failures must be 0 (no limit) or more, got %d", o.MaxFailures)
	case o.ProgressDeadline < 0 || o.Pause < 0:
		return errors.New("--progress-deadline and --pause cannot be negative")
	case len(o.Kinds) == 0:
		return errors.New("--kinds is empty: name the workload kinds to fail back, e.g. --kinds deployments.apps")
	}
	if o.TTL < 0 {
		return fmt.Errorf("invalid --ttl %s: a ttl cannot be negative; 0 deletes each record as soon as it finished, e.g. --ttl 24h", o.TTL)
	}
	if _, err := wholeSeconds("ttl", o.TTL, "24h"); err != nil {
		return err
	}
	if err := validateRateLimits(o.QPS, o.Burst); err != nil {
		return err
	}
	if err := o.daemonFlags.validate(); err != nil {
		return err
	}
	if err := o.validateEstimator(); err != nil {
		return err
	}
	if err := checkBudgetFlags(&o.handoverOptions); err != nil {
		return err
	}
	if err := o.handoverOptions.validate(); err != nil {
		return err
	}
	for _, k := range o.Kinds {
		if strings.TrimSpace(k) == "" || strings.Contains(k, "/") {
			return fmt.Errorf("invalid --kinds entry %q: name a resource type as kubectl does, e.g. deployments.apps", k)
		}
		if isStatefulSetKind(k) && !o.IncludeStateful {
			return fmt.Errorf("--kinds %s names StatefulSets, which are failed back only with --include-stateful: the pods re-created on the recovered cluster reattach the volumes left there before the failover (see docs/failback.md)", k)
		}
	}
	return nil
}

// Run is the daemon: it follows the clusters until a signal arrives.
func (o *FailbackOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	ctx = o.guard.runs(ctx)
	klog.SetSlogLogger(o.logger)
	rest.SetDefaultWarningHandler(rest.NewWarningWriter(o.ErrOut, rest.WarningWriterOptions{Deduplicate: true}))
	log := o.logger.With("component", failback.EventComponent)

	host, err := os.Hostname()
	if err != nil {
		return withExitCode(ExitError, fmt.Errorf("cannot read the host name: %w", err))
	}
	kube, err := kubernetes.NewForConfig(o.restConfig)
	if err != nil {
		return withExitCode(ExitError, fmt.Errorf("cannot build a Kubernetes client for the Karmada apiserver: %w", err))
	}
	karmada, err := karmadaclient.NewForConfig(o.restConfig)
	if err != nil {
		return withExitCode(ExitError, fmt.Errorf("cannot build a Karmada client: %w", err))
	}
	events := daemon.NewEventRecorder(kube, failback.EventComponent, host)
	defer func() {
		flushCtx, cancel := context.WithTimeout(daemon.Shutdown(ctx), eventFlushTimeout)
		defer cancel()
		if err := events.Flush(flushCtx); err != nil {
			log.Warn("some events may not have been recorded", "err", err)
		}
		events.Shutdown()
	}()

	reg := daemonMetrics()
	metrics, err := failback.NewMetrics(reg)
	if err != nil {
		return withExitCode(ExitError, err)
	}
	health := daemon.NewHealth(o.LeaderElect)
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	waitServers, err := serveDaemonEndpoints(serveCtx, log, o.MetricsBindAddress, o.HealthProbeBindAddress, "", reg, health)
	if err != nil {
		return withExitCode(ExitError, err)
	}

	ttl := o.ttlSeconds()
	controller := failback.New(karmada, &failbackRunner{o: o, log: log, events: events}, failback.Options{
		Window:       o.StabilizationWindow,
		Cooldown:     o.Cooldown,
		RebalanceAll: o.RebalanceAll,
		Namespace:    o.namespace,
		TTL:          &ttl,
		DryRun:       o.DryRun != rebalance.DryRunNone,
		Clusters:     o.Clusters,
		Metrics:      metrics,
		Events:       events,
		Logger:       log,
		Explain:      o.endpoint().explainKeep,
		Retriable:    daemonRetriable(ctx),
		Leftovers: func(ctx context.Context) {
			sweepLeftovers(ctx, log, o.restConfig, leftoverScope{namespace: o.namespace}, o.DryRun != rebalance.DryRunNone)
		},
		Publisher: o.statePublisher(kube),
		Identity:  daemon.HolderIdentity(host),
	})
	var le *daemon.LeaderElection
	if o.LeaderElect {
		// The Lease gets a client of its own: a failback writing many
		// triggers must not make the renewals wait for the rate limiter.
		leaseConfig := rest.CopyConfig(o.restConfig)
		leaseConfig.UserAgent += " leader-election"
		leases, err := kubernetes.NewForConfig(leaseConfig)
		if err != nil {
			return withExitCode(ExitError, fmt.Errorf("cannot build a client for the leader election Lease: %w", err))
		}
		le = o.leaderElection(leases, host)
		controller.SetIdentity(le.Identity)
	}
	log.Info("starting", "version", version.Get().Version, "namespace", orAll(o.namespace), "kinds", o.Kinds, "selector", o.LabelSelector,
		"clusters", o.Clusters, "stabilizationWindow", o.StabilizationWindow.String(), "cooldown", o.Cooldown.String(), "rebalanceAll", o.RebalanceAll, "maxInFlight", o.MaxInFlight, "maxFailures", o.MaxFailures,
		"progressDeadline", o.ProgressDeadline.String(), "waitReady", o.WaitReady, "maxSurge", o.MaxSurge, "maxUnavailable", o.MaxUnavailable, "ttl", o.TTL.String(), "dryRun", string(o.DryRun), "leaderElect", o.LeaderElect)
	runErr := controller.Run(ctx, le, health)
	stopServing()
	waitServers()
	if runErr != nil {
		var explained *explainedError
		if errors.As(runErr, &explained) {
			// The catalogue's words name the server and the context.
			return withExitCode(ExitError, runErr)
		}
		return withExitCode(ExitError, fmt.Errorf("%w (Karmada apiserver %s)", runErr, o.restConfig.Host))
	}
	log.Info("stopped")
	return nil
}

// endpoint names the daemon's API server for the error catalogue.
func (o *FailbackOptions) endpoint() endpoint {
	return endpoint{context: contextName(o.configFlags), server: o.restConfig.Host, guard: o.guard}
}

// ttlSeconds is --ttl as spec.ttlSecondsAfterFinished (Validate made sure
// it fits).
func (o *FailbackOptions) ttlSeconds() int32 { return int32(o.TTL / time.Second) }

// statePublisher is where the daemon publishes its view of the clusters
// for `kubectl rebalance failback status`: a ConfigMap named and placed like
// its Lease. A dry run writes nothing, that view included.
func (o *FailbackOptions) statePublisher(kube kubernetes.Interface) failback.Publisher {
	if o.DryRun != rebalance.DryRunNone {
		return nil
	}
	return &failback.ConfigMapPublisher{Client: kube.CoreV1(), Namespace: o.LeaderElectNamespace, Name: o.LeaderElectName}
}

// isStatefulSetKind reports whether a --kinds entry names StatefulSets, in
// any of the ways kubectl accepts.
func isStatefulSetKind(k string) bool {
	switch strings.ToLower(strings.TrimSpace(k)) {
	case "statefulsets", "statefulset", "sts", "statefulsets.apps", "statefulset.apps", "statefulsets.v1.apps", "statefulset.v1.apps":
		return true
	}
	return false
}

// failbackRunner runs each failback with kubectl rebalance's engine
// (pkg/run): the workloads are resolved and selected as
// 'kubectl rebalance KINDS --clusters CLUSTER' resolves and selects them,
// and rebalanced in waves under the recovery's record.
type failbackRunner struct {
	o   *FailbackOptions
	log *slog.Logger
	// events, when set, records each failback's history on its record
	// too, as kubectl rebalance does for a recorded run.
	events *daemon.EventRecorder
}

// targets names the workloads of a failback: the kinds, namespace and
// selector of the daemon, or, resumed, the workloads its record planned
// (failback.PlannedAnnotation; those the record lists already are not
// triggered again), or, on a record without that list, the workloads it
// lists. Its clients are its own, built from the daemon's kubeconfig.
func (r *failbackRunner) targets(ctx context.Context, req failback.Request, streams genericiooptions.IOStreams) *targetOptions {
	o := r.o
	var planned []rebalance.Workload
	if req.Resume {
		planned = r.planned(ctx, req.Name)
	}
	t := newTargetOptionsForConfig(streams, o.configFlags, o.kubeConfig, planned)
	t.QPS, t.Burst = o.QPS, o.Burst
	// The selection is predicted as karmada-scheduler sizes the members.
	t.estimatorOptions = o.estimatorOptions
	t.Namespace = o.namespace
	switch {
	case planned != nil:
	case req.Resume:
		t.Args = []string{"workloadrebalancer/" + req.Name}
	default:
		t.Args = []string{strings.Join(o.Kinds, ",")}
		t.AllNamespaces = o.AllNamespaces
		t.LabelSelector = o.LabelSelector
		t.All = o.LabelSelector == ""
		t.skip = func(annotations map[string]string) bool { return annotations[failback.SkipAnnotation] == "true" }
	}
	return t
}

// planned returns the workloads the record name planned; nil when the
// record cannot be read or plans nothing it does not list.
func (r *failbackRunner) planned(ctx context.Context, name string) []rebalance.Workload {
	if r.o.restConfig == nil {
		return nil
	}
	karmada, err := karmadaclient.NewForConfig(r.o.restConfig)
	if err != nil {
		return nil
	}
	rb, err := karmada.AppsV1alpha1().WorkloadRebalancers().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		r.log.Warn("cannot read the failback record; resuming the workloads it lists", "record", name, "err", err)
		return nil
	}
	planned, _ := failback.Planned(rb)
	return planned
}

// request is the run of a failback: the daemon's waves, recorded under the
// recovery's name with the daemon's ttl; a dry run writes and records
// nothing.
func (r *failbackRunner) request(req failback.Request, resolved *rebalance.Resolved) run.Request {
	o := r.o
	out := run.Request{
		Targets:     resolved.Targets,
		Rebalancers: resolved.Rebalancers,
		DryRun:      rebalance.DryRunNone,
		Wait:        true,
		Workers:     o.Burst,
		Timeout:     defaultTimeout,
	}
	if o.DryRun != rebalance.DryRunNone {
		out.DryRun = o.DryRun
		return out
	}
	ttl := o.ttlSeconds()
	out.Record = run.Recording{TTL: &ttl, Labels: failback.RecordLabels(req.Cluster, req.Key)}
	if len(resolved.Rebalancers) == 0 {
		out.Record.Name = req.Name
	}
	if !req.Resume {
		planned, err := failback.PlannedAnnotations(rebalance.DistinctWorkloads(resolved.Targets))
		if err != nil {
			r.log.Warn("the failback record will not list its workloads up front; resumed after a restart, it finishes only those it lists", "record", req.Name, "err", err)
		}
		out.Record.Annotations = planned
	}
	out.Waves = &run.Waves{Options: waves.Options{
		MaxInFlight:      o.MaxInFlight,
		WaitReady:        o.WaitReady,
		ProgressDeadline: o.ProgressDeadline,
		MaxFailures:      o.MaxFailures,
		Pause:            o.Pause,
	}}
	return out
}

// Failback implements failback.Runner.
func (r *failbackRunner) Failback(ctx context.Context, req failback.Request) (*failback.Report, error) {
	log := r.log.With("cluster", req.Cluster, "record", req.Name)
	out := &logLines{log: log, msg: "rebalance"}
	defer out.Flush()
	report := &failback.Report{DryRun: r.o.DryRun != rebalance.DryRunNone}
	if !req.Resume && !req.All && len(req.Workloads) == 0 {
		log.Info("rebalance", "line", "no workload was displaced by the failure of "+req.Cluster+" (evicted from it, or moved off it while it was down); nothing to fail back (--rebalance-all fails back every workload that would gain)")
		return report, nil
	}
	rows, err := r.rebalance(ctx, req, out, report)
	if err != nil && ctx.Err() != nil && rows {
		err = nil
	}
	return report, err
}

// rebalance resolves, selects and rebalances the workloads of req, writing
// what a person would read to out. It reports whether the run got as far
// as its rows.
func (r *failbackRunner) rebalance(ctx context.Context, req failback.Request, out *logLines, report *failback.Report) (bool, error) {
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out}
	t := r.targets(ctx, req, streams)
	r.log.Debug("rebalancing", "cluster", req.Cluster, "record", req.Name, "workloads", t.Args, "resume", req.Resume)
	t.deadline = time.Now().Add(t.Timeout)
	mapper, resolved, err := t.startup(ctx)
	if err != nil {
		return false, failbackError(err)
	}
	if !req.Resume {
		if !req.All {
			for _, w := range keepDisplaced(resolved, req.Workloads) {
				fmt.Fprintln(out, leftOutLine(w, req.Cluster, r.o.IncludeStateful))
			}
			fmt.Fprintf(out, "%d workload(s) displaced by the failure of %s among those selected\n", len(resolved.Targets), req.Cluster)
			if len(resolved.Targets) == 0 {
				return false, nil
			}
		}
		selectCtx, cancel := deadlineContext(ctx, t.deadline)
		_, err := t.selectTargets(selectCtx, resolved, predict.Selection{Clusters: []string{req.Cluster}})
		cancel()
		if err != nil || len(resolved.Targets) == 0 {
			return false, failbackError(err)
		}
	}
	rr := r.request(req, resolved)
	if workloads := rebalance.DistinctWorkloads(resolved.Targets); rr.DryRun != rebalance.DryRunNone && len(workloads) > massThreshold {
		// As kubectl rebalance announces a large dry run (a failback's
		// waves are --quiet).
		fmt.Fprintln(out, announcementHead(workloads, rr.DryRun))
	}
	if rr.Waves != nil {
		// Each workload is bounded by its progress deadline instead.
		t.deadline = time.Now().Add(100 * 365 * 24 * time.Hour)
	}
	rr.Deadline = t.deadline
	if recorded, err := rr.Recorded(); err != nil {
		return false, err
	} else if recorded {
		if err := t.checkRebalancerServed(ctx, mapper); err != nil {
			return false, failbackError(err)
		}
	}
	engine, err := t.engine(mapper)
	if err != nil {
		return false, err
	}
	if r.events != nil {
		engine.Events = r.events.Recorder()
	}
	report.OneWrite = r.mover(t, engine, &rr, out)
	gotRows := false
	rr.Hooks = run.Hooks{
		Waves:  req.Progress,
		Notice: func(line string) { fmt.Fprintln(out, line) },
		Rows: func(res *run.Result) error {
			gotRows = true
			report.Rows = res.Rows
			if res.Waves != nil && res.Waves.Stop != waves.StopNone {
				report.Stopped = res.Waves.StopMessage
				report.BudgetSpent = res.Waves.Stop == waves.StopFailureBudget
			}
			// The rows in the log, as the command prints them with -o wide.
			if err := rbprinters.PrintRows(out, res.Rows, rbprinters.RowPrintOptions{Wide: true, WithNamespace: t.AllNamespaces, DryRun: r.o.DryRun != rebalance.DryRunNone}); err != nil {
				return err
			}
			fmt.Fprintln(out, rowsSummary(res.Rows, rr.DryRun))
			if r.o.DryRun != rebalance.DryRunNone {
				warnUnchangeable(out, res.Rows)
			}
			return nil
		},
	}
	res, err := engine.Run(ctx, rr)
	if err == nil && res.Interrupted && res.Record == nil && res.Waves == nil {
		fmt.Fprintln(out, interruptedSummary(&rebalance.Result{Rows: res.Rows, Written: res.Written}, rr.DryRun))
	}
	return gotRows, failbackError(err)
}

// mover gives the failback's run kubectl rebalance's make-before-break
// mover (built by the same session.handoverMover), and says in the
// log how its workloads move: made before break with the daemon's budget,
// or in one write and why. It returns why every workload moves in one
// write ("" when they go through the mover). A dry run moves nothing.
func (r *failbackRunner) mover(t *targetOptions, engine *run.Engine, rr *run.Request, out io.Writer) string {
	if rr.DryRun != rebalance.DryRunNone {
		return ""
	}
	o := r.o
	mover := t.handoverMover(engine, rr.Targets, moveSettings{handover: &o.handoverOptions, wait: rr.Wait, waitReady: o.WaitReady})
	line, why := moveLine(mover != nil, o.MaxSurge, o.MaxUnavailable, o.oneWrite())
	fmt.Fprintln(out, line)
	if mover == nil {
		return why
	}
	rr.Mover = mover
	if rr.Waves != nil {
		rr.Waves.Mover = mover
	}
	return ""
}

// moveLine says how a failback's workloads move, and why they move in one
// write when they do.
func moveLine(made bool, maxSurge, maxUnavailable string, oneWrite bool) (line, why string) {
	switch {
	case made:
		return fmt.Sprintf("moving make-before-break (--max-surge %s, --max-unavailable %s): the replicas a cluster gains start and become ready before another cluster loses any; each row says what was staged and what the scheduler chose, or why a workload moved in one write", maxSurge, maxUnavailable), ""
	case oneWrite:
		why = "--max-unavailable " + maxUnavailable + " lets every replica be unavailable"
		return "moving in one write (" + why + "): Karmada scales the clusters that lose replicas down at once, before the replacements are ready", why
	}
	why = "this Karmada release cannot suspend a binding's scheduling"
	return "moving in one write: " + why + " (see the warning above)", why
}

// keepDisplaced narrows the resolved targets to the workloads a cluster's
// failure displaced, and returns the displaced workloads that are not
// among the targets (not of --kinds, not matching -l, or skipped).
func keepDisplaced(resolved *rebalance.Resolved, displaced []rebalance.Workload) (leftOut []rebalance.Workload) {
	keep := make(map[string]bool, len(displaced))
	for _, w := range displaced {
		keep[failback.WorkloadIdentity(w)] = true
	}
	selected := make(map[string]bool, len(resolved.Targets))
	targets := resolved.Targets[:0:0]
	for _, t := range resolved.Targets {
		id := failback.WorkloadIdentity(t.Workload)
		selected[id] = true
		if keep[id] {
			targets = append(targets, t)
		}
	}
	resolved.Targets = targets
	for _, w := range displaced {
		if !selected[failback.WorkloadIdentity(w)] {
			leftOut = append(leftOut, w)
		}
	}
	return leftOut
}

// leftOutLine says why a workload the failure of cluster displaced is not
// failed back: a StatefulSet without --include-stateful, or a workload
// the daemon does not select.
func leftOutLine(w rebalance.Workload, cluster string, includeStateful bool) string {
	name := w.Name
	if w.Namespace != "" {
		name = w.Namespace + "/" + w.Name
	}
	what := fmt.Sprintf("%s %s was displaced by the failure of %s and is not failed back: ", strings.ToLower(w.Kind), name, cluster)
	if w.Kind == "StatefulSet" && strings.HasPrefix(w.APIVersion, "apps/") && !includeStateful {
		return what + "StatefulSets are failed back only with --include-stateful (the pods re-created on " + cluster +
			" reattach the volumes left there before the failover; see docs/failback.md)"
	}
	return what + "it is not among the workloads this daemon selects (--kinds, -l, or the " + failback.SkipAnnotation + "=true annotation)"
}

// failbackError keeps the errors a failback reports: neither failed or
// pending workloads (the rows say which) nor a run that stopped before it
// wrote anything.
func failbackError(err error) error {
	var (
		coded      *exitError
		incomplete *run.IncompleteError
	)
	switch {
	case err == nil, errors.As(err, &incomplete):
		return nil
	case errors.As(err, &coded) && coded.code != ExitError:
		return nil
	}
	return err
}

// logLines turns what a failback's run tells a person into log lines.
type logLines struct {
	mu  sync.Mutex
	log *slog.Logger
	msg string
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			break
		}
		l.emit(line)
	}
	return len(p), nil
}

// Flush logs a last line without a newline.
func (l *logLines) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() > 0 {
		l.emit(l.buf.String())
		l.buf.Reset()
	}
}

func (l *logLines) emit(line string) {
	line = strings.TrimRight(line, "\r\n")
	// Terminal progress redraws start with a carriage return.
	if i := strings.LastIndex(line, "\r"); i >= 0 {
		line = line[i+1:]
	}
	if strings.TrimSpace(line) != "" {
		l.log.Info(l.msg, "line", line)
	}
}
