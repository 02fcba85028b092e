package deschedule

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// syncBuffer is a process's output, read while it writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startProcess runs a binary until the test ends, and returns its output.
func startProcess(t *testing.T, name, binary string, args ...string) *syncBuffer {
	t.Helper()
	out := &syncBuffer{}
	p := exec.Command(binary, args...)
	p.Stdout, p.Stderr = out, out
	require.NoError(t, p.Start())
	t.Cleanup(func() {
		_ = p.Process.Kill()
		_ = p.Wait()
		t.Logf("%s output:\n%s", name, out.String())
	})
	return out
}

// TestCoexistWithKarmadaDescheduler runs the plugin's descheduler and
// failback daemons beside the release's karmada-descheduler, on the
// default environment, then strands the guide's example in member1. The
// plugin's descheduler (--force) stands by on karmada-descheduler's Lease
// and never passes while it leads, so the stranded replica is evicted once,
// by karmada-descheduler. member1 then flaps (a NoSchedule taint the
// workload does not tolerate, put on and taken off) with its nodes
// schedulable again: the failback daemon sees that the eviction was no
// failure's (member1 was healthy, nothing was displaced) and moves nothing
// back.
//
// Every daemon runs before the replica is stranded, and karmada-descheduler
// waits for replicas unschedulable for 20 s where the plugin's descheduler
// waits 1 s: a plugin descheduler that did not stand by evicts the replica
// first, every time. Whoever evicts first, the other finds nothing left to
// evict, so the count of evictions alone cannot tell a fight; who evicted,
// and when, does.
func TestCoexistWithKarmadaDescheduler(t *testing.T) {
	// Not parallel: cordoning member1 must not disturb the other tests.
	cp := harness.Require(t)
	e := &env{deschedtest.New(t, cp, "coexist")}
	fixtures.TestNamespace(e.Ctx, t, e.C, e.NS)
	e.createSeedExampleReadyAfter("5s")
	before := e.settledBinding("nginx-deployment")
	require.GreaterOrEqual(t, before["member1"], int32(1), "the example starts with a replica in member1")
	for m, n := range before {
		e.WaitPods(m, "nginx", podCounts{Ready: int(n), Total: int(n)})
	}

	binary := recordtest.Binary(t)
	const kdThreshold = 20 * time.Second
	kdBinary, kdArgs, err := cp.KarmadaDescheduler("--leader-elect-resource-namespace="+e.NS, "--descheduling-interval=2s", "--unschedulable-threshold="+kdThreshold.String())
	require.NoError(t, err)
	kd := startProcess(t, "karmada-descheduler", kdBinary, kdArgs...)
	e.Eventually("karmada-descheduler leading", func() (bool, string) {
		lease, err := e.C.Kube.CoordinationV1().Leases(e.NS).Get(e.Ctx, deschedule.DefaultLeaseName, metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", "no holder; karmada-descheduler:\n" + kd.String()
	})
	ours := startProcess(t, "deschedule", binary, "deschedule", "--kubeconfig", cp.Kubeconfig, "-n", e.NS, "--force",
		"--descheduling-interval=1s", "--unschedulable-threshold=1s", "--leader-elect-resource-namespace", e.NS, "--leader-elect-identity=coexist")
	fb := startProcess(t, "failback", binary, "failback", "--kubeconfig", cp.Kubeconfig, "-n", e.NS, "--stabilization-window", "5s",
		"--leader-elect-resource-namespace", e.NS, "--leader-elect-identity=coexist-failback")
	e.Eventually("both daemons started", func() (bool, string) {
		return strings.Contains(ours.String(), "waiting to lead") && strings.Contains(fb.String(), "acting on recoveries"), ours.String() + fb.String()
	})
	time.Sleep(2 * time.Second) // a Lease of its own would be taken by now

	e.cordonAll("member1")
	stranded := time.Now()
	e.deletePods("member1", "nginx")
	after := map[string]int32{}
	e.Eventually("the stranded replica moved off member1", func() (bool, string) {
		after = e.settledPlacement("nginx")
		_, on1 := after["member1"]
		return !on1, fmt.Sprint(after)
	})
	e.WaitPods("member1", "nginx", podCounts{})
	time.Sleep(5 * time.Second) // several more intervals of both deschedulers

	events, err := e.C.Kube.CoreV1().Events(e.NS).List(e.Ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "ResourceBinding", "involvedObject.name": "nginx-deployment", "reason": "DescheduleBindingSucceed"}.String()})
	require.NoError(t, err)
	var count int32
	for _, ev := range events.Items {
		assert.NotEqual(t, deschedule.EventComponent, ev.Source.Component, "the plugin's descheduler never passed: %s", ev.Message)
		assert.False(t, ev.FirstTimestamp.Time.Before(stranded.Add(kdThreshold-time.Second)),
			"evicted after karmada-descheduler's threshold: stranded at %s, evicted at %s", stranded, ev.FirstTimestamp)
		count += ev.Count
	}
	assert.Equal(t, int32(1), count, "evicted once, by karmada-descheduler: %+v", events.Items)
	assert.Contains(t, ours.String(), "standing by")
	assert.NotContains(t, ours.String(), "pass finished")

	// member1 can run the replica again, and flaps: its recovery finds
	// nothing displaced, as karmada-descheduler's eviction was no failure's.
	e.uncordonAll("member1")
	flapped, logged := time.Now(), len(fb.String())
	since := func() string { return fb.String()[logged:] }
	require.NoError(t, setNoSchedule(e, "member1", true))
	t.Cleanup(func() { _ = setNoSchedule(e, "member1", false) })
	e.Eventually("the failback daemon saw member1 fail", func() (bool, string) {
		return strings.Contains(since(), `msg="cluster failed" component=kubectl-rebalance-failback cluster=member1`), since()
	})
	require.NoError(t, setNoSchedule(e, "member1", false))
	e.Eventually("member1's failback", func() (bool, string) {
		return strings.Contains(since(), `component=kubectl-rebalance-failback cluster=member1 record=`) &&
			strings.Contains(since(), `msg="failback finished`), since()
	})
	assert.Contains(t, since(), "no workload was displaced by the failure of member1")
	time.Sleep(2 * time.Second)
	rb := e.Binding("nginx")
	assert.Nil(t, rb.Spec.RescheduleTriggeredAt, "the failback daemon triggered nothing")
	records, err := e.C.Karmada.AppsV1alpha1().WorkloadRebalancers().List(e.Ctx, metav1.ListOptions{LabelSelector: failback.LabelManagedBy + "=" + failback.ManagedBy})
	require.NoError(t, err)
	for _, r := range records.Items {
		assert.False(t, strings.Contains(r.Name, "member1") && !r.CreationTimestamp.Time.Before(flapped.Truncate(time.Second)), "no failback record for member1: %s", r.Name)
	}
	assert.Equal(t, after, e.settledPlacement("nginx"), "the placement stays")
}

