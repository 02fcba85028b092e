package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
	"github.com/stretchr/testify/require"
)

var (
	buildOnce sync.Once
	binDir    string
	binary    string
	buildErr  error
)

// pluginBinary builds kubectl-rebalance once, so that the daemons run as the
// real program in processes of their own: killed with SIGKILL, stopped with
// SIGTERM.
func pluginBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "faults-daemon-bin-"); buildErr != nil {
			return
		}
		binary, buildErr = harness.BuildPlugin(binDir)
	})
	require.NoError(tb, buildErr)
	return binary
}

// removeBinary is called by TestMain once the benchmark is done.
func removeBinary() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// lockedBuffer collects a process's output while the benchmark reads it.
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

// process is one daemon, `kubectl rebalance deschedule --interval ...`.
type process struct {
	name   string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
	// state is the process's end, once done is closed.
	state *os.ProcessState
	ended time.Time
}

// start runs the binary with args, its JSON logs collected.
func start(tb testing.TB, name, bin string, args ...string) *process {
	tb.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout = io.Discard
	p.cmd.Stderr = p.stderr
	require.NoError(tb, p.cmd.Start())
	go func() {
		defer close(p.done)
		err := p.cmd.Wait()
		p.ended = time.Now()
		var exit *exec.ExitError
		if err == nil || errors.As(err, &exit) {
			p.state = p.cmd.ProcessState
		}
	}()
	tb.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exit describes how the process ended.
func (p *process) exit() string {
	switch {
	case !p.exited():
		return "running"
	case p.state == nil:
		return "unknown"
	case p.state.Exited():
		return fmt.Sprintf("exit %d", p.state.ExitCode())
	default:
		return p.state.String() // "signal: killed"
	}
}

// signal sends sig and waits up to timeout for the process to end; it
// returns how long the process took.
func (p *process) signal(tb testing.TB, sig os.Signal, timeout time.Duration) time.Duration {
	tb.Helper()
	sent := time.Now()
	require.NoError(tb, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
		return p.ended.Sub(sent)
	case <-time.After(timeout):
		tb.Fatalf("daemon %s still running %s after %s; logs:\n%s", p.name, timeout, sig, p.stderr.String())
		return 0
	}
}

// logs decodes the daemon's JSON log lines so far.
func (p *process) logs() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			out = append(out, line)
		}
	}
	return out
}

// count returns how many log lines have message msg.
func (p *process) count(msg string) int {
	n := 0
	for _, l := range p.logs() {
		if l["msg"] == msg {
			n++
		}
	}
	return n
}

// last returns the last log line with message msg, or nil.
func (p *process) last(msg string) map[string]any {
	var found map[string]any
	for _, l := range p.logs() {
		if l["msg"] == msg {
			found = l
		}
	}
	return found
}

// tail returns the last lines of the daemon's log.
func (p *process) tail(lines int) string {
	parts := strings.Split(strings.TrimRight(p.stderr.String(), "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
