package failback

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
)

// TestSnapshotPublishedAndReadBack builds the leader's view of three
// clusters (one in its window, one failing back, one down with displaced
// workloads), publishes it in a ConfigMap (created, then patched) and reads
// it back as `failback status` does.
func TestSnapshotPublishedAndReadBack(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := New(karmadafake.NewSimpleClientset(), nil, Options{Window: 5 * time.Minute, Cooldown: 30 * time.Minute, Clusters: []string{"member1", "member2"}, Identity: "kubectl-rebalance/pod-a"})
	c.states["member1"] = State{Phase: PhaseStabilizing, Since: now.Add(-2 * time.Minute), Key: "k1", Window: 5 * time.Minute}
	c.states["member2"] = State{Phase: PhaseFailingBack, Since: now, Key: "k2", LastKey: "k2", LastFailback: now}
	c.runs["member2"] = &activeRun{key: "k2", record: RecordName("member2", "k2")}
	c.states["member3"] = State{Phase: PhaseDown, Since: now, Reason: "Ready is False (ClusterNotReachable)"}
	down3 := func(cluster string, _ []corev1.Toleration) bool { return cluster == "member3" }
	c.displaced.Observe(nil, binding("web", map[string]int32{"member1": 2}, "member3"), down3)
	old := binding("api", map[string]int32{"member3": 2})
	c.displaced.Observe(old, binding("api", map[string]int32{"member1": 2}), down3)

	state := c.snapshot(now)
	require.Len(t, state.Clusters, 3)
	assert.Equal(t, "kubectl-rebalance/pod-a", state.Holder)
	m1, m2, m3 := state.Clusters[0], state.Clusters[1], state.Clusters[2]
	assert.Equal(t, PhaseStabilizing, m1.Phase)
	require.NotNil(t, m1.WindowEnds)
	assert.Equal(t, now.Add(3*time.Minute), m1.WindowEnds.Time)
	assert.Equal(t, "k1", m1.Recovery)
	assert.Equal(t, RecordName("member2", "k2"), m2.Record)
	require.NotNil(t, m2.LastFailback)
	assert.True(t, m3.Excluded, "not in --clusters")
	assert.Equal(t, 2, m3.Displaced)
	assert.Equal(t, 1, m3.Evicting)
	require.Len(t, m3.Workloads, 2)
	assert.Equal(t, "ns/api-deployment", m3.Workloads[0].Binding)
	assert.False(t, m3.Workloads[0].Evicting)
	assert.True(t, m3.Workloads[1].Evicting, "web is still being evicted")

	kube := kubefake.NewSimpleClientset()
	p := &ConfigMapPublisher{Client: kube.CoreV1(), Namespace: "karmada-system", Name: "kubectl-rebalance-failback"}
	ctx := context.Background()
	require.NoError(t, p.Publish(ctx, state), "created")
	state.Clusters = state.Clusters[:1]
	require.NoError(t, p.Publish(ctx, state), "patched")
	cm, err := kube.CoreV1().ConfigMaps("karmada-system").Get(ctx, "kubectl-rebalance-failback", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, ManagedBy, cm.Labels[LabelManagedBy])
	read, err := ReadState(cm)
	require.NoError(t, err)
	require.NotNil(t, read)
	require.Len(t, read.Clusters, 1)
	assert.Equal(t, state.Clusters[0].WindowEnds.UTC(), read.Clusters[0].WindowEnds.UTC())
	assert.Equal(t, 5*time.Minute, read.Window.Duration)

	none, err := ReadState(&corev1.ConfigMap{})
	require.NoError(t, err)
	assert.Nil(t, none)
	_, err = ReadState(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "karmada-system", Name: "x"}, Data: map[string]string{StateKey: "{"}})
	assert.ErrorContains(t, err, "configmap karmada-system/x holds a failback state that cannot be read")
}

