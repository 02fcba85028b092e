package cmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// helperArgs carries the arguments of the command run by TestHelperProcess.
const helperArgs = "KUBECTL_REBALANCE_HELPER_ARGS"

// TestHelperProcess is the command as main runs it, in a process of its own,
// for tests that send it real signals. It does nothing in a normal run.
func TestHelperProcess(t *testing.T) {
	args := os.Getenv(helperArgs)
	if args == "" {
		t.Skip("started by TestCtrlC only")
	}
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	root := NewCmdRebalance(streams)
	root.SetArgs(strings.Split(args, "\n"))
	os.Exit(Execute(root, streams))
}

// TestCtrlC sends a real SIGINT to the command while the server hangs, at
// several moments, and checks the exit code and what the command says was
// and was not written, and that it ended within a bound.
func TestCtrlC(t *testing.T) {
	tests := []struct {
		name   string
		hangOn string
		args   []string
		code   int
		want   []string
		stdout []string
	}{
		{name: "first request", hangOn: "GET /api", args: []string{"deploy/web"}, code: ExitPending,
			want: []string{"interrupted before any binding was read; nothing was written"}},
		{name: "template reads", hangOn: "GET /apis/apps/v1/namespaces/default/deployments", args: []string{"deployments", "--all"}, code: ExitPending,
			want: []string{"interrupted before any binding was read; nothing was written"}},
		{name: "binding reads", hangOn: "GET " + bindingsPath, args: []string{"deploy/web"}, code: ExitPending,
			stdout: []string{"deployment.apps/web", "Pending"}, want: []string{"interrupted: 0 trigger(s) written, 1 workload(s) not triggered (pending)"}},
		{name: "get", hangOn: "GET /apis/apps.karmada.io/v1alpha1/workloadrebalancers", args: []string{"get"}, code: ExitError,
			want: []string{"error: interrupted before the Karmada apiserver answered; nothing was shown"}},
		{name: "deschedule pass", hangOn: "GET " + bindingsPath, args: []string{"deschedule"}, code: ExitFailed,
			want: []string{"error: interrupted before the bindings were listed; nothing was written"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeServer(t)
			s.on(tt.hangOn, hang)
			args := append([]string{"--kubeconfig", kubeconfigFor(t, s.URL), "--cache-dir", t.TempDir()}, tt.args...)
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
			cmd.Env = append(os.Environ(), helperArgs+"="+strings.Join(args, "\n"))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
				for _, r := range s.requests() {
					if strings.HasPrefix(r, tt.hangOn) {
						return true, nil
					}
				}
				return false, nil
			}), "the command never asked for %s", tt.hangOn)
			sent := time.Now()
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			// The server hangs until the client goes away: a command that
			// does not end its request on the signal is still running when
			// the bound is up. The bound is generous for a loaded machine;
			// a request left to client-go takes 32s.
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var err error
			select {
			case err = <-exited:
			case <-time.After(3 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
				require.FailNow(t, "SIGINT did not end the command within 3s", "stderr:\n%s", stderr.String())
			}
			t.Logf("exited %s after SIGINT; stderr:\n%s", time.Since(sent).Round(time.Millisecond), stderr.String())

			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			}
			assert.Equal(t, tt.code, code, "stderr:\n%s", stderr.String())
			assertInOrder(t, stderr.String(), tt.want)
			assertInOrder(t, stdout.String(), tt.stdout)
		})
	}
}
