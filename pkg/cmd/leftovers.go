package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"k8s.io/client-go/rest"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
)

// leftoverScope is where a command looks for bindings that interrupted
// make-before-break moves left suspended: a namespace (every namespace when
// empty), and with all the cluster-scoped bindings too. The daemons look at
// ResourceBindings only, which is all their roles let them move.
type leftoverScope struct {
	namespace string
	all       bool
}

func (s leftoverScope) recoverer(config *rest.Config, owner string, dryRun bool) (*handover.Recoverer, error) {
	client, err := karmadaclient.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	return &handover.Recoverer{Karmada: client, Owner: owner, DryRun: dryRun}, nil
}

// reportLeftovers writes a warning on w for every binding in scope held by
// an unfinished move, with what `kubectl rebalance recover` would do.
func reportLeftovers(ctx context.Context, w io.Writer, config *rest.Config, scope leftoverScope) {
	r, err := scope.recoverer(config, "", false)
	if err != nil {
		return
	}
	found, err := r.Find(ctx, scope.namespace, scope.all)
	if err != nil {
		return // the command's own reads report the server's problems
	}
	for _, lo := range found {
		fmt.Fprintf(w, "warning: %s; `kubectl rebalance recover` recovers it\n", lo)
	}
}

// sweepLeftovers recovers, in the descheduler's scope, the bindings that
// interrupted moves left suspended past their deadline or changed under
// them, and logs each (a dry-run daemon only logs them).
func (o *DescheduleOptions) sweepLeftovers(ctx context.Context, log *slog.Logger) {
	sweepLeftovers(ctx, log, o.restConfig, leftoverScope{namespace: o.Namespace}, o.DryRun != deschedule.DryRunNone)
}

// reportLeftovers warns of the leftovers in the descheduler's scope.
func (o *DescheduleOptions) reportLeftovers(ctx context.Context) {
	reportLeftovers(ctx, o.ErrOut, o.restConfig, leftoverScope{namespace: o.Namespace})
}

// sweepLeftovers is a daemon's recovery of leftovers, once per pass.
func sweepLeftovers(ctx context.Context, log *slog.Logger, config *rest.Config, scope leftoverScope, dryRun bool) {
	// Not the owner name of this process's own moves (a failback daemon
	// moves workloads too): those are waited for like any live owner's.
	r, err := scope.recoverer(config, handover.DefaultOwner()+"/sweep", false)
	if err == nil {
		r.ByDeadline = true
	}
	if err != nil {
		log.Error("cannot look for bindings left suspended by interrupted moves", "err", err)
		return
	}
	var found []handover.Leftover
	if dryRun {
		found, err = r.Find(ctx, scope.namespace, scope.all)
	} else {
		found, err = r.Sweep(ctx, scope.namespace, scope.all)
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("cannot look for bindings left suspended by interrupted moves", "err", err)
		}
		return
	}
	for _, lo := range found {
		attrs := []any{"binding", lo.Namespace + "/" + lo.Name, "phase", string(lo.Decision.Phase), "action", string(lo.Decision.Action), "reason", lo.Decision.Reason}
		switch {
		case lo.Err != nil:
			log.Error("recovering a binding left suspended by an interrupted move failed", append(attrs, "err", lo.Err)...)
		case lo.Recovered:
			log.Info("recovered a binding left suspended by an interrupted move", append(attrs, "message", lo.Decision.Message)...)
		default:
			log.Info("a binding is held by a make-before-break move", append(attrs, "message", lo.Decision.Message)...)
		}
	}
}