// TestSnapshotBoundsTheWorkloads: the counts are complete, the list is not.
func TestSnapshotBoundsTheWorkloads(t *testing.T) {
	c := New(karmadafake.NewSimpleClientset(), nil, Options{})
	c.states["member1"] = State{Phase: PhaseDown}
	down := func(string, []corev1.Toleration) bool { return true }
	for i := range MaxPublishedWorkloads + 5 {
		c.displaced.Observe(nil, binding(fmt.Sprintf("w%03d", i), nil, "member1"), down)
	}
	state := c.snapshot(time.Now())
	assert.Equal(t, MaxPublishedWorkloads+5, state.Clusters[0].Displaced)
	assert.Len(t, state.Clusters[0].Workloads, MaxPublishedWorkloads)
}

// recordingPublisher keeps what it is given.
type recordingPublisher struct {
	mu     sync.Mutex
	states []*PublishedState
}

func (p *recordingPublisher) Publish(_ context.Context, s *PublishedState) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.states = append(p.states, s)
	return nil
}

func (p *recordingPublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.states)
}

// TestPublishOnChange: the leader publishes at once, then only what
// changed (and a heartbeat, too slow for this test).
func TestPublishOnChange(t *testing.T) {
	defer func(d time.Duration) { publishInterval = d }(publishInterval)
	publishInterval = 10 * time.Millisecond
	pub := &recordingPublisher{}
	c := New(karmadafake.NewSimpleClientset(), nil, Options{Publisher: pub})
	c.states["member1"] = State{Phase: PhaseSteady}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.publish(ctx); close(done) }()
	require.Eventually(t, func() bool { return pub.count() == 1 }, 10*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 1, pub.count(), "nothing changed")
	c.mu.Lock()
	c.states["member1"] = State{Phase: PhaseDown, Reason: "Ready is False"}
	c.mu.Unlock()
	require.Eventually(t, func() bool { return pub.count() == 2 }, 10*time.Second, time.Millisecond)
	cancel()
	<-done
	assert.Equal(t, PhaseDown, pub.states[1].Clusters[0].Phase)
}

func TestDescribe(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	state := &PublishedState{Window: metav1.Duration{Duration: 5 * time.Minute}, Cooldown: metav1.Duration{Duration: 30 * time.Minute}}
	tests := []struct {
		name    string
		cluster PublishedCluster
		state   string
		left    *time.Duration
		detail  string
	}{
		{name: "healthy", cluster: PublishedCluster{Phase: PhaseSteady}, state: StateHealthy},
		{name: "healthy long after its failback", cluster: PublishedCluster{Phase: PhaseSteady, LastFailback: at(-time.Hour)}, state: StateHealthy},
		{name: "cooling down", cluster: PublishedCluster{Phase: PhaseSteady, LastFailback: at(-10 * time.Minute)}, state: StateCoolingDown,
			left: ptr.To(20 * time.Minute), detail: "failed back at 2026-03-01T11:50:00Z: a failure within --cooldown 30m0s of it makes its next window last 30m0s"},
		{name: "failed", cluster: PublishedCluster{Phase: PhaseDown, Reason: "Ready is False (ClusterNotReachable)"}, state: StateFailed,
			detail: "Ready is False (ClusterNotReachable)"},
		{name: "failed within the cooldown", cluster: PublishedCluster{Phase: PhaseDown, Reason: "tainted x:NoExecute", Held: true}, state: StateFailed,
			detail: "tainted x:NoExecute; it failed less than --cooldown 30m0s after its last failback: once it recovers, it must stay healthy for 30m0s"},
		{name: "recovering", cluster: PublishedCluster{Phase: PhaseStabilizing, WindowEnds: at(3*time.Minute + 400*time.Millisecond), Window: &metav1.Duration{Duration: 5 * time.Minute}},
			state: StateRecovering, left: ptr.To(3 * time.Minute), detail: "stabilization window 5m0s"},
		{name: "recovering, held", cluster: PublishedCluster{Phase: PhaseStabilizing, Held: true, WindowEnds: at(time.Minute), Window: &metav1.Duration{Duration: 30 * time.Minute}},
			state: StateRecovering, left: ptr.To(time.Minute), detail: "window of --cooldown 30m0s: it failed again less than that after its last failback"},
		{name: "window over", cluster: PublishedCluster{Phase: PhaseStabilizing, WindowEnds: at(-time.Second), Window: &metav1.Duration{Duration: 5 * time.Minute}},
			state: StateRecovering, left: ptr.To(time.Duration(0)), detail: "stabilization window 5m0s; over, the failback starts"},
		{name: "failing back", cluster: PublishedCluster{Phase: PhaseFailingBack, Record: "failback-member1-k"}, state: StateFailingBack,
			detail: "failing back, recorded as workloadrebalancer failback-member1-k"},
		{name: "excluded", cluster: PublishedCluster{Phase: PhaseSteady, Excluded: true}, state: StateHealthy, detail: "not failed back to (not in --clusters)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := *state
			tt.cluster.Name = "member1"
			s.Clusters = []PublishedCluster{tt.cluster}
			views := Describe(&s, now)
			require.Len(t, views, 1)
			v := views[0]
			assert.Equal(t, tt.state, v.State)
			assert.Equal(t, tt.detail, v.Detail)
			if tt.left == nil {
				assert.Nil(t, v.TimeLeft)
			} else if assert.NotNil(t, v.TimeLeft) {
				assert.Equal(t, *tt.left, v.TimeLeft.Duration)
			}
		})
	}
	assert.Nil(t, Describe(nil, now))
}

