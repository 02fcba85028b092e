package deschedule

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
)

// Leader election defaults, the same as karmada-descheduler's, Lease
// included: sharing its Lease means that this daemon and karmada-descheduler
// are never active at the same time, whichever starts first.
const (
	DefaultLeaseNamespace = "karmada-system"
	DefaultLeaseName      = "karmada-descheduler"
)

// DaemonOptions configure Descheduler.Run.
type DaemonOptions struct {
	// Interval is the wait between the end of one pass and the start of the
	// next; it must be positive.
	Interval time.Duration
	// LeaderElection, when not nil, makes the daemon pass only while it
	// holds the Lease.
	LeaderElection *daemon.LeaderElection
	// Metrics records every pass; nil records nothing.
	Metrics *Metrics
	// Health is told about readiness and leadership; nil is allowed.
	Health *daemon.Health
	// Logger receives the daemon's structured logs; nil discards them.
	Logger *slog.Logger
	// OnPass is called after every pass with its result or error.
	OnPass func(*PassResult, error)
	// BeforePass, when set, runs before every pass, while the daemon leads:
	// the plugin's daemons recover there what interrupted make-before-break
	// moves left suspended (package handover).
	BeforePass func(ctx context.Context)
	// Retriable accepts the errors of the start-up check that a later
	// attempt may not meet (a 500, an apiserver restarting, a request timing
	// out): the check is then retried until it passes or ctx ends, so that
	// a passing fault does not end the daemon. Nil retries nothing.
	Retriable func(error) bool
	// Explain words an error of the Karmada apiserver (refused, forbidden,
	// unreachable) for the logs and the caller, the same way the command
	// explains them everywhere; nil leaves errors as they are.
	Explain func(error) error
}

// Run is the daemon: it checks that the Karmada apiserver answers, then runs
// a pass at once and another one every Interval, until ctx ends. With leader
// election it first waits for the Lease, passes only while holding it, and
// goes back to waiting when it loses it.
//
// A stop request (ctx ending) lets the write in progress finish, writes
// nothing more, and, with leader election, releases the Lease only after the
// last write, so that the next leader never overlaps with this one. Run then
// returns nil. It returns an error only when it cannot start.
func (d *Descheduler) Run(ctx context.Context, opts DaemonOptions) error {
	if opts.Interval <= 0 {
		return fmt.Errorf("the descheduling interval must be positive, got %s", opts.Interval)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := d.checkAccess(ctx, opts); err != nil {
		return err
	}
	opts.Health.SetReady(true)
	defer opts.Health.SetReady(false)

	if opts.LeaderElection == nil {
		opts.Logger.Info("descheduling without leader election", "interval", opts.Interval.String())
		opts.Metrics.SetLeader(true)
		defer opts.Metrics.SetLeader(false)
		d.loop(ctx, opts)
		opts.Logger.Info("stopped")
		return nil
	}
	return d.runElected(ctx, opts)
}

// checkAccess makes one cheap request, so that a wrong kubeconfig or missing
// RBAC stops the daemon at start instead of failing every pass; a passing
// fault is retried (opts.Retriable), logged in opts.Explain's words.
func (d *Descheduler) checkAccess(ctx context.Context, opts DaemonOptions) error {
	err := daemon.RetryStartup(ctx, opts.Logger, "listing resourcebindings", opts.Retriable, func() error {
		_, err := d.karmada.WorkV1alpha2().ResourceBindings(d.opts.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		err = fmt.Errorf("cannot list resourcebindings in %s: %w", d.scopeWords(), err)
		if opts.Explain != nil {
			err = opts.Explain(err)
		}
		return err
	})
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// loop passes at once and then Interval after each pass ends, until ctx
// ends.
func (d *Descheduler) loop(ctx context.Context, opts DaemonOptions) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if opts.BeforePass != nil {
			opts.BeforePass(ctx)
		}
		result, err := d.Pass(ctx)
		if result != nil {
			// A stopped pass is still a pass: report what it did.
			opts.Metrics.ObservePass(result, nil)
		} else if ctx.Err() == nil {
			opts.Metrics.ObservePass(nil, err)
		}
		if opts.OnPass != nil && (result != nil || ctx.Err() == nil) {
			opts.OnPass(result, err)
		}
	}, opts.Interval)
}

// runElected passes while holding the Lease.
func (d *Descheduler) runElected(ctx context.Context, opts DaemonOptions) error {
	return daemon.Lead(ctx, opts.LeaderElection, opts.Health, opts.Logger, opts.Metrics.SetLeader, func(ctx context.Context) {
		opts.Logger.Info("descheduling", "interval", opts.Interval.String())
		d.loop(ctx, opts)
	})
}
