package handover

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// killedWhileStaged starts the seed's rebalance back after the failover
// and recovery, and SIGKILLs it once the move staged member1's replicas:
// the binding stays suspended, with the ledger of a Staging move.
func killedWhileStaged(ctx context.Context, t *testing.T, cp *harness.ControlPlane, c *fixtures.Clients, ns, name string) *workv1alpha2.ResourceBinding {
	t.Helper()
	fixtures.TestNamespace(ctx, t, c, ns)
	seedWorkload(ctx, t, c, ns, name)
	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)
	bin := buildPlugin(ctx, t)
	command, _ := startMove(ctx, t, cp, c, bin, ns, name)
	require.NoError(t, command.Process.Kill())
	_ = command.Wait()
	rb := binding(ctx, t, c, ns, name)
	require.True(t, rb.Spec.SchedulingSuspended(), "a killed move leaves the binding suspended")
	l, err := handover.ReadLedger(rb)
	require.NoError(t, err)
	require.NotNil(t, l)
	assert.Equal(t, handover.PhaseStaging, l.Phase)
	assert.NotEmpty(t, l.Owner)
	require.NotNil(t, l.Deadline, "the ledger carries its move's deadline")
	return rb
}

// failSource taints member2 NoExecute, as the seed's failover does to
// member1, and waits until Karmada's taint manager evicted the workload
// from it: on the suspended binding, member2 leaves spec.clusters and no
// replacement is scheduled.
func failSource(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string) {
	t.Helper()
	require.NoError(t, c.SetClusterTaint(ctx, "member2", true))
	t.Cleanup(func() { _ = c.SetClusterTaint(context.Background(), "member2", false) })
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		rb := binding(ctx, t, c, ns, name)
		for _, tc := range rb.Spec.Clusters {
			if tc.Name == "member2" {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "Karmada never evicted the workload from member2")
}

// failedOverTo waits until Karmada placed all replicas off member2 and
// the binding is neither suspended nor carries the ledger.
func failedOverTo(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string, within time.Duration) {
	t.Helper()
	var last *workv1alpha2.ResourceBinding
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		last = binding(ctx, t, c, ns, name)
		_, ledger := last.Annotations[handover.LedgerAnnotation]
		return !ledger && !last.Spec.SchedulingSuspended() && fixtures.Placement(last.Spec.Clusters) == "{member1:3}", nil
	})
	require.NoError(t, err, "Karmada did not fail the workload over to member1: %s, suspended %v, annotations %v",
		fixtures.Placement(last.Spec.Clusters), last.Spec.SchedulingSuspended(), last.Annotations)
}

// TestKilledMoveThenSourceFailsRecoveredByTheNextCommand: a move SIGKILLed
// while staged, then its source cluster fails. While the binding stays
// suspended Karmada evicts from member2 without a replacement; plan shows
// the binding as held by an unfinished move, and the next command of the
// tool (recover) lets it go with Karmada's placement kept, so that Karmada
// schedules the replacement replicas.
func TestKilledMoveThenSourceFailsRecoveredByTheNextCommand(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-recover", "app"
	killedWhileStaged(ctx, t, cp, c, ns, name)
	failSource(ctx, t, c, ns, name)

	plan := fixtures.RunPlugin(t, cp.Kubeconfig, "plan", "deployment/"+name, "-n", ns, "-o", "wide")
	assert.Contains(t, plan.Stdout, "HeldByMove", "plan tells a held binding from a user's suspension")

	dry := fixtures.RunPlugin(t, cp.Kubeconfig, "recover", "-n", ns, "--dry-run")
	require.Equal(t, 0, dry.Code, dry.Stderr)
	assert.Contains(t, dry.Stdout, "would let go")
	assert.Contains(t, dry.Stdout, handover.ReasonPlacementChanged)
	assert.True(t, binding(ctx, t, c, ns, name).Spec.SchedulingSuspended(), "a dry run writes nothing")

	run := fixtures.RunPlugin(t, cp.Kubeconfig, "recover", "-n", ns, "-o", "wide")
	require.Equal(t, 0, run.Code, run.Stderr)
	assert.Contains(t, run.Stdout, "let go")
	assert.Contains(t, run.Stdout, "Staging")
	failedOverTo(ctx, t, c, ns, name, 3*time.Minute)

	again := fixtures.RunPlugin(t, cp.Kubeconfig, "recover", "-n", ns)
	require.Equal(t, 0, again.Code, again.Stderr)
	assert.Contains(t, again.Stderr, "no binding is held")
}

