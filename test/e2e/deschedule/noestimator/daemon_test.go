package noestimator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

var (
	buildOnce sync.Once
	binDir    string
	binary    string
	buildErr  error
)

// pluginBinary builds kubectl-rebalance once for the package, so that
// daemons run as real processes that receive real signals.
func pluginBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "deschedule-e2e-bin-"); buildErr != nil {
			return
		}
		binary, buildErr = harness.BuildPlugin(binDir)
	})
	require.NoError(t, buildErr)
	return binary
}

// removeBinary is called by TestMain once the tests are done.
func removeBinary() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// lockedBuffer collects a process's output while tests read it.
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

// daemon is `kubectl rebalance deschedule --interval ...` as a child process.
type daemon struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
	code   int
}

// startDaemon starts the binary with JSON logs against the control plane.
func (e *env) startDaemon(name string, args ...string) *daemon {
	e.T.Helper()
	return e.startProcess(name, append([]string{"deschedule", "--kubeconfig", e.CP.Kubeconfig, "--logging-format=json"}, args...)...)
}

// startProcess starts the binary with exactly args.
func (e *env) startProcess(name string, args ...string) *daemon {
	e.T.Helper()
	return e.startBinary(name, pluginBinary(e.T), args...)
}

// startBinary starts the program at path with args.
func (e *env) startBinary(name, path string, args ...string) *daemon {
	e.T.Helper()
	d := &daemon{t: e.T, name: name, cmd: exec.Command(path, args...), stderr: &lockedBuffer{}, done: make(chan struct{})}
	d.cmd.Stdout = io.Discard
	d.cmd.Stderr = d.stderr
	require.NoError(e.T, d.cmd.Start())
	go func() {
		defer close(d.done)
		err := d.cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			d.code = exit.ExitCode()
		default:
			d.code = -1
		}
	}()
	e.T.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		e.T.Logf("daemon %s logs:\n%s", d.name, d.stderr.String())
	})
	return d
}

// logs decodes the daemon's JSON log lines so far.
func (d *daemon) logs() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(d.stderr.String()))
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			out = append(out, line)
		}
	}
	return out
}

