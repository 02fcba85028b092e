package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// signalContext ends ctx on the first SIGINT or SIGTERM. The command then
// recovers what it has in flight (a make-before-break move is undone or let
// go, within its undo timeout) and returns: a second Ctrl-C must not cut
// that recovery short and leave a binding suspended, so later signals only
// say what is going on (signalNotice); SIGKILL still ends the process, and
// `kubectl rebalance recover` finds what it leaves. stop gives the signals
// their default behaviour back.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-signals:
			cancel()
		case <-done:
			return
		}
		for {
			select {
			case <-signals:
				fmt.Fprintln(signalNotice, "still recovering what was in flight (at most a few seconds); SIGKILL leaves it to `kubectl rebalance recover`")
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			signal.Stop(signals)
			close(done)
			cancel()
		})
	}
	return ctx, stop
}

// signalNotice is where signalContext answers the signals after the first.
var signalNotice io.Writer = os.Stderr

// startup does what comes before the first binding is read: discovery, the
// check that the server is a Karmada control plane, and resolving the
// arguments and files into workloads. Its requests are bounded by --timeout
// and Ctrl-C, and those that meet a passing fault (500, 503, 429, a reset
// connection) are tried again.
func (o *targetOptions) startup(ctx context.Context) (meta.RESTMapper, *rebalance.Resolved, error) {
	// Local input is judged first: its mistakes are the user's to fix
	// whether or not a server answers.
	if err := o.judgeLocalInput(); err != nil {
		return nil, nil, withExitCode(ExitError, o.rebalancerKindError(err))
	}
	startCtx, cancel := deadlineContext(ctx, o.deadline)
	defer cancel()
	defer o.guard.bind(o.guard.bind(startCtx))

	mapper, err := o.factory.ToRESTMapper()
	if err != nil {
		return nil, nil, o.startupError(ctx, startCtx, withExitCode(ExitError, o.apiError(err)))
	}
	if err := o.mapKind(startCtx, mapper, bindingGroupKind, "v1alpha2"); err != nil {
		if meta.IsNoMatchError(err) {
			err = fmt.Errorf("the cluster behind context %q (%s) is not a Karmada control plane: resourcebindings.work.karmada.io is not served; "+
				"point --karmada-context or --kubeconfig at the Karmada apiserver", o.contextName(), o.serverURL())
			return nil, nil, withExitCode(ExitError, err)
		}
		return nil, nil, o.startupError(ctx, startCtx, withExitCode(ExitError, o.apiError(err)))
	}
	if o.mapped != nil {
		o.mapped(mapper)
	}

	var resolved *rebalance.Resolved
	resolve := func() error {
		var err error
		resolved, err = o.resolve(mapper)
		return err
	}
	// Standard input was read once, by judgeLocalInput: every attempt
	// resolves what it read.
	if err := retryTransient(startCtx, startupBackoff, resolve); err != nil {
		return nil, nil, o.startupError(ctx, startCtx, withExitCode(ExitError, o.rebalancerKindError(o.inputError(err))))
	}
	if len(resolved.Targets) == 0 && len(resolved.Rebalancers) == 0 && !emptySelectionAllowed(o) {
		return nil, nil, withExitCode(ExitError, fmt.Errorf("%s holds no object: give a manifest of a workload, a List of them or a WorkloadRebalancer; nothing was done",
			o.inputNames()))
	}
	return mapper, resolved, nil
}

// emptySelectionAllowed reports whether selecting nothing is an answer
// rather than a mistake: a label selector or --all may match nothing, as in
// kubectl get, but a file or standard input with no object is an error.
func emptySelectionAllowed(o *targetOptions) bool {
	return len(o.Filenames) == 0 && o.Kustomize == ""
}

// inputNames names the files given with -f or -k, for messages.
func (o *targetOptions) inputNames() string {
	var names []string
	for _, f := range o.Filenames {
		if f == "-" {
			names = append(names, "standard input")
		} else {
			names = append(names, f)
		}
	}
	if o.Kustomize != "" {
		names = append(names, "the kustomization in "+o.Kustomize)
	}
	return strings.Join(names, ", ")
}

// mapKind makes sure the API server serves gk at version, reading discovery
// again after a passing fault. A kind missing from discovery is checked with
// a direct read of its group version: a group whose discovery failed must
// not pass for a group that is not served. It returns a no-match error only
// when the group version is really not served.
func (o *session) mapKind(ctx context.Context, mapper meta.RESTMapper, gk schema.GroupKind, version string) error {
	defer o.guard.bind(o.guard.bind(ctx))
	return retryTransient(ctx, startupBackoff, func() error {
		_, err := mapper.RESTMapping(gk, version)
		if err == nil || !meta.IsNoMatchError(err) {
			if err != nil {
				meta.MaybeResetRESTMapper(mapper)
			}
			return err
		}
		discovery, derr := o.factory.ToDiscoveryClient()
		if derr != nil {
			return err
		}
		if _, derr := discovery.ServerResourcesForGroupVersion(schema.GroupVersion{Group: gk.Group, Version: version}.String()); derr != nil {
			if isTransient(derr) {
				return derr
			}
			return err
		}
		// Served after all: read discovery again.
		meta.MaybeResetRESTMapper(mapper)
		_, err = mapper.RESTMapping(gk, version)
		return err
	})
}

// startupError turns an error of the start-up into the interruption or the
// timeout that caused it, when one did: nothing was written then.
func (o *session) startupError(ctx, startCtx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return withExitCode(ExitPending, errors.New("interrupted before any binding was read; nothing was written"))
	case startCtx.Err() != nil:
		return withExitCode(ExitPending, fmt.Errorf("--timeout %s ran out before any binding was read: the API server at %s (context %q) did not answer %s in time; nothing was written, run the command again with a longer --timeout",
			o.Timeout, o.serverURL(), o.contextName(), describeRequest(o.guard.lastFailed())))
	}
	return err
}

// interruptedSummary says, after Ctrl-C, what was and was not written.
func interruptedSummary(result *rebalance.Result, dryRun rebalance.DryRun) string {
	notTriggered := 0
	for _, row := range result.Rows {
		if row.Result == "" {
			notTriggered++
		}
	}
	if dryRun != rebalance.DryRunNone {
		return fmt.Sprintf("interrupted: a dry run, nothing was written; %d workload(s) were not looked at", notTriggered)
	}
	return fmt.Sprintf("interrupted: %d trigger(s) written, %d workload(s) not triggered (pending); run the command again to finish them, a binding that already holds its trigger is not triggered twice",
		result.Written, notTriggered)
}

// flattenErrors lists the errors inside an aggregate, or err itself.
func flattenErrors(err error) []error {
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		return utilerrors.Flatten(agg).Errors()
	}
	return []error{err}
}
