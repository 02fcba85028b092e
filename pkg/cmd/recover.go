package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

var (
	recoverLong = templates.LongDesc(`
		List the bindings that make-before-break moves of kubectl rebalance
		left suspended, and recover them.

		A move suspends its binding's scheduling and records its phase, its
		owner and its deadline in the annotation kubectl-rebalance.io/handover.
		A move whose process was killed (SIGKILL, a lost machine, a daemon
		that lost its Lease) leaves that behind, and while the binding stays
		suspended Karmada evicts replicas from a failing cluster without
		scheduling replacements. recover finds every such binding and, by the
		rules of docs/make-before-break.md, undoes a move that only started
		its new replicas, keeps the new placement of a move whose new replicas
		had taken over, and lets go of a binding someone else changed (an
		eviction, a scale) with Karmada's placement kept. A binding another
		running process is moving is left alone until its deadline.

		The deschedule and failback daemons do the same on every pass.`)

	recoverExample = templates.Examples(`
		# List and recover the leftovers in the current namespace
		kubectl rebalance recover

		# Only show what would be done, in every namespace
		kubectl rebalance recover -A --dry-run

		# With the owner, the deadline and the reason of each
		kubectl rebalance recover -A -o wide`)
)

// RecoverOptions holds the flags and the state of `kubectl rebalance recover`.
type RecoverOptions struct {
	AllNamespaces bool
	Output        string
	NoHeaders     bool
	Timeout       time.Duration
	DryRun        string
	dryRun        cmdutil.DryRunStrategy

	namespace   string
	configFlags *genericclioptions.ConfigFlags
	recoverer   *handover.Recoverer
	guard       *requestGuard

	genericiooptions.IOStreams
}

// NewCmdRecover builds the `recover` subcommand.
func NewCmdRecover(streams genericiooptions.IOStreams) *cobra.Command {
	o := &RecoverOptions{IOStreams: streams, Timeout: defaultGetTimeout, guard: &requestGuard{}}
	cmd := &cobra.Command{
		Use:                   "recover [-n NAMESPACE | -A] [--dry-run] [-o wide|yaml|json]",
		DisableFlagsInUseLine: true,
		Short:                 "List and recover bindings that interrupted make-before-break moves left suspended",
		Long:                  recoverLong,
		Example:               recoverExample,
		Args:                  cobra.NoArgs,
		SilenceUsage:          true,
		SilenceErrors:         true,
		RunE:                  runSteps(o.Run, func(cmd *cobra.Command, _ []string) error { return o.Complete(cmd) }),
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withExitCode(ExitError, cmdutil.UsageErrorf(c, "%v", err))
	})
	flags := cmd.Flags()
	flags.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Look in every namespace, and at ClusterResourceBindings.")
	flags.StringVarP(&o.Output, "output", "o", "", "Output format. One of: (wide, yaml, json). The default is a table.")
	flags.BoolVar(&o.NoHeaders, "no-headers", false, "Leave out the table's header line.")
	durationVar(flags, &o.Timeout, "timeout", o.Timeout, "How long to wait for the Karmada apiserver before giving up (exit code 1).")
	addDryRunFlag(cmd, &o.DryRun, "client lists what would be done and writes nothing; server sends the writes as server-side dry runs.")
	return cmd
}

// Complete reads the flags and builds the client.
func (o *RecoverOptions) Complete(cmd *cobra.Command) error {
	switch o.Output {
	case "", "wide", "yaml", "json":
	default:
		return fmt.Errorf("--output %q is not supported by recover; use wide, yaml or json", o.Output)
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout must be greater than zero, got %s", o.Timeout)
	}
	mode, err := dryRunMode(o.DryRun, o.ErrOut)
	if err != nil {
		return err
	}
	o.dryRun = map[string]cmdutil.DryRunStrategy{dryRunNone: cmdutil.DryRunNone, dryRunClient: cmdutil.DryRunClient, dryRunServer: cmdutil.DryRunServer}[mode]
	o.configFlags = inheritConfigFlags(cmd.Flags())
	if f := cmd.Flags().Lookup("karmada-context"); f != nil && f.Changed {
		*o.configFlags.Context = f.Value.String()
	}
	if !o.AllNamespaces {
		ns, _, err := o.configFlags.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			return fmt.Errorf("cannot use the kubeconfig: %v; check --kubeconfig and --karmada-context (or $KUBECONFIG)", err)
		}
		o.namespace = ns
	}
	config, err := o.configFlags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("cannot use the kubeconfig: %v; check --kubeconfig and --karmada-context (or $KUBECONFIG)", err)
	}
	config = o.guard.wrapConfig(rest.CopyConfig(config))
	clock := rebalance.NewServerClock()
	config.Wrap(clock.Wrap)
	client, err := karmadaclient.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("cannot use the kubeconfig: %v; check --kubeconfig and --karmada-context (or $KUBECONFIG)", err)
	}
	o.recoverer = &handover.Recoverer{Karmada: client, Clock: clock, DryRun: o.dryRun == cmdutil.DryRunServer}
	return nil
}

