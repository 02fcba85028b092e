package failback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// blockingRunner is a failback that triggered its first workload and waits
// for it until its context ends, as the waves do with a workload in flight.
type blockingRunner struct {
	started chan Request
}

func (r *blockingRunner) Failback(ctx context.Context, req Request) (*Report, error) {
	r.started <- req
	<-ctx.Done()
	return &Report{
		Rows: []rebalance.Row{
			{Workload: rebalance.Workload{Kind: "Deployment", Namespace: "ns", Name: "a"}, Result: appsv1alpha1.RebalanceSuccessful,
				TriggeredAt: &metav1.Time{Time: time.Now()}, Observation: rebalance.Observation{Outcome: rebalance.OutcomeWaiting}},
			{Workload: rebalance.Workload{Kind: "Deployment", Namespace: "ns", Name: "b"}},
		},
		Stopped: "interrupted; no further workload was started",
	}, nil
}

// eventLog records the events written, as "type reason message".
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) WriteEvent(_ context.Context, _ runtime.Object, eventType, reason, message string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s %s %s", eventType, reason, message))
	return nil
}

func (l *eventLog) with(reason string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if _, rest, ok := cutWord(e); ok {
			if r, _, _ := cutWord(rest); r == reason {
				out = append(out, e)
			}
		}
	}
	return out
}

func cutWord(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// recoveredCluster is a cluster whose Ready condition just turned True: a
// daemon that starts now sees a recovery whose window is about to end.
func recoveredCluster(name string) *clusterv1alpha1.Cluster {
	return &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{
			Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue, Reason: "ClusterReady",
			LastTransitionTime: metav1.Now(),
		}}},
	}
}

// TestControllerStopReason stops a failback that has a workload in flight:
// it is reported as stopped on the Cluster, with the reason it was stopped
// for: the daemon stopping (SIGTERM, SIGINT: the context of Run ends) or
// the Lease taken by another replica (the daemon goes on, standing by).
func TestControllerStopReason(t *testing.T) {
	for _, tc := range []struct {
		name      string
		loseLease bool
		want      string
	}{
		{name: "daemon stopping", want: "the daemon is stopping"},
		{name: "lease lost", loseLease: true, want: "this daemon lost the Lease"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := karmadafake.NewSimpleClientset(recoveredCluster("member1"))
			runner := &blockingRunner{started: make(chan Request, 1)}
			events := &eventLog{}
			c := New(client, runner, Options{Window: time.Second, Events: events})
			leases := kubefake.NewSimpleClientset()
			var refuse atomic.Bool
			leases.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				if refuse.Load() {
					return true, nil, errors.New("the lease was taken over")
				}
				return false, nil, nil
			})
			le := &daemon.LeaderElection{Client: leases, Namespace: "karmada-system", Name: "failback", Identity: "me",
				LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}

			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx, le, daemon.NewHealth(true)) }()
			var req Request
			select {
			case req = <-runner.started:
			case <-time.After(time.Minute):
				require.FailNow(t, "the failback never started")
			}
			assert.Equal(t, RecordName("member1", req.Key), req.Name)

			if tc.loseLease {
				// The Lease cannot be renewed any more (the apiserver
				// refuses, another replica took it): this one stops leading.
				refuse.Store(true)
				require.Eventually(t, func() bool { return len(events.with(ReasonStopped)) > 0 }, time.Minute, 10*time.Millisecond)
			}
			stop()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(time.Minute):
				require.FailNow(t, "the controller did not return")
			}
			stopped := events.with(ReasonStopped)
			require.Len(t, stopped, 1, "events: %v", events.events)
			assert.Equal(t, "Warning FailbackStopped Failback to cluster member1 stopped: "+tc.want+
				"; 0 workload(s) done, 0 failed, 2 pending in workloadrebalancer "+req.Name, stopped[0])
		})
	}
}
