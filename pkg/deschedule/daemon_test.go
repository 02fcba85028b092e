package deschedule

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
)

func quietFixture() *passFixture {
	web := newBinding("default", "web", cluster{"m1", 2, 2})
	return newPassFixture([]*workv1alpha2.ResourceBinding{web}, map[string]*fake.Clientset{"m1": memberCluster()})
}

func TestRunPassesEveryInterval(t *testing.T) {
	f := quietFixture()
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	require.NoError(t, err)
	health := daemon.NewHealth(false)

	ctx, cancel := context.WithCancel(context.Background())
	var passes atomic.Int32
	opts := DaemonOptions{
		Interval: 10 * time.Millisecond,
		Metrics:  metrics,
		Health:   health,
		OnPass: func(r *PassResult, err error) {
			assert.NoError(t, err)
			assert.True(t, health.IsReady(), "ready while passing")
			if passes.Add(1) == 3 {
				cancel()
			}
		},
	}
	require.NoError(t, f.descheduler(t, Options{}).Run(ctx, opts))
	assert.Equal(t, int32(3), passes.Load())
	assert.False(t, health.IsReady(), "not ready once stopped")
	got := gather(t, reg)
	assert.Equal(t, 3.0, got[`kubectl_rebalance_deschedule_passes_total{result="succeeded"}`])
	assert.Equal(t, 0.0, got["kubectl_rebalance_deschedule_leader"])
}

func TestRunFailsFastWithoutAccess(t *testing.T) {
	f := quietFixture()
	f.karmada.PrependReactor("list", "resourcebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	err := f.descheduler(t, Options{Namespace: "shop"}).Run(context.Background(), DaemonOptions{Interval: time.Second})
	assert.EqualError(t, err, "cannot list resourcebindings in namespace shop: forbidden", "the command words the cause (DaemonOptions.Explain)")
	assert.ErrorContains(t, f.descheduler(t, Options{}).Run(context.Background(), DaemonOptions{}), "interval must be positive")
}

// TestRunRetriesAPassingFaultAtStart: a start-up check that meets an error
// the caller calls passing (an apiserver restarting) is tried again, and the
// daemon passes once it answers; a refusal still ends Run.
func TestRunRetriesAPassingFaultAtStart(t *testing.T) {
	fast := daemon.StartupBackoff
	daemon.StartupBackoff.Duration, daemon.StartupBackoff.Cap = time.Millisecond, time.Millisecond
	t.Cleanup(func() { daemon.StartupBackoff = fast })
	restarting := errors.New("the server is currently unable to handle the request")
	retriable := func(err error) bool { return errors.Is(err, restarting) }

	f := quietFixture()
	var lists atomic.Int32
	f.karmada.PrependReactor("list", "resourcebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lists.Add(1) <= 3 {
			return true, nil, restarting
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	var passes []error
	opts := DaemonOptions{Interval: time.Millisecond, Retriable: retriable, OnPass: func(_ *PassResult, err error) {
		passes = append(passes, err)
		cancel()
	}}
	require.NoError(t, f.descheduler(t, Options{}).Run(ctx, opts))
	assert.Equal(t, []error{nil}, passes, "the daemon started and passed")
	assert.GreaterOrEqual(t, lists.Load(), int32(5), "three failed checks, the check that passed, the pass")

	f = quietFixture()
	f.karmada.PrependReactor("list", "resourcebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	err := f.descheduler(t, Options{Namespace: "shop"}).Run(context.Background(), DaemonOptions{Interval: time.Second, Retriable: retriable})
	assert.EqualError(t, err, "cannot list resourcebindings in namespace shop: forbidden")
}

func TestRunKeepsPassingWhenAPassFails(t *testing.T) {
	f := quietFixture()
	var lists atomic.Int32
	f.karmada.PrependReactor("list", "resourcebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lists.Add(1) == 2 { // the first list is the access check
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	var errs []error
	opts := DaemonOptions{Interval: time.Millisecond, OnPass: func(_ *PassResult, err error) {
		errs = append(errs, err)
		if len(errs) == 2 {
			cancel()
		}
	}}
	require.NoError(t, f.descheduler(t, Options{}).Run(ctx, opts))
	require.Len(t, errs, 2)
	assert.ErrorContains(t, errs[0], "request timed out")
	assert.NoError(t, errs[1])
}

// TestRunLeaderElection runs two daemons against one lease: exactly one
// passes at a time, and stopping the leader hands over at once because it
// releases the lease after its last write.
func TestRunLeaderElection(t *testing.T) {
	leases := fake.NewClientset()
	type replica struct {
		name   string
		cancel context.CancelFunc
		done   chan error
		passes atomic.Int32
	}
	var mu sync.Mutex
	active := map[string]bool{}
	start := func(name string) *replica {
		d := &replica{name: name, done: make(chan error, 1)}
		ctx, cancel := context.WithCancel(context.Background())
		d.cancel = cancel
		opts := DaemonOptions{
			Interval: 5 * time.Millisecond,
			LeaderElection: &daemon.LeaderElection{
				Client: leases, Namespace: "karmada-system", Name: DefaultLeaseName, Identity: name,
				LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 50 * time.Millisecond,
			},
			Health: daemon.NewHealth(true),
			OnPass: func(*PassResult, error) {
				mu.Lock()
				active[name] = true
				assert.Len(t, active, 1, "only one daemon passes at a time")
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				delete(active, name)
				mu.Unlock()
				d.passes.Add(1)
			},
		}
		go func() { d.done <- quietFixture().descheduler(t, Options{}).Run(ctx, opts) }()
		return d
	}
	a := start("a")
	require.Eventually(t, func() bool { return a.passes.Load() > 0 }, 5*time.Second, 10*time.Millisecond)
	b := start("b")
	time.Sleep(300 * time.Millisecond)
	assert.Zero(t, b.passes.Load(), "the standby does not pass")

	a.cancel()
	require.NoError(t, <-a.done)
	lease, err := leases.CoordinationV1().Leases("karmada-system").Get(context.Background(), DefaultLeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	// Released: the holder is cleared, or already the standby.
	assert.NotEqual(t, "a", ptr.Deref(lease.Spec.HolderIdentity, ""), "the leader released the lease on its way out")
	require.Eventually(t, func() bool { return b.passes.Load() > 0 }, 5*time.Second, 10*time.Millisecond, "the standby takes over")
	b.cancel()
	require.NoError(t, <-b.done)
}
