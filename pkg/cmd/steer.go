package cmd

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	appsclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/typed/apps/v1alpha1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
)

var (
	abortLong = templates.LongDesc(`
		Abort a recorded run: mark its WorkloadRebalancer aborted, with who
		and when, so that the process running it - on this machine or any
		other - stops starting workloads. The moves in flight finish or are
		let go by the make-before-break rules, as on Ctrl-C; the process
		records what it did and exits 3 with the workloads not started
		pending. The mark stays on the record ('kubectl rebalance get NAME'
		shows it) until 'kubectl rebalance resume NAME' continues the run.

		Who is the user the Karmada apiserver authenticates (a
		SelfSubjectReview), or the kubeconfig's user where the server cannot
		tell.

		Exit codes: 0 the record is marked aborted (or already was); 1 it
		does not exist or cannot be written.`)

	abortExample = templates.Examples(`
		# Stop a waved run started elsewhere from starting further workloads
		kubectl rebalance abort fleet-after-failover

		# Watch it stop
		kubectl rebalance get fleet-after-failover -w`)

	resumeLong = templates.LongDesc(`
		Continue a recorded run that was interrupted (Ctrl-C, a lost
		machine, kill -9) or aborted, from its WorkloadRebalancer: clear the
		abort mark, then run it again exactly as running the same command
		again with --name does - the record tells which workloads were
		triggered, none is triggered twice, bindings an interrupted move left
		suspended are moved again first, and the failures already counted
		stay counted against --max-failures.

		A waved run keeps its workloads and pacing (--max-in-flight,
		--progress-deadline, --max-failures, --pause, --wait-ready, --order,
		--ttl) on its record, so resume needs nothing else; any other record
		is reconciled as it is ('kubectl rebalance workloadrebalancer/NAME').

		Exit codes are those of kubectl rebalance: 0 every workload done, 1
		bad input or the API server could not be used, 2 some workload
		failed, 3 pending (interrupted or aborted again).`)

	resumeExample = templates.Examples(`
		# Continue a run after its process was killed, or after kubectl rebalance abort
		kubectl rebalance resume fleet-after-failover

		# The same, and follow it from another terminal
		kubectl rebalance get fleet-after-failover -w`)
)

var (
	approveLong = templates.LongDesc(`
		Approve the next step of a recorded run paused at an approval gate
		(kubectl rebalance --steps): record on its WorkloadRebalancer that
		the step it waits at is approved, with who and when, so that the
		process running it - on this machine or any other - goes on with
		the next step. The approval stays on the record: when that process
		is gone, 'kubectl rebalance resume NAME' continues past the steps
		approved.

		Who is the user the Karmada apiserver authenticates (a
		SelfSubjectReview), or the kubeconfig's user where the server cannot
		tell. 'kubectl rebalance get NAME' shows the pause and the
		approvals; 'kubectl describe workloadrebalancer NAME' the events
		RebalancePaused and RebalanceApproved.

		Exit codes: 0 the step is approved (or already was); 1 the record
		does not exist, is not paused at a step, or cannot be written.`)

	approveExample = templates.Examples(`
		# Move one workload, look, then approve the rest (two terminals, or two machines)
		kubectl rebalance deployments -n shop --all --name shop-canary --steps 1,100%
		kubectl rebalance approve shop-canary

		# See where a run waits before approving
		kubectl rebalance get shop-canary`)
)

// steerOptions are what abort, approve and resume share: the record and the
// Karmada apiserver.
type steerOptions struct {
	Name        string
	Timeout     time.Duration
	ConfigFlags *genericclioptions.ConfigFlags
	client      appsclient.WorkloadRebalancerInterface
	config      *rest.Config
	guard       *requestGuard
	genericiooptions.IOStreams
}

func (o *steerOptions) complete(cmd *cobra.Command, args []string) error {
	o.Name = args[0]
	o.ConfigFlags = inheritConfigFlags(cmd.Flags())
	if f := cmd.Flags().Lookup("karmada-context"); f != nil && f.Changed {
		*o.ConfigFlags.Context = f.Value.String()
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout must be greater than zero, got %s", o.Timeout)
	}
	config, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return kubeconfigError(o.ConfigFlags, err)
	}
	o.config = o.guard.wrapConfig(rest.CopyConfig(config))
	client, err := karmadaclient.NewForConfig(o.config)
	if err != nil {
		return kubeconfigError(o.ConfigFlags, err)
	}
	o.client = client.AppsV1alpha1().WorkloadRebalancers()
	return nil
}

