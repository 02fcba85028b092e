package estimator

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

type result struct {
	code           int
	stdout, stderr string
}

// run runs kubectl rebalance with args against the control plane.
func run(t *testing.T, cp *harness.ControlPlane, args ...string) result {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := cmd.NewCmdRebalance(streams)
	root.SetArgs(append([]string{"--kubeconfig", cp.Kubeconfig, "--cache-dir", t.TempDir()}, args...))
	code := cmd.Execute(root, streams)
	res := result{code: code, stdout: out.String(), stderr: errOut.String()}
	t.Logf("kubectl rebalance %s\nexit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	return res
}

// report runs kubectl rebalance with args and -o report-json and decodes it.
func report(t *testing.T, cp *harness.ControlPlane, args ...string) *rbprinters.Report {
	t.Helper()
	res := run(t, cp, append(args, "-o", "report-json")...)
	require.Equal(t, 0, res.code, res.stderr)
	r := &rbprinters.Report{}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), r), res.stdout)
	return r
}

// text prints a placement like fixtures.Placement.
func text(m map[string]int32) string {
	if m == nil {
		return "<none>"
	}
	names := make([]string, 0, len(m))
	for name, n := range m {
		if n != 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s:%d", name, m[name])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// startFailback runs kubectl rebalance failback in this process until the
// test ends.
func startFailback(t *testing.T, cp *harness.ControlPlane, args ...string) *fixtures.LogBuffer {
	t.Helper()
	logs := &fixtures.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: logs, ErrOut: logs}
	root := cmd.NewCmdRebalance(streams)
	root.SetArgs(append([]string{"failback", "--kubeconfig", cp.Kubeconfig, "--cache-dir", t.TempDir()}, args...))
	root.SetContext(ctx)
	done := make(chan int, 1)
	go func() { done <- cmd.Execute(root, streams) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			t.Logf("failback exit %d; logs:\n%s", code, logs.Text())
		case <-time.After(time.Minute):
			t.Errorf("the failback daemon did not stop; logs:\n%s", logs.Text())
		}
	})
	return logs
}
