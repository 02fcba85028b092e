package failback

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// window is the stabilization window of the tests: long enough for a flap
// to fall inside it, short enough for the package to stay quick.
const window = 20 * time.Second

// logBuffer collects a daemon's logs while the test reads them.
type logBuffer struct{ fixtures.LogBuffer }

func (b *logBuffer) text() string { return b.Text() }

// waitLog waits until the daemon logged s.
func (b *logBuffer) waitLog(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(b.text(), s) {
		if time.Now().After(deadline) {
			require.FailNow(t, "the daemon never logged "+s, "logs:\n%s", b.text())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// daemon is `kubectl rebalance failback` running in this process.
type daemon struct {
	logBuffer
	cancel context.CancelFunc
	done   chan int
}

// startDaemon runs the failback daemon with args until the test ends.
func startDaemon(t *testing.T, cp *harness.ControlPlane, args ...string) *daemon {
	t.Helper()
	d := &daemon{done: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &d.logBuffer, ErrOut: &d.logBuffer}
	root := cmd.NewCmdRebalance(streams)
	root.SetArgs(append([]string{"failback", "--kubeconfig", cp.Kubeconfig, "--cache-dir", t.TempDir()}, args...))
	root.SetContext(ctx)
	go func() { d.done <- cmd.Execute(root, streams) }()
	t.Cleanup(func() {
		code := d.stop(t)
		t.Logf("failback daemon exit %d; logs:\n%s", code, d.text())
	})
	return d
}

// stop ends the daemon as SIGTERM would and returns its exit code.
func (d *daemon) stop(t *testing.T) int {
	d.cancel()
	select {
	case code := <-d.done:
		d.done <- code
		return code
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "the failback daemon did not stop", "logs:\n%s", d.text())
	}
	return -1
}

// failbackRecords lists the failback records of a cluster.
func failbackRecords(ctx context.Context, t *testing.T, c *fixtures.Clients, cluster string) []appsv1alpha1.WorkloadRebalancer {
	t.Helper()
	list, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().List(ctx, metav1.ListOptions{
		LabelSelector: failback.LabelManagedBy + "=" + failback.ManagedBy + "," + failback.LabelCluster + "=" + cluster})
	require.NoError(t, err)
	return list.Items
}

// waitRecord waits until cluster has a failback record that ok accepts.
func waitRecord(ctx context.Context, t *testing.T, c *fixtures.Clients, cluster string, timeout time.Duration, ok func(*appsv1alpha1.WorkloadRebalancer) bool) *appsv1alpha1.WorkloadRebalancer {
	t.Helper()
	var found *appsv1alpha1.WorkloadRebalancer
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, rb := range failbackRecords(ctx, t, c, cluster) {
			if ok(&rb) {
				found = rb.DeepCopy()
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no failback record of %s as expected", cluster)
	return found
}

// deleteRecords deletes the failback records of cluster, so that each test
// starts without any.
func deleteRecords(t *testing.T, c *fixtures.Clients, cluster string) {
	ctx := context.Background()
	for _, rb := range failbackRecords(ctx, t, c, cluster) {
		_ = c.Karmada.AppsV1alpha1().WorkloadRebalancers().Delete(ctx, rb.Name, metav1.DeleteOptions{})
	}
}

// events returns the events of the failback daemon about an object.
func events(ctx context.Context, t *testing.T, c *fixtures.Clients, namespace, kind, name string) []corev1.Event {
	t.Helper()
	list, err := c.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "source": failback.EventComponent}.String(),
	})
	require.NoError(t, err)
	return list.Items
}

// waitEvent waits for an event of reason about an object, and returns it.
func waitEvent(ctx context.Context, t *testing.T, c *fixtures.Clients, namespace, kind, name, reason string, since time.Time) corev1.Event {
	t.Helper()
	var got corev1.Event
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, e := range events(ctx, t, c, namespace, kind, name) {
			if e.Reason == reason && !e.LastTimestamp.Time.Before(since.Truncate(time.Second)) {
				got = e
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no %s event on %s %s/%s", reason, kind, namespace, name)
	return got
}

// breakPods makes the pods of the Deployments names never get ready from
// now on, as a bad image rolled out would: their template gets the
// annotation that keeps kwok from running a pod. The pods already running
// stay ready; new ones, wherever Karmada places replicas next, never do.
func breakPods(ctx context.Context, t *testing.T, c *fixtures.Clients, ns string, names ...string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"true"}}}}}`, harness.NeverReadyAnnotation)
	for _, name := range names {
		_, err := c.Kube.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
	}
}

// recoverMember1 removes the taint and returns when it did, by this
// machine's clock (the one the control plane runs on).
func recoverMember1(ctx context.Context, t *testing.T, c *fixtures.Clients) time.Time {
	t.Helper()
	require.NoError(t, c.SetClusterTaint(ctx, "member1", false))
	return time.Now()
}