func TestDescribeRecords(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	w := func(name string) rebalance.Workload {
		return rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: name}
	}
	rec := func(name, cluster, key string, age time.Duration, status ...appsv1alpha1.ObservedWorkload) appsv1alpha1.WorkloadRebalancer {
		rb := appsv1alpha1.WorkloadRebalancer{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: RecordLabels(cluster, key), CreationTimestamp: metav1.NewTime(t0.Add(-age)), Generation: 1},
			Spec:       appsv1alpha1.WorkloadRebalancerSpec{TTLSecondsAfterFinished: ptr.To[int32](60)},
			Status:     appsv1alpha1.WorkloadRebalancerStatus{ObservedGeneration: 1, ObservedWorkloads: status},
		}
		for _, s := range status {
			rb.Spec.Workloads = append(rb.Spec.Workloads, s.Workload)
		}
		return rb
	}
	ok := func(n string) appsv1alpha1.ObservedWorkload {
		return appsv1alpha1.ObservedWorkload{Workload: w(n), Result: appsv1alpha1.RebalanceSuccessful}
	}
	finished := rec(RecordName("member1", "a"), "member1", "a", 3*time.Hour, ok("web"), ok("api"))
	running := rec(RecordName("member1", "b"), "member1", "b", time.Minute, ok("web"))
	running.Annotations = map[string]string{PlannedAnnotation: `[{"apiVersion":"apps/v1","kind":"Deployment","namespace":"ns","name":"web"},{"apiVersion":"apps/v1","kind":"Deployment","namespace":"ns","name":"db"}]`}
	running.Spec.TTLSecondsAfterFinished = nil
	spent := rec(RecordName("member2", "c"), "member2", "c", time.Hour, appsv1alpha1.ObservedWorkload{Workload: w("x"), Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound})
	spent.Annotations = map[string]string{AnnotationStopped: StoppedFailureBudget}
	cut := rec(RecordName("member2", "d"), "member2", "d", 2*time.Hour, appsv1alpha1.ObservedWorkload{Workload: w("y")})
	cut.Annotations = map[string]string{record.UnstartedAnnotation: "1"}
	other := appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}}

	items := []appsv1alpha1.WorkloadRebalancer{finished, running, spent, cut, other}
	views := DescribeRecords(items, map[string]bool{running.Name: true}, 0)
	require.Len(t, views, 4, "records of failbacks only")
	var names, states []string
	for _, v := range views {
		names, states = append(names, v.Name), append(states, v.State)
	}
	assert.Equal(t, []string{running.Name, spent.Name, cut.Name, finished.Name}, names, "newest first")
	assert.Equal(t, []string{RecordRunning, RecordBudgetSpent, RecordInterrupted, RecordFinished}, states)
	assert.Equal(t, RecordView{Name: running.Name, Cluster: "member1", Recovery: "b", Created: running.CreationTimestamp, State: RecordRunning,
		Workloads: 2, Successful: 1, Pending: 1}, views[0], "db is planned, not started yet")
	assert.Equal(t, 1, views[1].Failed)
	assert.Len(t, DescribeRecords(items, nil, 2), 2)
}