// TestKilledMoveThenSourceFailsRecoveredByTheDescheduler: the same
// leftover with the deschedule daemon running (as deploy/ runs it, but
// without leader election and with --force: the harness's
// karmada-descheduler holds the Lease they share): Karmada fails the
// workload over within one interval of the daemon.
func TestKilledMoveThenSourceFailsRecoveredByTheDescheduler(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-recover-daemon", "app"
	killedWhileStaged(ctx, t, cp, c, ns, name)
	// The source fails before the daemon starts: its first pass finds a
	// binding Karmada changed under the killed move.
	failSource(ctx, t, c, ns, name)

	bin := buildPlugin(ctx, t)
	const interval = 20 * time.Second
	daemon := exec.Command(bin, "--kubeconfig", cp.Kubeconfig, "deschedule", "-n", ns, "--interval", interval.String(),
		"--leader-elect=false", "--force", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	var out lockedBuffer
	daemon.Stdout, daemon.Stderr = &out, &out
	started := time.Now()
	require.NoError(t, daemon.Start())
	t.Cleanup(func() {
		_ = daemon.Process.Signal(syscall.SIGTERM)
		_, _ = daemon.Process.Wait()
		t.Logf("deschedule daemon:\n%s", out.String())
	})
	failedOverTo(ctx, t, c, ns, name, interval+time.Minute)
	t.Logf("FIGURES killed move, source failed: failed over %s after the deschedule daemon started (interval %s)", time.Since(started).Round(time.Second), interval)
	assert.Contains(t, out.String(), "recovered a binding left suspended by an interrupted move")
	assert.Contains(t, out.String(), handover.ReasonPlacementChanged)
}

// TestCtrlCAfterTheSettleWriteKeepsTheNewReplicas: Ctrl-C once the move
// wrote its settle step (member2 told to stop its surplus): the move is
// not undone - the new placement stays, the suspension is lifted - and the
// workload never loses a ready replica.
func TestCtrlCAfterTheSettleWriteKeepsTheNewReplicas(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-settle-interrupt", "app"
	command, out, settled, w := movedToItsSettle(ctx, t, cp, c, ns, name)
	require.NoError(t, command.Process.Signal(syscall.SIGINT))
	stopped := time.Now()
	_ = command.Wait()
	t.Logf("after SIGINT in Settling, exit %d within %s:\n%s", command.ProcessState.ExitCode(), time.Since(stopped).Round(time.Millisecond), out.String())
	assert.Less(t, time.Since(stopped), 3*time.Second, "Ctrl-C ends the command at once")

	rb := binding(ctx, t, c, ns, name)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	if !rb.Spec.SchedulingSuspended() && rb.Status.LastScheduledTime.Equal(settled.Status.LastScheduledTime) {
		// Released by the interruption, not by a release that raced it.
		assert.Contains(t, out.String(), "the new replicas had taken over")
	}
	assert.NotEqual(t, "{member2:3}", fixtures.Placement(rb.Spec.Clusters), "the old placement is not put back")
	waitReadySum(ctx, t, cp, ns, name, 3, twoMembers)
	w.Close()
	lo, _ := w.Range()
	t.Logf("FIGURES Ctrl-C after the settle write: ready replicas never below %d, placement %s", lo, fixtures.Placement(rb.Spec.Clusters))
	assert.GreaterOrEqual(t, lo, int32(3), "no ready replica was lost")
}

// movedToItsSettle runs the seed's failover and recovery in ns, starts the
// rebalance back as a process under a watch of the ready replicas, and
// returns once the move made its settle write (the ledger's phase is
// Settling), with the binding then.
func movedToItsSettle(ctx context.Context, t *testing.T, cp *harness.ControlPlane, c *fixtures.Clients, ns, name string) (*exec.Cmd, *bytes.Buffer, *workv1alpha2.ResourceBinding, *readyWatch) {
	t.Helper()
	fixtures.TestNamespace(ctx, t, c, ns)
	seedWorkload(ctx, t, c, ns, name)
	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)
	bin := buildPlugin(ctx, t)
	w := watchReady(t, cp, twoMembers, ns, name)
	command, out := startMove(ctx, t, cp, c, bin, ns, name)
	return command, out, waitSettling(ctx, t, c, ns, name, out), w
}