// get reads the record, or says it does not exist.
func (o *steerOptions) get(ctx context.Context) (*appsv1alpha1.WorkloadRebalancer, error) {
	rb, err := o.client.Get(ctx, o.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && !isUnservedResource(err):
		return nil, fmt.Errorf("workloadrebalancer %s not found; run `kubectl rebalance get` to list them", o.Name)
	case err != nil:
		base := &session{ConfigFlags: o.ConfigFlags, guard: o.guard}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("--timeout %s ran out: the API server at %s (context %q) did not answer in time; check that it is up, or try again with a longer --timeout", o.Timeout, base.serverURL(), base.contextName())
		}
		return nil, base.apiError(&rebalance.RequestError{Verb: "get", Resource: record.RebalancerResource, Name: o.Name, Err: err})
	}
	return rb, nil
}

// patch writes a merge patch made from the record as read, reading it
// again after a conflict.
func (o *steerOptions) patch(ctx context.Context, rb *appsv1alpha1.WorkloadRebalancer, make func(*appsv1alpha1.WorkloadRebalancer) ([]byte, error)) (*appsv1alpha1.WorkloadRebalancer, error) {
	for {
		data, err := make(rb)
		if err != nil {
			return nil, err
		}
		patched, err := o.client.Patch(ctx, o.Name, types.MergePatchType, data, metav1.PatchOptions{})
		if apierrors.IsConflict(err) {
			if rb, err = o.get(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			base := &session{ConfigFlags: o.ConfigFlags, guard: o.guard}
			return nil, base.apiError(&rebalance.RequestError{Verb: "patch", Resource: record.RebalancerResource, Name: o.Name, Err: err})
		}
		return patched, nil
	}
}

// whoAmI names the user: as the API server authenticates it (a
// SelfSubjectReview, Kubernetes 1.28 and later), else the kubeconfig's
// user of the context in use.
func (o *steerOptions) whoAmI(ctx context.Context) string {
	if kube, err := kubernetes.NewForConfig(o.config); err == nil {
		review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err == nil && review.Status.UserInfo.Username != "" {
			return review.Status.UserInfo.Username
		}
	}
	raw, err := o.ConfigFlags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return ""
	}
	name := raw.CurrentContext
	if o.ConfigFlags.Context != nil && *o.ConfigFlags.Context != "" {
		name = *o.ConfigFlags.Context
	}
	if c, ok := raw.Contexts[name]; ok && c.AuthInfo != "" {
		return c.AuthInfo
	}
	if o.ConfigFlags.AuthInfoName != nil {
		return *o.ConfigFlags.AuthInfoName
	}
	return ""
}

