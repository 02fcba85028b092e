package handover

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// buildPlugin builds the plugin binary, to be stopped by a signal.
func buildPlugin(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-rebalance")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../../cmd/kubectl-rebalance").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// startMove starts `kubectl-rebalance deployment/NAME -n NS` as a process
// and waits until the move has staged its replicas (the binding carries the
// ledger annotation and is suspended).
func startMove(ctx context.Context, t *testing.T, cp *harness.ControlPlane, c *fixtures.Clients, bin, ns, name string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	command := exec.Command(bin, "--kubeconfig", cp.Kubeconfig, "--cache-dir", t.TempDir(), "deployment/"+name, "-n", ns, "-o", "wide")
	var out bytes.Buffer
	command.Stdout, command.Stderr = &out, &out
	require.NoError(t, command.Start())
	t.Cleanup(func() { _ = command.Process.Kill(); _, _ = command.Process.Wait() })
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		rb := binding(ctx, t, c, ns, name)
		return rb.Annotations[handover.LedgerAnnotation] != "" && rb.Spec.SchedulingSuspended(), nil
	})
	require.NoError(t, err, "the move never staged its replicas; output:\n%s", out.String())
	return command, &out
}

func binding(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string) *workv1alpha2.ResourceBinding {
	t.Helper()
	rb, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, name+"-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	return rb
}

// TestInterruptedMoveLeavesNoSuspendedBinding stops a move while its staged
// replicas start: Ctrl-C (SIGINT) undoes it before the command exits; after
// SIGKILL the binding stays suspended with the ledger, and the next run of
// the command undoes that and moves the workload make-before-break.
func TestInterruptedMoveLeavesNoSuspendedBinding(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-interrupt", "app"
	fixtures.TestNamespace(ctx, t, c, ns)
	seedWorkload(ctx, t, c, ns, name)
	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)
	bin := buildPlugin(ctx, t)

	// Ctrl-C: undone before the command ends, within about a second.
	command, out := startMove(ctx, t, cp, c, bin, ns, name)
	require.NoError(t, command.Process.Signal(syscall.SIGINT))
	stopped := time.Now()
	_ = command.Wait()
	t.Logf("after SIGINT, exit %d within %s:\n%s", command.ProcessState.ExitCode(), time.Since(stopped).Round(time.Millisecond), out.String())
	assert.Less(t, time.Since(stopped), 3*time.Second, "Ctrl-C ends the command at once")
	rb := binding(ctx, t, c, ns, name)
	assert.False(t, rb.Spec.SchedulingSuspended(), "Ctrl-C leaves no suspended binding")
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	assert.Equal(t, "{member2:3}", fixtures.Placement(rb.Spec.Clusters), "the staged replicas were removed")
	assert.Contains(t, out.String(), "stopped before the release")
	waitReadySum(ctx, t, cp, ns, name, 3, twoMembers)

	// SIGKILL: nothing runs to undo it; the ledger stays on the binding.
	command, _ = startMove(ctx, t, cp, c, bin, ns, name)
	require.NoError(t, command.Process.Kill())
	_ = command.Wait()
	rb = binding(ctx, t, c, ns, name)
	require.True(t, rb.Spec.SchedulingSuspended(), "a killed move leaves the binding suspended")
	require.Contains(t, rb.Annotations, handover.LedgerAnnotation)

	// The next run puts it back and moves again, make-before-break.
	w := watchReady(t, cp, twoMembers, ns, name)
	run := fixtures.RunPlugin(t, cp.Kubeconfig, "deployment/"+name, "-n", ns, "-o", "wide")
	require.Equal(t, 0, run.Code, run.Stderr)
	assert.Contains(t, run.Stdout, "made before break")
	_, err := c.WaitForPlacement(ctx, ns, name+"-deployment", time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
	waitReadySum(ctx, t, cp, ns, name, 3, twoMembers)
	w.Close()
	lo, _ := w.Range()
	assert.GreaterOrEqual(t, lo, int32(3), "the resumed move kept every replica ready")
	assert.Contains(t, run.Stdout, "as predicted", "the scheduler chose the placement the move settled on")
	rb = binding(ctx, t, c, ns, name)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
}

// TestMoveTimeoutUndoesAMoveStillStaging: a move whose new replicas take
// longer to start than its own deadline (--move-timeout) is undone when
// the deadline comes, whatever --timeout says: the binding is back as it
// was, scheduling resumed, and no ready replica was lost (exit code 3).
func TestMoveTimeoutUndoesAMoveStillStaging(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-move-timeout", "app"
	fixtures.TestNamespace(ctx, t, c, ns)
	seedWorkload(ctx, t, c, ns, name)
	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)
	w := watchReady(t, cp, twoMembers, ns, name)
	run := fixtures.RunPlugin(t, cp.Kubeconfig, "deployment/"+name, "-n", ns, "-o", "wide", "--move-timeout", "10s", "--timeout", "5m")
	assert.Equal(t, 3, run.Code, run.Stderr)
	assert.Contains(t, run.Stdout, "the move did not end within its own deadline (--move-timeout 10s)")
	assert.Contains(t, run.Stdout, "nothing moved")
	rb := binding(ctx, t, c, ns, name)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	assert.Equal(t, "{member2:3}", fixtures.Placement(rb.Spec.Clusters), "the placement before the move is back")
	waitReadySum(ctx, t, cp, ns, name, 3, twoMembers)
	w.Close()
	lo, _ := w.Range()
	assert.GreaterOrEqual(t, lo, int32(3), "no ready replica was lost")
}
