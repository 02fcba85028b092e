package interrupt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// plugin is the kubectl-rebalance binary the tests run, built by TestMain.
var plugin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kubectl-rebalance-interrupt-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	plugin, err = harness.BuildPlugin(dir)
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// bound is how long a command may take to exit after a signal. It is an
// assertion of correctness, not a benchmark: the command needs
// milliseconds, and one that leaves a hanging request to its own timeout
// takes 32s (client-go's discovery) or a minute (--request-timeout's
// default in the daemons).
const bound = 3 * time.Second

// process is the plugin running in a process of its own.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan error
}

// lockedBuffer is a buffer the process writes while the test reads it.
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

func startPlugin(t *testing.T, args ...string) *process {
	t.Helper()
	return startProcess(t, plugin, args...)
}

func startProcess(t *testing.T, name string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(name, args...), done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		// A process that outlived its test is killed, not waited for.
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// endsWithin waits up to limit for the process to exit and returns its
// exit code and how long it took; a process still running then is killed
// and reported with ended false.
func (p *process) endsWithin(limit time.Duration) (code int, took time.Duration, ended bool) {
	start := time.Now()
	select {
	case err := <-p.done:
		took = time.Since(start)
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), took, true
		}
		return 0, took, true
	case <-time.After(limit):
		_ = p.cmd.Process.Kill()
		<-p.done
		return -1, time.Since(start), false
	}
}

// stop sends sig and waits up to bound for the process to exit.
func (p *process) stop(t *testing.T, sig os.Signal) (code int, ended bool) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	code, took, ended := p.endsWithin(bound)
	t.Logf("exit %d %s after %v (ended: %t); stderr:\n%s", code, took.Round(time.Millisecond), sig, ended, p.stderr.String())
	return code, ended
}

// waitReached waits until a client of h got to its stall.
func waitReached(t *testing.T, h *hangingServer) {
	t.Helper()
	select {
	case <-h.reached:
		// Let the client settle into its wait: the signal must find it
		// blocked, not on its way there.
		time.Sleep(200 * time.Millisecond)
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the command never got to the server's stall")
	}
}

// commands are the commands, and their dry runs, as they end when
// interrupted before the server answered anything.
var commands = []struct {
	name string
	args []string
	sig  syscall.Signal
	code int
	want string
}{
	{name: "rebalance", args: []string{"deploy/web"}, sig: syscall.SIGINT, code: 3,
		want: "error: interrupted before any binding was read; nothing was written"},
	{name: "rebalance on SIGTERM", args: []string{"deploy/web"}, sig: syscall.SIGTERM, code: 3,
		want: "error: interrupted before any binding was read; nothing was written"},
	{name: "rebalance client dry run", args: []string{"deploy/web", "--dry-run=client"}, sig: syscall.SIGINT, code: 3,
		want: "error: interrupted before any binding was read; nothing was written"},
	{name: "rebalance server dry run", args: []string{"deployments", "--all", "--dry-run=server"}, sig: syscall.SIGINT, code: 3,
		want: "error: interrupted before any binding was read; nothing was written"},
	{name: "recorded rebalance", args: []string{"deploy/web", "--name", "after-failover"}, sig: syscall.SIGINT, code: 3,
		want: "error: interrupted before any binding was read; nothing was written"},
	{name: "plan", args: []string{"plan", "deployments", "-A"}, sig: syscall.SIGINT, code: 3,
		want: "error: interrupted before any binding was read; nothing was written"},
	{name: "get", args: []string{"get"}, sig: syscall.SIGINT, code: 1,
		want: "error: interrupted before the Karmada apiserver answered; nothing was shown"},
	{name: "get one", args: []string{"get", "after-failover"}, sig: syscall.SIGTERM, code: 1,
		want: "error: interrupted before the Karmada apiserver answered; nothing was shown"},
	{name: "deschedule pass", args: []string{"deschedule"}, sig: syscall.SIGINT, code: 2,
		want: "error: interrupted before the bindings were listed; nothing was written"},
	{name: "deschedule dry run", args: []string{"deschedule", "--dry-run=client"}, sig: syscall.SIGINT, code: 2,
		want: "error: interrupted before the bindings were listed; nothing was written"},
	{name: "deschedule of a custom kind", args: []string{"deschedule", "--kinds", "flinkdeployments.flink.apache.org"}, sig: syscall.SIGINT, code: 2,
		want: "error: interrupted before the bindings were listed; nothing was written"},
	{name: "deschedule daemon", args: []string{"deschedule", "--interval", "1m"}, sig: syscall.SIGTERM, code: 0,
		want: "msg=stopped"},
	{name: "deschedule daemon of a custom kind", args: []string{"deschedule", "--interval", "1m", "--kinds", "flinkdeployments.flink.apache.org"}, sig: syscall.SIGTERM, code: 0,
		want: "msg=stopped"},
	{name: "failback daemon", args: []string{"failback", "-A"}, sig: syscall.SIGTERM, code: 0,
		want: "msg=stopped"},
	{name: "failback dry run", args: []string{"failback", "-A", "--dry-run"}, sig: syscall.SIGINT, code: 0,
		want: "msg=stopped"},
}

