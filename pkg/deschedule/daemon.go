package deschedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Leader election defaults, the same as karmada-descheduler's, Lease
// included: sharing its Lease means that this daemon and karmada-descheduler
// are never active at the same time, whichever starts first.
const (
	DefaultLeaseNamespace = "karmada-system"
	DefaultLeaseName      = "karmada-descheduler"
	DefaultLeaseDuration  = 15 * time.Second
	DefaultRenewDeadline  = 10 * time.Second
	DefaultRetryPeriod    = 2 * time.Second
)

// LeaderElection configures the Lease that lets several daemons run with
// exactly one of them passing.
type LeaderElection struct {
	// Client reaches the API server holding the Lease (the Karmada apiserver).
	Client kubernetes.Interface
	// Namespace and Name locate the Lease.
	Namespace, Name string
	// Identity names this process in the Lease; it must be unique.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod tune the election as in
	// every Kubernetes component; zero values take the defaults above.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DaemonOptions configure Descheduler.Run.
type DaemonOptions struct {
	// Interval is the wait between the end of one pass and the start of the
	// next; it must be positive.
	Interval time.Duration
	// LeaderElection, when not nil, makes the daemon pass only while it
	// holds the Lease.
	LeaderElection *LeaderElection
	// Metrics records every pass; nil records nothing.
	Metrics *Metrics
	// Health is told about readiness and leadership; nil is allowed.
	Health *Health
	// Logger receives the daemon's structured logs; nil discards them.
	Logger *slog.Logger
	// OnPass is called after every pass with its result or error.
	OnPass func(*PassResult, error)
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
	if err := d.checkAccess(ctx); err != nil {
		return err
	}
	opts.Health.setReady(true)
	defer opts.Health.setReady(false)

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
// RBAC stops the daemon at start instead of failing every pass.
func (d *Descheduler) checkAccess(ctx context.Context) error {
	_, err := d.karmada.WorkV1alpha2().ResourceBindings(d.opts.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("cannot list resourcebindings in %s, check the Karmada kubeconfig and your RBAC: %w", d.scopeWords(), err)
	}
	return nil
}

// loop passes at once and then Interval after each pass ends, until ctx
// ends.
func (d *Descheduler) loop(ctx context.Context, opts DaemonOptions) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
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

// runElected campaigns for the Lease and passes while holding it.
func (d *Descheduler) runElected(ctx context.Context, opts DaemonOptions) error {
	le := opts.LeaderElection
	if le.Client == nil || le.Namespace == "" || le.Name == "" || le.Identity == "" {
		return errors.New("leader election needs a client, a lease namespace, a lease name and an identity")
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     le.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	log := opts.Logger.With("lease", le.Namespace+"/"+le.Name, "identity", le.Identity)

	// The election outlives ctx: it ends only once the last write is done,
	// and then releases the Lease.
	electionCtx, endElection := context.WithCancel(context.WithoutCancel(ctx))
	defer endElection()

	for ctx.Err() == nil {
		leading := make(chan context.Context, 1)
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   orDefault(le.LeaseDuration, DefaultLeaseDuration),
			RenewDeadline:   orDefault(le.RenewDeadline, DefaultRenewDeadline),
			RetryPeriod:     orDefault(le.RetryPeriod, DefaultRetryPeriod),
			ReleaseOnCancel: true,
			Name:            le.Name,
			WatchDog:        opts.Health.watchdog(),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(leCtx context.Context) { leading <- leCtx },
				OnStoppedLeading: func() {},
				OnNewLeader: func(identity string) {
					if identity != le.Identity {
						log.Info("standing by", "leader", identity)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("invalid leader election settings, check the --leader-elect-* flags: %w", err)
		}
		electionDone := make(chan struct{})
		log.Info("waiting to lead")
		go func() {
			defer close(electionDone)
			elector.Run(electionCtx)
		}()

		select {
		case <-ctx.Done():
			endElection()
			<-electionDone
		case <-electionDone:
			// Run returns without leading only when the election ends.
		case leCtx := <-leading:
			log.Info("leading, descheduling", "interval", opts.Interval.String())
			opts.Metrics.SetLeader(true)
			opts.Health.setLeading(true)
			passCtx, stopPasses := context.WithCancel(leCtx)
			unlink := context.AfterFunc(ctx, stopPasses)
			d.loop(passCtx, opts)
			unlink()
			stopPasses()
			opts.Metrics.SetLeader(false)
			opts.Health.setLeading(false)
			if ctx.Err() != nil {
				// The last write is done: now give the Lease up.
				endElection()
				<-electionDone
				log.Info("released the lease")
				break
			}
			<-electionDone
			log.Warn("lost the lease, stopped descheduling")
		}
	}
	log.Info("stopped")
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
