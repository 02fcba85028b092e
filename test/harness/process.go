package harness

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one control-plane binary running in its own process group.
type process struct {
	name    string
	binary  string
	args    []string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// logTail returns the last lines of the process log, for error messages.
func (p *process) logTail(lines int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	var ring []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		ring = append(ring, sc.Text())
		if len(ring) > lines {
			ring = ring[1:]
		}
	}
	return strings.Join(ring, "\n")
}

// stop asks the process group to terminate and kills it when it does not.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// startProcess runs binary with args, its output going to logs/NAME.log.
// Pdeathsig makes the kernel kill the child if the harness process dies
// without calling Stop (a test binary killed on timeout, say).
func (cp *ControlPlane) startProcess(name, binary string, args ...string) (*process, error) {
	return cp.startProcessEnv(name, binary, nil, args...)
}

// startProcessEnv is startProcess with variables added to the environment.
func (cp *ControlPlane) startProcessEnv(name, binary string, env []string, args ...string) (*process, error) {
	logPath := filepath.Join(cp.Dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = cp.Dir
	cmd.Env = append(append(os.Environ(), "HOME="+cp.Dir), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, binary: binary, args: args, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	cp.mu.Lock()
	cp.processes = append(cp.processes, p)
	cp.mu.Unlock()
	return p, nil
}

// waitReady polls check until it succeeds, the process exits, or the timeout passes.
func waitReady(ctx context.Context, p *process, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited before it was ready (%v); last log lines:\n%s", p.name, p.waitErr, p.logTail(20))
		}
		if time.Now().After(deadline) {
			tail := ""
			if p != nil {
				tail = "; last log lines:\n" + p.logTail(20)
			}
			return fmt.Errorf("%s not ready after %s: %v%s", nameOf(p), timeout, last, tail)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nameOf(p *process) string {
	if p == nil {
		return "component"
	}
	return p.name
}

// httpCheck returns a readiness probe that expects 200 from url.
func httpCheck(client *http.Client, url string) func() error {
	return func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// tlsCheck returns a probe that completes a TLS handshake on addr, for
// servers without a health endpoint.
func tlsCheck(addr string) func() error {
	return func() error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe only
		if err != nil {
			return err
		}
		return conn.Close()
	}
}

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

// Ports come from below the Linux ephemeral range so that outgoing
// connections never steal one between the check and the bind.
const (
	portMin = 20000
	portMax = 31999
)

// freePort picks a random port on 127.0.0.1 that no socket uses in any state
// and that binds right now.
func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 2000 {
		port := portMin + rand.IntN(portMax-portMin+1)
		if portsUsed[port] || portInUse(port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		portsUsed[port] = true
		return port, nil
	}
	return 0, errors.New("no free port between 20000 and 31999 on 127.0.0.1")
}

// portInUse reports whether any TCP socket (listening, connected, TIME_WAIT...)
// has port as its local port.
func portInUse(port int) bool {
	hexPort := fmt.Sprintf(":%04X", port)
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) > 1 && strings.HasSuffix(fields[1], hexPort) {
				return true
			}
		}
	}
	return false
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
