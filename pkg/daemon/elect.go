package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Leader election timing, the same as every Kubernetes component's.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// IdentityPrefix starts the holder identity of every kubectl-rebalance
// daemon in a Lease, which tells them apart from other programs (such as
// karmada-descheduler, which names itself host_uuid) sharing it.
const IdentityPrefix = "kubectl-rebalance/"

// HolderIdentity is the Lease holder identity of a daemon named id.
func HolderIdentity(id string) string {
	if strings.HasPrefix(id, IdentityPrefix) {
		return id
	}
	return IdentityPrefix + id
}

// LeaderElection configures the Lease that lets several replicas of a daemon
// run with exactly one of them working.
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

// Lead campaigns for the Lease and calls work while holding it, with a
// context that ends when the Lease is lost or ctx ends. It goes back to
// campaigning when the Lease is lost, and returns nil once ctx has ended.
//
// The election outlives ctx: when ctx ends, Lead waits for work to return
// (its last write done) and only then releases the Lease, so that the next
// leader never overlaps with this one. The wait for the election's end and
// the release take no longer than what is left of the shutdown budget of
// ctx's run (Shutdown): past it the Lease is left to expire. onLeading, when
// not nil, is told when leading starts and stops.
func Lead(ctx context.Context, le *LeaderElection, health *Health, log *slog.Logger, onLeading func(bool), work func(context.Context)) error {
	if le == nil || le.Client == nil || le.Namespace == "" || le.Name == "" || le.Identity == "" {
		return errors.New("leader election needs a client, a lease namespace, a lease name and an identity")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if onLeading == nil {
		onLeading = func(bool) {}
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     le.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	log = log.With("lease", le.Namespace+"/"+le.Name, "identity", le.Identity)

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
			WatchDog:        health.Watchdog(),
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
			// A request of the election stuck on a hanging server is not
			// waited for past the shutdown budget.
			shutdown := Shutdown(ctx)
			select {
			case <-electionDone:
			case <-shutdown.Done():
			}
			select {
			case <-leading:
				// It won the Lease just as the stop came: give it up and
				// say so, as a leader does.
				releaseWithin(shutdown, electionDone, lock, le, log)
			default:
			}
		case <-electionDone:
			// Run returns without leading only when the election ends.
		case leCtx := <-leading:
			log.Info("leading")
			onLeading(true)
			health.SetLeading(true)
			workCtx, stopWork := context.WithCancel(leCtx)
			unlink := context.AfterFunc(ctx, stopWork)
			work(workCtx)
			unlink()
			stopWork()
			onLeading(false)
			health.SetLeading(false)
			if ctx.Err() != nil {
				// The last write is done: now give the Lease up, within
				// what is left of the shutdown budget.
				endElection()
				releaseWithin(Shutdown(ctx), electionDone, lock, le, log)
				break
			}
			<-electionDone
			log.Warn("lost the lease, stopped working")
		}
	}
	log.Info("stopped")
	return nil
}

// releaseWithin gives the Lease up once client-go's election has ended
// (electionDone), both within shutdown. Past it, the Lease is left to expire,
// and the log says so: a standby waits out the lease duration, which the
// daemon's prompt exit on a hanging server is worth.
func releaseWithin(shutdown context.Context, electionDone <-chan struct{}, lock *resourcelock.LeaseLock, le *LeaderElection, log *slog.Logger) {
	select {
	case <-electionDone:
		if releaseLease(shutdown, lock, le, log) {
			log.Info("released the lease")
		}
	case <-shutdown.Done():
		log.Warn("did not release the lease: the API server did not answer within the shutdown budget; a standby takes over once the lease expires",
			"budget", ShutdownBudget.String(), "leaseDuration", orDefault(le.LeaseDuration, DefaultLeaseDuration).String())
	}
}

// releaseLease makes sure the Lease is given up once the election has ended:
// client-go tries once, and a fault on that one request (a 500, a lost
// answer, a timeout) left the Lease held until it expired, so a standby
// waited the whole lease duration instead of taking over at once. It reads
// the Lease and, while it still names this process, writes it free as
// client-go does, retrying until ctx (the shutdown budget) ends. It reports
// whether the Lease is known to be free or held by another.
func releaseLease(ctx context.Context, lock *resourcelock.LeaseLock, le *LeaderElection, log *slog.Logger) bool {
	var last error
	err := wait.PollUntilContextCancel(ctx, releaseRetry, true, func(ctx context.Context) (bool, error) {
		record, _, err := lock.Get(ctx)
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			last = err
			return false, nil
		case record.HolderIdentity != le.Identity:
			return true, nil // released, by client-go or an earlier attempt, or taken over
		}
		now := metav1.NewTime(time.Now())
		if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaderTransitions: record.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
		}); err != nil {
			last = err
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		log.Warn("could not release the lease, a standby takes over once it expires", "err", last,
			"budget", ShutdownBudget.String(), "leaseDuration", orDefault(le.LeaseDuration, DefaultLeaseDuration).String())
		return false
	}
	return true
}

// releaseRetry paces releaseLease's attempts.
var releaseRetry = 500 * time.Millisecond

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