// waitSettling waits until the move of the workload made its settle
// write (the ledger's phase is Settling) and returns the binding then.
func waitSettling(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string, out *bytes.Buffer) *workv1alpha2.ResourceBinding {
	t.Helper()
	var settled *workv1alpha2.ResourceBinding
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		rb := binding(ctx, t, c, ns, name)
		l, err := handover.ReadLedger(rb)
		if err != nil || l == nil {
			return false, err
		}
		settled = rb
		return l.Phase == handover.PhaseSettling, nil
	})
	require.NoError(t, err, "the move never reached its settle write; output:\n%s", out.String())
	return settled
}

// TestKilledAfterTheSettleWriteKeepsTheNewReplicas: SIGKILL once the move
// wrote its settle step leaves the binding suspended with a Settling
// ledger; the next command of the tool (recover) lets it go with the new
// placement kept - the process that owned it is gone from this host, so at
// once - and never puts the old placement back: the workload never loses a
// ready replica.
func TestKilledAfterTheSettleWriteKeepsTheNewReplicas(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-settle-kill", "app"
	command, _, settled, w := movedToItsSettle(ctx, t, cp, c, ns, name)
	require.NoError(t, command.Process.Kill())
	_ = command.Wait()
	left := binding(ctx, t, c, ns, name)
	require.True(t, left.Spec.SchedulingSuspended(), "a killed move leaves the binding suspended")

	run := fixtures.RunPlugin(t, cp.Kubeconfig, "recover", "-n", ns, "-o", "wide")
	require.Equal(t, 0, run.Code, run.Stderr)
	assert.Contains(t, run.Stdout, "let go")
	assert.Contains(t, run.Stdout, "Settling")
	rb := binding(ctx, t, c, ns, name)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	assert.Equal(t, fixtures.Placement(settled.Spec.Clusters), fixtures.Placement(rb.Spec.Clusters), "the settled placement is kept")
	assert.NotEqual(t, "{member2:3}", fixtures.Placement(rb.Spec.Clusters), "the old placement is not put back")
	waitReadySum(ctx, t, cp, ns, name, 3, twoMembers)
	w.Close()
	lo, _ := w.Range()
	t.Logf("FIGURES SIGKILL after the settle write, then recover: ready replicas never below %d, placement %s", lo, fixtures.Placement(rb.Spec.Clusters))
	assert.GreaterOrEqual(t, lo, int32(3), "no ready replica was lost")
}

// TestDispatchingSuspendedMidMoveSurvives: the policy suspends
// dispatching while a move stages (a person pausing propagation); the
// move cannot get its new replicas ready and ends at its --timeout; what
// it takes back is its own scheduling suspension only: the binding keeps
// the dispatching suspension.
func TestDispatchingSuspendedMidMoveSurvives(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-dispatching", "app"
	fixtures.TestNamespace(ctx, t, c, ns)
	seedWorkload(ctx, t, c, ns, name)
	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)

	done := make(chan fixtures.PluginRun, 1)
	go func() {
		done <- fixtures.RunPlugin(t, cp.Kubeconfig, "deployment/"+name, "-n", ns, "-o", "wide", "--timeout", "45s")
	}()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return binding(ctx, t, c, ns, name).Spec.SchedulingSuspended(), nil
	})
	require.NoError(t, err, "the move never suspended the binding")
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"suspension": map[string]any{"dispatching": true}}})
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Patch(ctx, "policy-"+name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s := binding(ctx, t, c, ns, name).Spec.Suspension
		return s != nil && s.Dispatching != nil && *s.Dispatching, nil
	})
	require.NoError(t, err, "Karmada never carried the policy's dispatching suspension to the binding")
	run := <-done
	t.Logf("exit %d", run.Code)
	rb := binding(ctx, t, c, ns, name)
	assert.False(t, rb.Spec.SchedulingSuspended(), "the move's scheduling suspension is lifted")
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	require.NotNil(t, rb.Spec.Suspension, "the dispatching suspension survives the move's end")
	require.NotNil(t, rb.Spec.Suspension.Dispatching)
	assert.True(t, *rb.Spec.Suspension.Dispatching)
}

// lockedBuffer is a buffer two goroutines of exec write to.
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

