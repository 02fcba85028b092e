package deschedule

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

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
// default environment, with the guide's example stranded in member1. The
// plugin's descheduler (--force) stands by on karmada-descheduler's Lease
// and never passes while it leads, so the stranded replica is evicted once,
// by karmada-descheduler; the failback daemon sees that move for what it is
// (member1 never failed, nothing was displaced) and moves nothing back.
func TestCoexistWithKarmadaDescheduler(t *testing.T) {
	// Not parallel: cordoning member1 must not disturb the other tests.
	cp := harness.Require(t)
	e := &env{deschedtest.New(t, cp, "coexist")}
	fixtures.TestNamespace(e.Ctx, t, e.C, e.NS)
	e.createSeedExample()
	_, want := e.strandIn("member1", "nginx-deployment", "nginx", e.WaitPods)
	require.Positive(t, want)

	binary := recordtest.Binary(t)
	kdBinary, kdArgs, err := cp.KarmadaDescheduler("--leader-elect-resource-namespace="+e.NS, "--descheduling-interval=2s", "--unschedulable-threshold=1s")
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

	after := map[string]int32{}
	e.Eventually("the stranded replica moved off member1", func() (bool, string) {
		after = e.settledPlacement("nginx")
		_, on1 := after["member1"]
		return !on1, fmt.Sprint(after)
	})
	e.WaitPods("member1", "nginx", podCounts{})
	time.Sleep(10 * time.Second) // several more intervals of both descheduler

	events, err := e.C.Kube.CoreV1().Events(e.NS).List(e.Ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "ResourceBinding", "involvedObject.name": "nginx-deployment", "reason": "DescheduleBindingSucceed"}.String()})
	require.NoError(t, err)
	var count int32
	for _, ev := range events.Items {
		assert.NotEqual(t, deschedule.EventComponent, ev.Source.Component, "the plugin's descheduler never passed: %s", ev.Message)
		count += ev.Count
	}
	assert.Equal(t, int32(1), count, "evicted once, by karmada-descheduler: %+v", events.Items)
	assert.Contains(t, ours.String(), "standing by")
	assert.NotContains(t, ours.String(), "pass finished")

	rb := e.Binding("nginx")
	assert.Nil(t, rb.Spec.RescheduleTriggeredAt, "the failback daemon triggered nothing")
	records, err := e.C.Karmada.AppsV1alpha1().WorkloadRebalancers().List(e.Ctx, metav1.ListOptions{LabelSelector: failback.LabelManagedBy + "=" + failback.ManagedBy})
	require.NoError(t, err)
	for _, r := range records.Items {
		assert.False(t, strings.Contains(r.Name, "member1"), "no failback record for member1: %s", r.Name)
	}
	assert.Equal(t, after, e.settledPlacement("nginx"), "the placement stays")
	assert.Contains(t, fb.String(), "acting on recoveries")
}