// logged returns the log lines with message msg.
func (d *daemon) logged(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range d.logs() {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// waitLog waits for a log line with message msg and returns it.
func (d *daemon) waitLog(msg string, timeout time.Duration) map[string]any {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if lines := d.logged(msg); len(lines) > 0 {
			return lines[0]
		}
		select {
		case <-d.done:
			d.t.Fatalf("daemon %s exited with %d before logging %q:\n%s", d.name, d.code, msg, d.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	d.t.Fatalf("daemon %s did not log %q within %s:\n%s", d.name, msg, timeout, d.stderr.String())
	return nil
}

// stop sends sig and returns the exit code, failing after timeout.
func (d *daemon) stop(sig os.Signal, timeout time.Duration) int {
	d.t.Helper()
	require.NoError(d.t, d.cmd.Process.Signal(sig))
	select {
	case <-d.done:
		return d.code
	case <-time.After(timeout):
		d.t.Fatalf("daemon %s still running %s after %s:\n%s", d.name, timeout, sig, d.stderr.String())
		return -1
	}
}

// endpoint is the address the daemon serves metrics and probes on (the
// tests give both the same address).
func (d *daemon) endpoint() string {
	d.t.Helper()
	line := d.waitLog("serving metrics and probes", time.Minute)
	return "http://" + line["address"].(string)
}

// get fetches a path of the daemon's HTTP endpoint.
func (d *daemon) get(path string) (int, string) {
	d.t.Helper()
	resp, err := http.Get(d.endpoint() + path)
	require.NoError(d.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(d.t, err)
	return resp.StatusCode, string(body)
}

// metric reads one sample of the daemon's /metrics, 0 when absent.
func (d *daemon) metric(series string) float64 {
	d.t.Helper()
	_, body := d.get("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if value, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			require.NoError(d.t, err)
			return v
		}
	}
	return 0
}

func (d *daemon) passes() float64 {
	total := 0.0
	for _, r := range []string{deschedule.PassSucceeded, deschedule.PassPartial, deschedule.PassError, deschedule.PassStopped} {
		total += d.metric(`kubectl_rebalance_deschedule_passes_total{result="` + r + `"}`)
	}
	return total
}

// holder reads who holds the Lease name in namespace.
func (e *env) holder(namespace, name string) string {
	lease, err := e.C.Kube.CoordinationV1().Leases(namespace).Get(e.Ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// TestDescheduleLeaderElection runs two daemons as separate processes: one
// passes, the other stands by and says so on /readyz and in its metrics;
// SIGTERM makes the leader finish, release the Lease and exit 0, and the
// standby takes over at once instead of after the lease duration.
func TestDescheduleLeaderElection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "leader")
	e.stuck("member3", 1, "web")
	args := []string{
		"-n", e.NS, "--interval=1s", "--dry-run=client", "--unschedulable-threshold=0s",
		"--leader-elect", "--leader-elect-resource-namespace", e.NS,
		// Long enough that an unreleased lease would show: 20s.
		"--leader-elect-lease-duration=20s", "--leader-elect-renew-deadline=15s", "--leader-elect-retry-period=500ms",
		"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0",
	}
	a := e.startDaemon("a", append(args, "--leader-elect-identity=a")...)
	e.Eventually("a leading", func() (bool, string) {
		h := e.holder(e.NS, deschedule.DefaultLeaseName)
		return h == deschedule.HolderIdentity("a"), "holder " + h
	})
	b := e.startDaemon("b", append(args, "--leader-elect-identity=b")...)
	standby := b.waitLog("standing by", time.Minute)
	assert.Equal(t, deschedule.HolderIdentity("a"), standby["leader"])

	a.waitLog("pass finished", time.Minute)
	time.Sleep(3 * time.Second)
	code, body := a.get("/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok (leader)\n", body)
	code, body = b.get("/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok (standby)\n", body)
	code, _ = b.get("/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, 1.0, a.metric("kubectl_rebalance_deschedule_leader"))
	assert.Equal(t, 0.0, b.metric("kubectl_rebalance_deschedule_leader"))
	assert.GreaterOrEqual(t, a.passes(), 2.0)
	assert.Equal(t, 0.0, b.passes(), "the standby does not pass")
	assert.Empty(t, b.logged("pass finished"))
	assert.GreaterOrEqual(t, a.metric("kubectl_rebalance_deschedule_bindings_examined_total"), 2.0)
	assert.InDelta(t, a.passes(), a.metric(`kubectl_rebalance_deschedule_bindings_total{outcome="dry-run"}`), 1, "each pass would deschedule web")

	stopped := time.Now()
	assert.Equal(t, 0, a.stop(syscall.SIGTERM, 30*time.Second))
	a.waitLog("released the lease", time.Second)
	e.Eventually("b leading", func() (bool, string) {
		h := e.holder(e.NS, deschedule.DefaultLeaseName)
		return h == deschedule.HolderIdentity("b"), "holder " + h
	})
	assert.Less(t, time.Since(stopped), 15*time.Second, "the standby took over before the 20s lease ran out")
	b.waitLog("pass finished", time.Minute)
	e.Eventually("b passing", func() (bool, string) {
		return b.passes() > 0, fmt.Sprint(b.passes())
	})
	assert.Equal(t, 1.0, b.metric("kubectl_rebalance_deschedule_leader"))
	assert.Equal(t, 0, b.stop(os.Interrupt, 30*time.Second))
	b.waitLog("stopped", time.Second)
}

// TestDescheduleSignals sends SIGTERM to a daemon in the middle of a slow
// pass (one request per second): it finishes the binding it is writing,
// events included, writes no other, and exits 0. A daemon idle between two
// passes exits 0 at once.
func TestDescheduleSignals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "signals")
	names := []string{"d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7"}
	e.stuck("member2", 1, names...)

	d := e.startDaemon("slow", "-n", e.NS, "--interval=1h", "--unschedulable-threshold=0s", "--kube-api-qps=1", "--kube-api-burst=1", "--leader-elect=false")
	e.Eventually("a first binding written", func() (bool, string) {
		for _, name := range names {
			if len(e.events("ResourceBinding", name+"-deployment")) > 0 {
				return true, name
			}
		}
		return false, "no event yet"
	})
	assert.Equal(t, 0, d.stop(syscall.SIGTERM, time.Minute))
	stoppedPass := d.waitLog("pass stopped between writes", time.Second)
	assert.Equal(t, deschedule.PassStopped, stoppedPass["result"])
	d.waitLog("stopped", time.Second)

	written := 0
	for _, name := range names {
		onBinding := len(e.events("ResourceBinding", name+"-deployment"))
		onDeployment := len(e.events("Deployment", name))
		assert.Equal(t, onBinding, onDeployment, "%s: a write is never left without its events", name)
		assert.LessOrEqual(t, onBinding, 1, name)
		written += onBinding
	}
	assert.Equal(t, len(d.logged("binding descheduled")), written, "the log accounts for every write")
	assert.Equal(t, float64(written), stoppedPass["descheduled"])
	assert.GreaterOrEqual(t, written, 1)
	assert.Less(t, written, len(names), "the stop came before the last binding")

	idle := e.startDaemon("idle", "-n", e.NS, "--interval=1h", "--dry-run=client", "--leader-elect=false")
	idle.waitLog("pass finished", time.Minute)
	start := time.Now()
	assert.Equal(t, 0, idle.stop(syscall.SIGTERM, 10*time.Second))
	assert.Less(t, time.Since(start), 5*time.Second)
	idle.waitLog("stopped", time.Second)
}