// TestSignalEndsEveryCommandWhileTheServerHangs starts every command against
// a server that hangs for good, sends it a real signal once it is stuck in
// the server's stall, and checks that it exits within bound with its
// documented code and words.
func TestSignalEndsEveryCommandWhileTheServerHangs(t *testing.T) {
	for _, srv := range servers {
		for _, tt := range commands {
			t.Run(srv.name+"/"+tt.name, func(t *testing.T) {
				h := newHangingServer(t, srv.scheme, srv.stall)
				p := startPlugin(t, append([]string{"--kubeconfig", kubeconfigFor(t, h.URL()), "--cache-dir", t.TempDir()}, tt.args...)...)
				waitReached(t, h)
				code, ended := p.stop(t, tt.sig)
				require.True(t, ended, "%v did not end the command within %s while the server hung", tt.sig, bound)
				assert.Equal(t, tt.code, code)
				assert.Contains(t, p.stderr.String(), tt.want)
			})
		}
	}
}

// TestTimeoutBoundsRequestsToAHangingServer lets --timeout (or
// --request-timeout) run out while the server hangs, without a signal: the
// command must end when it runs out, not when client-go's own timeouts do.
func TestTimeoutBoundsRequestsToAHangingServer(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "rebalance", args: []string{"deploy/web", "--timeout", "2s"}, code: 3,
			want: "error: --timeout 2s ran out before any binding was read"},
		{name: "plan", args: []string{"plan", "deploy/web", "--timeout", "2s"}, code: 3,
			want: "error: --timeout 2s ran out before any binding was read"},
		{name: "get", args: []string{"get", "--timeout", "2s"}, code: 1,
			want: "error: --timeout 2s ran out"},
		{name: "deschedule pass", args: []string{"deschedule", "--timeout", "2s"}, code: 2,
			want: "error: --timeout 2s ran out"},
		{name: "deschedule of a custom kind", args: []string{"deschedule", "--kinds", "flinkdeployments.flink.apache.org", "--timeout", "2s"}, code: 2,
			want: "error: --timeout 2s ran out before the bindings were listed"},
		{name: "deschedule request timeout", args: []string{"deschedule", "--request-timeout", "2s"}, code: 1,
			want: "error: cannot reach the API server at"},
	}
	for _, srv := range servers {
		for _, tt := range tests {
			t.Run(srv.name+"/"+tt.name, func(t *testing.T) {
				h := newHangingServer(t, srv.scheme, srv.stall)
				p := startPlugin(t, append([]string{"--kubeconfig", kubeconfigFor(t, h.URL()), "--cache-dir", t.TempDir()}, tt.args...)...)
				code, took, ended := p.endsWithin(2*time.Second + bound)
				t.Logf("exit %d after %s (ended: %t); stderr:\n%s", code, took.Round(time.Millisecond), ended, p.stderr.String())
				require.True(t, ended, "the command outlived its 2s deadline by more than %s while the server hung", bound)
				assert.Equal(t, tt.code, code)
				assert.Contains(t, p.stderr.String(), tt.want)
			})
		}
	}
}

// TestStopFailsOnAProcessThatIgnoresTheSignal proves the check above can
// fail: a process that ignores SIGINT is reported as not ended.
func TestStopFailsOnAProcessThatIgnoresTheSignal(t *testing.T) {
	p := startProcess(t, "sh", "-c", `trap "" INT; echo ready; sleep 30`)
	require.Eventually(t, func() bool { return strings.Contains(p.stdout.String(), "ready") }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	_, took, ended := p.endsWithin(bound)
	assert.False(t, ended, "a process ignoring SIGINT ended after %s", took)
}