func newSteerCmd(o *steerOptions, use, short, long, example string, run func(ctx context.Context) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   use,
		DisableFlagsInUseLine: true,
		Short:                 short,
		Long:                  long,
		Example:               example,
		SilenceUsage:          true,
		SilenceErrors:         true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return withExitCode(ExitError, cmdutil.UsageErrorf(cmd, "name one workloadrebalancer, e.g. `%s`; `kubectl rebalance get` lists them", cmd.CommandPath()+" NAME"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(cmd, args); err != nil {
				return withExitCode(ExitError, err)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return run(ctx)
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withExitCode(ExitError, cmdutil.UsageErrorf(c, "%v", err))
	})
	durationVar(cmd.Flags(), &o.Timeout, "timeout", o.Timeout, "How long to wait for the Karmada apiserver before giving up (exit code 1).")
	return cmd
}

// NewCmdAbort builds `kubectl rebalance abort NAME`.
func NewCmdAbort(streams genericiooptions.IOStreams) *cobra.Command {
	o := &steerOptions{IOStreams: streams, Timeout: defaultGetTimeout, guard: &requestGuard{}}
	return newSteerCmd(o, "abort NAME", "Stop a recorded run from starting further workloads, from any machine", abortLong, abortExample, func(ctx context.Context) error {
		return o.onRecord(ctx, func(ctx context.Context, rb *appsv1alpha1.WorkloadRebalancer) error {
			if mark, ok := record.Aborted(rb); ok {
				fmt.Fprintf(o.ErrOut, "workloadrebalancer %s was already aborted by %s\n", o.Name, mark)
				return nil
			}
			who := o.whoAmI(ctx)
			now := time.Now()
			patched, err := o.patch(ctx, rb, func(rb *appsv1alpha1.WorkloadRebalancer) ([]byte, error) { return record.AbortPatch(rb, who, now) })
			if err != nil {
				return withExitCode(ExitError, err)
			}
			mark, _ := record.Aborted(patched)
			fmt.Fprintf(o.Out, "workloadrebalancer.%s/%s aborted\n", appsv1alpha1.GroupName, o.Name)
			fmt.Fprintf(o.ErrOut, "aborted by %s: the process running it stops starting workloads and lets the moves in flight finish or go; `kubectl rebalance get %s -w` shows it stop, `kubectl rebalance resume %s` continues it\n",
				mark, o.Name, o.Name)
			return nil
		})
	})
}

// NewCmdApprove builds `kubectl rebalance approve NAME`.
func NewCmdApprove(streams genericiooptions.IOStreams) *cobra.Command {
	o := &steerOptions{IOStreams: streams, Timeout: defaultGetTimeout, guard: &requestGuard{}}
	return newSteerCmd(o, "approve NAME", "Let a recorded run paused at a step (--steps) go on, from any machine", approveLong, approveExample, func(ctx context.Context) error {
		return o.onRecord(ctx, func(ctx context.Context, rb *appsv1alpha1.WorkloadRebalancer) error {
			step, paused := record.PausedAt(rb)
			if !paused {
				return withExitCode(ExitError, notPausedError(rb))
			}
			if a, ok := record.Approved(rb, step); ok {
				fmt.Fprintf(o.ErrOut, "workloadrebalancer %s: %s already\n", o.Name, a)
				return nil
			}
			who := o.whoAmI(ctx)
			now := time.Now()
			patched, err := o.patch(ctx, rb, func(rb *appsv1alpha1.WorkloadRebalancer) ([]byte, error) {
				return record.ApprovePatch(rb, step, who, now)
			})
			if err != nil {
				return withExitCode(ExitError, err)
			}
			a, _ := record.Approved(patched, step)
			fmt.Fprintf(o.Out, "workloadrebalancer.%s/%s approved\n", appsv1alpha1.GroupName, o.Name)
			fmt.Fprintf(o.ErrOut, "%s: the process running it goes on with the next step; if it is gone, `kubectl rebalance resume %s` continues; `kubectl rebalance get %s -w` follows it\n",
				a, o.Name, o.Name)
			return nil
		})
	})
}

// onRecord reads the record, within --timeout and until Ctrl-C, and hands
// it to fn (abort and approve).
func (o *steerOptions) onRecord(ctx context.Context, fn func(context.Context, *appsv1alpha1.WorkloadRebalancer) error) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	ctx, cancel := deadlineContext(o.guard.runs(ctx), time.Now().Add(o.Timeout))
	defer cancel()
	rb, err := o.get(ctx)
	if err != nil {
		return withExitCode(ExitError, err)
	}
	return fn(ctx, rb)
}

// notPausedError says why a record has nothing to approve, and what to do.
func notPausedError(rb *appsv1alpha1.WorkloadRebalancer) error {
	opts, _ := record.Options(rb)
	switch {
	case opts.Steps == "":
		return fmt.Errorf("workloadrebalancer %s has no approval gates (its run was not started with --steps), so there is nothing to approve", rb.Name)
	case rb.Status.FinishTime != nil && !record.HasPending(rb.Status):
		return fmt.Errorf("workloadrebalancer %s is not paused: its run is finished", rb.Name)
	}
	return fmt.Errorf("workloadrebalancer %s is not paused at a step now (--steps %s), so there is nothing to approve yet; `kubectl rebalance get %s -w` shows when it pauses", rb.Name, opts.Steps, rb.Name)
}

