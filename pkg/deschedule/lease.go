package deschedule

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
)

// IdentityPrefix starts the holder identity of every kubectl-rebalance
// daemon in the Lease; see daemon.IdentityPrefix.
const IdentityPrefix = daemon.IdentityPrefix

// HolderIdentity is the Lease holder identity of a daemon named id.
func HolderIdentity(id string) string { return daemon.HolderIdentity(id) }

// ForeignLeader is the holder of a Lease that another program, most likely
// karmada-descheduler, holds and keeps renewing.
type ForeignLeader struct {
	Namespace, Name string
	Holder          string
	// RenewTime is the holder's last renewal; the Lease is fresh until
	// RenewTime plus the lease duration.
	RenewTime time.Time
	Duration  time.Duration
}

func (f *ForeignLeader) Error() string {
	return fmt.Sprintf("lease %s/%s is held by %q, which is not a kubectl-rebalance daemon (most likely karmada-descheduler) and renewed it at %s: "+
		"both would evict the same replicas; stop karmada-descheduler first, or pass --force to stand by on the same Lease and take over when it stops",
		f.Namespace, f.Name, f.Holder, f.RenewTime.UTC().Format(time.RFC3339))
}

// FindForeignLeader reads the Lease namespace/name and returns a
// *ForeignLeader when it is held by a program other than kubectl-rebalance
// and still fresh at serverNow, the API server's current time (the
// renewal was written with the holder's clock, so comparing it with the
// server's is as close as a client gets; this process's clock is not used).
// It returns nil when the Lease is missing, free, ours or expired.
func FindForeignLeader(ctx context.Context, client kubernetes.Interface, namespace, name string, serverNow func() (time.Time, bool)) (*ForeignLeader, error) {
	lease, err := client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("cannot read lease %s/%s to check that karmada-descheduler is not running: %w", namespace, name, err)
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder == "" || strings.HasPrefix(holder, IdentityPrefix) || lease.Spec.RenewTime == nil {
		return nil, nil
	}
	duration := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second
	found := &ForeignLeader{Namespace: namespace, Name: name, Holder: holder, RenewTime: lease.Spec.RenewTime.Time, Duration: duration}
	now, ok := serverNow()
	if !ok {
		// Without the server's time the Lease cannot be proven stale.
		return found, nil
	}
	if !now.Before(found.RenewTime.Add(duration)) {
		return nil, nil
	}
	return found, nil
}
