package cmd

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
)

// runEventComponent is the source of the events of the recorded runs
// kubectl rebalance starts (the failback daemon's runs carry its own).
const runEventComponent = "kubectl-rebalance"

// runEventFlushTimeout bounds the wait for a recorded run's last events
// when the run ended by itself; after Ctrl-C the shutdown budget (about a
// second) bounds it instead.
const runEventFlushTimeout = 5 * time.Second

// runEvents starts the recorder of a recorded run's events. Its client's
// requests outlive the run on purpose: the events of a run cut short by
// Ctrl-C still go out, within the shutdown budget.
func (o *session) runEvents() (*daemon.EventRecorder, error) {
	config, err := o.ConfigFlags.ToRawKubeConfigLoader().ClientConfig()
	if err != nil {
		return nil, o.kubeconfigError(err)
	}
	config = rest.CopyConfig(config)
	config.QPS, config.Burst = o.QPS, o.Burst
	kube, err := kubernetes.NewForConfig(o.guard.wrapConfigOutlivingRun(config))
	if err != nil {
		return nil, o.kubeconfigError(err)
	}
	// The host is left out: a person's machine has no business in the
	// control plane's events.
	return daemon.NewEventRecorder(kube, runEventComponent, ""), nil
}

// flushRunEvents waits for a recorded run's events to be written and stops
// their recorder; it says on stderr when some could not be.
func (o *session) flushRunEvents(ctx context.Context, events *daemon.EventRecorder, result *run.Result) {
	flushCtx, cancel := context.WithTimeout(daemon.Shutdown(ctx), runEventFlushTimeout)
	defer cancel()
	flushErr := events.Flush(flushCtx)
	events.Shutdown()
	name := "of the run"
	if result != nil && result.Record != nil {
		name = result.Record.Name
	}
	switch err := events.Err(); {
	case err != nil:
		fmt.Fprintf(o.ErrOut, "warning: the events of workloadrebalancer %s were not recorded (%v), so `kubectl describe workloadrebalancer %s` does not show its history: "+
			"grant create and patch on events (deploy/rbac/kubectl-rebalance-optional.yaml); the record's status is complete\n", name, err, name)
	case flushErr != nil:
		fmt.Fprintf(o.ErrOut, "warning: some events of workloadrebalancer %s may not have been recorded: %v\n", name, flushErr)
	}
}