// NewCmdResume builds `kubectl rebalance resume NAME`.
func NewCmdResume(streams genericiooptions.IOStreams) *cobra.Command {
	o := &steerOptions{IOStreams: streams, Timeout: defaultGetTimeout, guard: &requestGuard{}}
	var (
		output  string
		quiet   bool
		waitTTL bool
		runFor  time.Duration
		cmd     *cobra.Command
	)
	cmd = newSteerCmd(o, "resume NAME", "Continue an interrupted or aborted recorded run from its WorkloadRebalancer", resumeLong, resumeExample, func(ctx context.Context) error {
		readCtx, cancel := deadlineContext(o.guard.runs(ctx), time.Now().Add(o.Timeout))
		defer cancel()
		rb, err := o.get(readCtx)
		if err != nil {
			return withExitCode(ExitError, err)
		}
		if mark, ok := record.Aborted(rb); ok {
			if rb, err = o.patch(readCtx, rb, record.ClearAbortPatch); err != nil {
				return withExitCode(ExitError, err)
			}
			fmt.Fprintf(o.ErrOut, "workloadrebalancer %s: the abort by %s is cleared\n", o.Name, mark)
		}
		cancel()
		args, manifest, err := resumeArgs(rb)
		if err != nil {
			return withExitCode(ExitError, err)
		}
		if manifest != nil {
			// cli-runtime reads -f - from the process's own stdin: the
			// plan goes through a file of its own.
			file, err := os.CreateTemp("", "kubectl-rebalance-resume-*.yaml")
			if err != nil {
				return withExitCode(ExitError, fmt.Errorf("cannot write the plan of workloadrebalancer %s to a temporary file: %w", o.Name, err))
			}
			defer os.Remove(file.Name())
			_, werr := file.Write(manifest)
			if cerr := file.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				return withExitCode(ExitError, fmt.Errorf("cannot write the plan of workloadrebalancer %s to a temporary file: %w", o.Name, werr))
			}
			args = append([]string{"-f", file.Name()}, args...)
		}
		if output != "" {
			args = append(args, "-o", output)
		}
		if quiet {
			args = append(args, "--quiet")
		}
		if !waitTTL {
			args = append(args, "--wait-ttl=false")
		}
		if cmd.Flags().Changed("run-timeout") {
			args = append(args, "--timeout", runFor.String())
		}
		// The run is the one `kubectl rebalance` makes of the same record:
		// one code path for a command run again and for resume.
		root := NewCmdRebalance(o.IOStreams)
		root.SetArgs(append(args, forwardedFlags(cmd)...))
		root.SetContext(ctx)
		_, err = root.ExecuteC()
		return err
	})
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format of the run, as for kubectl rebalance: wide, yaml, json or name. The default is a table.")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "Print no progress and no announcement of a large run on stderr.")
	cmd.Flags().BoolVar(&waitTTL, "wait-ttl", true, "As kubectl rebalance's --wait-ttl: with a ttl, wait for it after the run and delete the record; false returns after the run.")
	durationVar(cmd.Flags(), &runFor, "run-timeout", defaultTimeout, "As kubectl rebalance's --timeout: how long the run may take; a waved run without it is bounded by its --progress-deadline per workload.")
	return cmd
}

// resumeArgs are the arguments of `kubectl rebalance` that run rb again:
// a waved record's plan (every workload, as a manifest of that name, for
// -f) with its pacing, or the record itself.
func resumeArgs(rb *appsv1alpha1.WorkloadRebalancer) ([]string, []byte, error) {
	opts, waved := record.Options(rb)
	if !waved {
		return []string{"workloadrebalancer/" + rb.Name}, nil, nil
	}
	workloads := rb.Spec.Workloads
	if planned, ok := record.Planned(rb); ok {
		workloads = planned
	}
	manifest := &appsv1alpha1.WorkloadRebalancer{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1alpha1.SchemeGroupVersion.String(), Kind: appsv1alpha1.ResourceKindWorkloadRebalancer},
		ObjectMeta: metav1.ObjectMeta{Name: rb.Name},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: workloads, TTLSecondsAfterFinished: rb.Spec.TTLSecondsAfterFinished},
	}
	data, err := yaml.Marshal(manifest)
	if err != nil {
		return nil, nil, err
	}
	args := []string{"--max-in-flight", strconv.Itoa(opts.MaxInFlight),
		"--wait-ready=" + strconv.FormatBool(opts.WaitReady), "--progress-deadline", opts.ProgressDeadline.Duration.String(),
		"--max-failures", strconv.Itoa(opts.MaxFailures), "--pause", opts.Pause.Duration.String()}
	if opts.Order != "" {
		args = append(args, "--order", opts.Order)
	}
	if opts.Steps != "" {
		// The steps count over every workload of the run: those behind
		// the record are passed, those approved on it are not asked again.
		args = append(args, "--steps", opts.Steps)
	}
	if rb.Spec.TTLSecondsAfterFinished == nil && opts.TTL != nil {
		// A growing record gets its ttl once every workload is listed.
		args = append(args, "--ttl", strconv.Itoa(int(*opts.TTL)))
	}
	return args, data, nil
}

// forwardedFlags are the kubeconfig and logging flags given to cmd, as
// arguments for the root command.
func forwardedFlags(cmd *cobra.Command) []string {
	var out []string
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Changed {
			return
		}
		if slice, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range slice.GetSlice() {
				out = append(out, "--"+f.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+f.Name+"="+f.Value.String())
	})
	return out
}