// recovered is one row of recover's output.
type recovered struct {
	Namespace string `json:"namespace,omitempty"`
	Binding   string `json:"binding"`
	Workload  string `json:"workload"`
	Phase     string `json:"phase"`
	Owner     string `json:"owner,omitempty"`
	Age       string `json:"age,omitempty"`
	Deadline  string `json:"deadline,omitempty"`
	Action    string `json:"action"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
}

// Run lists the leftovers and recovers them.
func (o *RecoverOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	ctx = o.guard.runs(ctx)
	reqCtx, cancel := deadlineContext(ctx, time.Now().Add(o.Timeout))
	defer cancel()
	found, err := o.recoverer.Find(reqCtx, o.namespace, o.AllNamespaces)
	if err != nil {
		base := &session{ConfigFlags: o.configFlags, guard: o.guard}
		if ctx.Err() != nil {
			return withExitCode(ExitError, errors.New("interrupted before the Karmada apiserver answered; nothing was recovered"))
		}
		return withExitCode(ExitError, fmt.Errorf("listing the bindings at %s (context %q) failed: %v", base.serverURL(), base.contextName(), err))
	}
	rows := make([]recovered, 0, len(found))
	failed := 0
	for _, lo := range found {
		d := lo.Decision
		if o.dryRun != cmdutil.DryRunClient && (d.Action == handover.ActionUndo || d.Action == handover.ActionLetGo) {
			var rerr error
			d, rerr = o.recoverer.Recover(reqCtx, lo.Namespace, lo.Name)
			if rerr != nil {
				failed++
				d = lo.Decision
				d.Action, d.Message = "Failed", fmt.Sprintf("recovering it failed: %v; run the command again", rerr)
			}
		}
		rows = append(rows, o.row(lo, d))
	}
	if err := o.print(rows); err != nil {
		return err
	}
	if o.Output == "" || o.Output == "wide" {
		fmt.Fprintln(o.ErrOut, recoverSummary(rows, o.dryRun))
	}
	if failed > 0 {
		return withExitCode(ExitFailed, silentError{msg: "some bindings could not be recovered"})
	}
	return nil
}

func (o *RecoverOptions) row(lo handover.Leftover, d handover.Decision) recovered {
	r := recovered{Namespace: lo.Namespace, Binding: lo.Name, Phase: string(d.Phase), Action: actionWord(d.Action, o.dryRun), Reason: d.Reason, Message: d.Message}
	if r.Phase == "" {
		r.Phase = "<unknown>"
	}
	r.Workload = strings.ToLower(lo.Workload.Kind) + "/" + lo.Workload.Name
	if lo.Ledger != nil {
		r.Owner = lo.Ledger.Owner
		if lo.Ledger.Deadline != nil {
			r.Deadline = lo.Ledger.Deadline.UTC().Format(time.RFC3339)
		}
	}
	if lo.Age > 0 {
		r.Age = duration.HumanDuration(lo.Age)
	}
	return r
}

// actionWord says what was done (or would be, in a dry run).
func actionWord(a handover.Action, dryRun cmdutil.DryRunStrategy) string {
	done := map[handover.Action]string{handover.ActionUndo: "undone", handover.ActionLetGo: "let go", handover.ActionWait: "in flight", handover.ActionNone: "gone"}
	would := map[handover.Action]string{handover.ActionUndo: "would undo", handover.ActionLetGo: "would let go", handover.ActionWait: "in flight", handover.ActionNone: "gone"}
	if dryRun == cmdutil.DryRunClient {
		return would[a]
	}
	if w, ok := done[a]; ok {
		return w
	}
	return strings.ToLower(string(a))
}

func (o *RecoverOptions) print(rows []recovered) error {
	switch o.Output {
	case "json", "yaml":
		raw, err := yaml.Marshal(map[string]any{"leftovers": rows})
		if err != nil {
			return err
		}
		if o.Output == "json" {
			if raw, err = yaml.YAMLToJSON(raw); err != nil {
				return err
			}
			raw = append(raw, '\n')
		}
		_, err = o.Out.Write(raw)
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	w := printers.GetNewTabWriter(o.Out)
	defer w.Flush()
	header := []string{"BINDING", "WORKLOAD", "PHASE", "AGE", "ACTION", "REASON"}
	if o.AllNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if o.Output == "wide" {
		header = append(header, "OWNER", "DEADLINE", "MESSAGE")
	}
	if !o.NoHeaders {
		fmt.Fprintln(w, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		cells := []string{r.Binding, r.Workload, r.Phase, orNone(r.Age), r.Action, r.Reason}
		if o.AllNamespaces {
			cells = append([]string{orNone(r.Namespace)}, cells...)
		}
		if o.Output == "wide" {
			cells = append(cells, orNone(r.Owner), orNone(r.Deadline), r.Message)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// recoverSummary is the closing line on stderr.
func recoverSummary(rows []recovered, dryRun cmdutil.DryRunStrategy) string {
	if len(rows) == 0 {
		return "no binding is held by an unfinished make-before-break move"
	}
	counts := map[string]int{}
	for _, r := range rows {
		counts[r.Action]++
	}
	var parts []string
	for _, a := range []string{"undone", "let go", "would undo", "would let go", "in flight", "failed", "gone"} {
		if counts[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
		}
	}
	suffix := ""
	if dryRun == cmdutil.DryRunClient {
		suffix = " (dry run: nothing written)"
	}
	return fmt.Sprintf("%d binding(s) held by unfinished moves: %s%s", len(rows), strings.Join(parts, ", "), suffix)
}
