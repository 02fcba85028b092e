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
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
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
		name        string
		loseLease   bool
		clusterDown bool
		want        string
	}{
		{name: "daemon stopping", want: "the daemon is stopping"},
		{name: "lease lost", loseLease: true, want: "this daemon lost the Lease"},
		{name: "cluster fails again", clusterDown: true, want: "cluster member1 failed again (tainted fail:NoExecute)"},
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

			if tc.clusterDown {
				// The cluster the waves target fails during its failback:
				// they stop, and the daemon goes on watching.
				down := recoveredCluster("member1")
				down.Spec.Taints = []corev1.Taint{{Key: "fail", Effect: corev1.TaintEffectNoExecute}}
				_, err := client.ClusterV1alpha1().Clusters().Update(context.Background(), down, metav1.UpdateOptions{})
				require.NoError(t, err)
				require.Eventually(t, func() bool { return len(events.with(ReasonStopped)) > 0 }, time.Minute, 10*time.Millisecond)
			}
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

// TestFinishResumed reports a resumed failback: the workload the run it
// resumes had triggered is neither counted as done by this run nor given a
// FailbackTriggered event again.
func TestFinishResumed(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	require.NoError(t, err)
	events := &eventLog{}
	c := New(karmadafake.NewSimpleClientset(), nil, Options{Events: events, Metrics: metrics})
	cluster := recoveredCluster("member1")
	req := Request{Cluster: "member1", Key: "k", Name: RecordName("member1", "k"), Resume: true}
	deploy := func(name string) rebalance.Workload {
		return rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: name}
	}
	at := &metav1.Time{Time: time.Now()}
	placed := []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 1}}
	report := &Report{Rows: []rebalance.Row{
		{Workload: deploy("a"), Result: appsv1alpha1.RebalanceSuccessful, Message: "recorded by an earlier pass"},
		{Workload: deploy("b"), Result: appsv1alpha1.RebalanceSuccessful, TriggeredAt: at, After: placed,
			Observation: rebalance.Observation{Outcome: rebalance.OutcomeScheduled}},
		{Workload: deploy("c"), Result: appsv1alpha1.RebalanceSuccessful, TriggeredAt: at, After: placed,
			Observation: rebalance.Observation{Outcome: rebalance.OutcomeScheduled}},
	}}
	c.finish(cluster, &activeRun{key: "k", done: make(chan struct{})}, req, report, nil)

	assert.Equal(t, []string{"Normal FailbackFinished Failback to cluster member1 finished: 2 workload(s) rebalanced " +
		"(1 more triggered before this failback was resumed), recorded as workloadrebalancer failback-member1-k"}, events.with(ReasonFinished))
	assert.Len(t, events.with(ReasonTriggered), 2, "b and c, not a again")
	families, err := reg.Gather()
	require.NoError(t, err)
	var failedBack []float64
	for _, f := range families {
		if f.GetName() == "kubectl_rebalance_failback_workloads_failed_back_total" {
			for _, m := range f.GetMetric() {
				failedBack = append(failedBack, m.GetCounter().GetValue())
			}
		}
	}
	assert.Equal(t, []float64{2}, failedBack)
}

// TestTaintToleratedDuringItsFailback: member1 keeps a NoSchedule taint
// the displaced workload tolerates. Once the failback starts and Karmada
// places the workload back (it is no longer displaced), the taint still
// does not count as a failure; a taint nobody tolerates does, and after
// that failure the kept tolerations are gone.
func TestTaintToleratedDuringItsFailback(t *testing.T) {
	down1 := func(c string, _ []corev1.Toleration) bool { return c == "member1" }
	dedicated := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	tolerant := func(clusters map[string]int32, evictedFrom ...string) *workv1alpha2.ResourceBinding {
		rb := binding("tolerant", clusters, evictedFrom...)
		rb.Spec.Placement = &policyv1alpha1.Placement{ClusterTolerations: []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}}
		return rb
	}
	cluster := recoveredCluster("member1")
	cluster.Spec.Taints = []corev1.Taint{dedicated}

	c := New(karmadafake.NewSimpleClientset(), nil, Options{})
	evicting := tolerant(map[string]int32{"member2": 3}, "member1")
	c.displaced.Observe(nil, evicting, down1)
	evicted := tolerant(map[string]int32{"member2": 3})
	c.displaced.Observe(evicting, evicted, down1)
	require.True(t, c.observe(cluster).Healthy, "the displaced workload tolerates the taint")

	c.keepTolerations("member1") // the failback starts
	c.keepTolerations("member1") // a follow-up of the same healthy spell
	assert.Len(t, c.kept["member1"], 1, "each toleration is kept once")
	c.displaced.Observe(evicted, tolerant(map[string]int32{"member1": 2, "member2": 1}), down1)
	ready, _ := c.displaced.Of("member1")
	require.Empty(t, ready, "back on member1")
	assert.True(t, c.observe(cluster).Healthy, "the taint it tolerates is no failure during its failback")

	cluster.Spec.Taints = append(cluster.Spec.Taints, corev1.Taint{Key: "fail", Effect: corev1.TaintEffectNoExecute})
	h := c.observe(cluster)
	assert.False(t, h.Healthy)
	assert.Equal(t, "tainted fail:NoExecute", h.Reason)
}
