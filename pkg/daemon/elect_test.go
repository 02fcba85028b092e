package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// TestLeadReleasesTheLeaseDespiteAFault: when the one release client-go
// makes on a stop meets a fault, the Lease is still given up (a standby
// takes over at once, not when it expires), and the log says so only then.
func TestLeadReleasesTheLeaseDespiteAFault(t *testing.T) {
	fast := releaseRetry
	releaseRetry = 10 * time.Millisecond
	t.Cleanup(func() { releaseRetry = fast })
	tests := []struct {
		name         string
		failures     int32
		wantReleased bool
	}{
		{"the first release fails", 1, true},
		{"every release fails", 1 << 20, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			var stopping atomic.Bool
			var failed atomic.Int32
			client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				if stopping.Load() && failed.Add(1) <= tt.failures {
					return true, nil, apierrors.NewInternalError(errors.New("injected"))
				}
				return false, nil, nil
			})
			var logs bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			le := &LeaderElection{Client: client, Namespace: "karmada-system", Name: "lease", Identity: "kubectl-rebalance/a",
				LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond}
			err := Lead(ctx, le, nil, slog.New(slog.NewTextHandler(&logs, nil)), nil, func(context.Context) {
				stopping.Store(true)
				cancel()
			})
			require.NoError(t, err)
			lease, err := client.CoordinationV1().Leases("karmada-system").Get(context.Background(), "lease", metav1.GetOptions{})
			require.NoError(t, err)
			assert.GreaterOrEqual(t, failed.Load(), int32(1), "a release failed")
			if tt.wantReleased {
				assert.Empty(t, ptr.Deref(lease.Spec.HolderIdentity, ""), "the Lease is free")
				assert.Contains(t, logs.String(), "released the lease")
				return
			}
			assert.Equal(t, "kubectl-rebalance/a", ptr.Deref(lease.Spec.HolderIdentity, ""))
			assert.NotContains(t, logs.String(), "released the lease")
			assert.Contains(t, logs.String(), "could not release the lease, a standby takes over once it expires")
		})
	}
}
