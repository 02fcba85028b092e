// Package recordtest holds what the e2e tests of recorded WorkloadRebalancers
// share: running the command in process or as a built binary, making
// scheduled workloads, and reading WorkloadRebalancers and bindings back.
package recordtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// Result is what a user sees of one run of the command.
type Result = fixtures.PluginRun

// Rebalance runs `kubectl rebalance ARGS` in process against the control
// plane's kubeconfig, with a private discovery cache.
func Rebalance(t *testing.T, cp *harness.ControlPlane, args ...string) Result {
	t.Helper()
	return fixtures.RunPlugin(t, cp.Kubeconfig, args...)
}

// Background runs the command in process in a goroutine; Wait returns its result.
type Background struct {
	done <-chan Result
}

// Start runs Rebalance in the background.
func Start(t *testing.T, cp *harness.ControlPlane, args ...string) *Background {
	t.Helper()
	return &Background{done: fixtures.StartPlugin(t, cp.Kubeconfig, args...)}
}

// Wait waits for the background command, at most timeout.
func (b *Background) Wait(t *testing.T, timeout time.Duration) Result {
	t.Helper()
	select {
	case res := <-b.done:
		t.Logf("background kubectl rebalance: exit %d after %s\nstdout:\n%s\nstderr:\n%s", res.Code, res.Took.Round(time.Millisecond), res.Stdout, res.Stderr)
		return res
	case <-time.After(timeout):
		require.FailNow(t, "the command did not finish", "after %s", timeout)
	}
	return Result{}
}

// Binary builds kubectl-rebalance into the test's temporary directory and
// returns its path.
func Binary(t *testing.T) string {
	t.Helper()
	binary, err := harness.BuildPlugin(t.TempDir())
	require.NoError(t, err)
	return binary
}

// Process is the built binary running as a subprocess.
type Process struct {
	Cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartBinary runs the built binary with args against the control plane.
func StartBinary(t *testing.T, cp *harness.ControlPlane, args ...string) *Process {
	t.Helper()
	p := &Process{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}}
	p.Cmd = exec.Command(Binary(t), append([]string{"--kubeconfig", cp.Kubeconfig, "--cache-dir", t.TempDir()}, args...)...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.stdout, p.stderr
	require.NoError(t, p.Cmd.Start())
	t.Cleanup(func() {
		if p.Cmd.ProcessState == nil {
			_ = p.Cmd.Process.Kill()
			_ = p.Cmd.Wait()
		}
	})
	return p
}

// Stderr is what the process wrote to stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// WaitForCountdown waits until the command announced when it deletes the
// object, and fails with the stderr seen by then.
func (p *Process) WaitForCountdown(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(p.Stderr(), "it is deleted at") {
		if time.Now().After(deadline) {
			require.FailNow(t, "the countdown never started", "stderr so far:\n%s", p.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Wait waits for the process to exit and returns its result.
func (p *Process) Wait(t *testing.T, timeout time.Duration) Result {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Cmd.Wait() }()
	select {
	case err := <-done:
		res := Result{Stdout: p.stdout.String(), Stderr: p.stderr.String()}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			res.Code = exit.ExitCode()
		} else {
			require.NoError(t, err)
		}
		t.Logf("kubectl-rebalance %s\nexit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(p.Cmd.Args[1:], " "), res.Code, res.Stdout, res.Stderr)
		return res
	case <-time.After(timeout):
		_ = p.Cmd.Process.Kill()
		require.FailNow(t, "the process did not exit", "after %s; stderr so far:\n%s", timeout, p.Stderr())
	}
	return Result{}
}

// Deployments creates Deployments with the tutorial's dynamic-weight policy
// over member1 and member2, and waits until each is scheduled.
func Deployments(ctx context.Context, t *testing.T, c *fixtures.Clients, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, fixtures.Deployment(ns, name, 3), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, "policy-"+names[0], "apps/v1", "Deployment", names, []string{"member1", "member2"}), metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range names {
		fixtures.WaitScheduled(ctx, t, c, ns, name+"-deployment")
	}
}

// Binding reads a ResourceBinding.
func Binding(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string) *workv1alpha2.ResourceBinding {
	t.Helper()
	rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	return rb
}

// Rebalancer reads a WorkloadRebalancer; nil when it does not exist.
func Rebalancer(ctx context.Context, t *testing.T, c *fixtures.Clients, name string) *appsv1alpha1.WorkloadRebalancer {
	t.Helper()
	rb, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return rb
}

// DeleteRebalancerAfter removes a WorkloadRebalancer when the test ends.
func DeleteRebalancerAfter(t *testing.T, c *fixtures.Clients, name string) {
	t.Cleanup(func() {
		_ = c.Karmada.AppsV1alpha1().WorkloadRebalancers().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// WaitRebalancer polls a WorkloadRebalancer until ok holds (a nil object
// means it does not exist), and returns the last object read.
func WaitRebalancer(ctx context.Context, t *testing.T, c *fixtures.Clients, name string, timeout time.Duration, ok func(*appsv1alpha1.WorkloadRebalancer) bool) *appsv1alpha1.WorkloadRebalancer {
	t.Helper()
	var last *appsv1alpha1.WorkloadRebalancer
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		rb, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = nil
			return ok(nil), nil
		}
		if err != nil {
			return false, err
		}
		last = rb
		return ok(rb), nil
	})
	require.NoError(t, err, "workloadrebalancer %s: condition not met; last seen: %+v", name, last)
	return last
}

// Deploy names a Deployment as a WorkloadRebalancer lists it.
func Deploy(ns, name string) appsv1alpha1.ObjectReference {
	return appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}
}

// Observed is an observedWorkloads entry.
func Observed(w appsv1alpha1.ObjectReference, result appsv1alpha1.RebalanceResult, reason appsv1alpha1.RebalanceFailedReason) appsv1alpha1.ObservedWorkload {
	return appsv1alpha1.ObservedWorkload{Workload: w, Result: result, Reason: reason}
}

// WriteFile writes a manifest for -f.
func WriteFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}