// TestStaleJSONPatchIsAConflict: the moves' JSON patches carry the
// resource version they were built from; the API server must refuse one
// built from an older read with Conflict (which the moves read again and
// retry), not apply it over what changed since.
func TestStaleJSONPatchIsAConflict(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-stale-patch", "app"
	fixtures.TestNamespace(ctx, t, c, ns)
	seedWorkload(ctx, t, c, ns, name)
	rb := binding(ctx, t, c, ns, name)
	stale := rb.ResourceVersion
	_, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Patch(ctx, rb.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"example.com/touched":"1"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	body := `[{"op":"replace","path":"/metadata/resourceVersion","value":"` + stale + `"},{"op":"add","path":"/metadata/annotations/example.com~1stale","value":"1"}]`
	_, err = c.Karmada.WorkV1alpha2().ResourceBindings(ns).Patch(ctx, rb.Name, types.JSONPatchType, []byte(body), metav1.PatchOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(err), "a stale JSON patch is a Conflict: %v", err)
	assert.NotContains(t, binding(ctx, t, c, ns, name).Annotations, "example.com/stale")
}

// TestScaledMidMoveLetsKarmadaPlace: the workload is scaled from 3 to 5
// while its move stages; the move must not release its prediction for 3
// over it: it lets go (no trigger), Karmada places the 5, and no ready
// replica is lost on the way.
func TestScaledMidMoveLetsKarmadaPlace(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-scaled", "app"
	fixtures.TestNamespace(ctx, t, c, ns)
	seedWorkload(ctx, t, c, ns, name)
	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)
	bin := buildPlugin(ctx, t)
	w := watchReady(t, cp, twoMembers, ns, name)
	command, out := startMove(ctx, t, cp, c, bin, ns, name)
	patch := []byte(`{"spec":{"replicas":5}}`)
	_, err := c.Kube.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- command.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the move did not end within 3 minutes of the scale; output:\n%s", out.String())
	}
	t.Logf("exit %d:\n%s", command.ProcessState.ExitCode(), out.String())
	assert.Contains(t, out.String(), "scaled from 3 to 5")
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		rb := binding(ctx, t, c, ns, name)
		var sum int32
		for _, tc := range rb.Spec.Clusters {
			sum += tc.Replicas
		}
		_, ledger := rb.Annotations[handover.LedgerAnnotation]
		return sum == 5 && !ledger && !rb.Spec.SchedulingSuspended(), nil
	})
	require.NoError(t, err, "Karmada did not place the 5 replicas")
	waitReadySum(ctx, t, cp, ns, name, 5, twoMembers)
	w.Close()
	lo, _ := w.Range()
	t.Logf("FIGURES scaled mid-move: ready replicas never below %d", lo)
	assert.GreaterOrEqual(t, lo, int32(3), "the scale mid-move cost no ready replica")
}

// TestTwoProcessesOnOneWorkload: a second kubectl rebalance of a workload
// another process is moving waits for that move instead of undoing it;
// the first move completes make-before-break, and no ready replica is
// lost.
func TestTwoProcessesOnOneWorkload(t *testing.T) {
	cp := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := fixtures.TestClients(t, cp.Karmada)
	const ns, name = "handover-two", "app"
	fixtures.TestNamespace(ctx, t, c, ns)
	seedWorkload(ctx, t, c, ns, name)
	failedOver(ctx, t, cp, c, ns, name, 3, twoMembers)
	bin := buildPlugin(ctx, t)
	w := watchReady(t, cp, twoMembers, ns, name)
	first, out := startMove(ctx, t, cp, c, bin, ns, name)
	second := fixtures.RunPlugin(t, cp.Kubeconfig, "deployment/"+name, "-n", ns, "-o", "wide")
	require.NoError(t, first.Wait(), "the first move ends well; output:\n%s", out.String())
	t.Logf("first:\n%s", out.String())
	assert.Contains(t, out.String(), "made before break", "the first move was not undone by the second")
	assert.NotContains(t, out.String(), "stopped before the release")
	assert.Equal(t, 0, second.Code, second.Stderr)
	rb := binding(ctx, t, c, ns, name)
	assert.False(t, rb.Spec.SchedulingSuspended())
	assert.NotContains(t, rb.Annotations, handover.LedgerAnnotation)
	waitReadySum(ctx, t, cp, ns, name, 3, twoMembers)
	w.Close()
	lo, _ := w.Range()
	t.Logf("FIGURES two processes on one workload: ready replicas never below %d", lo)
	assert.GreaterOrEqual(t, lo, int32(3))
}