// uncordonAll makes every node of member schedulable again.
func (e *env) uncordonAll(member string) {
	e.T.Helper()
	client := e.Member(member)
	nodes, err := client.CoreV1().Nodes().List(e.Ctx, metav1.ListOptions{})
	require.NoError(e.T, err)
	for _, n := range nodes.Items {
		_, err := client.CoreV1().Nodes().Patch(e.Ctx, n.Name, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
		require.NoError(e.T, err)
	}
}

// flapTaint is a NoSchedule taint that no workload of the test tolerates:
// Karmada evicts nothing for it, and the failback daemon counts the
// cluster as failed while it is on.
var flapTaint = corev1.Taint{Key: "coexist-flap", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// setNoSchedule puts flapTaint on a Cluster, or takes it off.
func setNoSchedule(e *env, cluster string, add bool) error {
	return wait.PollUntilContextTimeout(e.Ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cl, err := e.C.Karmada.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var taints []corev1.Taint
		for _, t := range cl.Spec.Taints {
			if t.Key != flapTaint.Key {
				taints = append(taints, t)
			}
		}
		if add {
			taints = append(taints, flapTaint)
		}
		cl.Spec.Taints = taints
		_, err = e.C.Karmada.ClusterV1alpha1().Clusters().Update(ctx, cl, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}
