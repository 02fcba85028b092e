package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestRebalanceAsKubectlPlugin runs the built binary the way users do, as
// `kubectl rebalance`, and feeds its -o yaml to `kubectl apply`.
func TestRebalanceAsKubectlPlugin(t *testing.T) {
	cp := harness.Require(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH")
	}
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "rb-plugin"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "web", nil, []string{"member1", "member2"}, "web")

	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, "kubectl-rebalance"), "../../cmd/kubectl-rebalance")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	run := func(stdin []byte, args ...string) commandResult {
		t.Helper()
		command := exec.CommandContext(ctx, kubectl, args...)
		command.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+cp.Kubeconfig,
			"KUBECACHEDIR="+t.TempDir())
		command.Stdin = bytes.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		command.Stdout, command.Stderr = &stdout, &stderr
		err := command.Run()
		res := commandResult{stdout: stdout.String(), stderr: stderr.String()}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			res.code = exit.ExitCode()
		} else {
			require.NoError(t, err)
		}
		t.Logf("kubectl %s\nexit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
		return res
	}

	res := run(nil, "rebalance", "deploy/web", "-n", ns, "-o", "yaml")
	require.Equal(t, cmd.ExitOK, res.code)
	applied := run([]byte(res.stdout), "apply", "-f", "-")
	require.Equal(t, 0, applied.code)
	assert.Contains(t, applied.stdout, "workloadrebalancer.apps.karmada.io/rebalance-")
	name := strings.Fields(strings.TrimPrefix(applied.stdout, "workloadrebalancer.apps.karmada.io/"))[0]
	rebalancers := c.Karmada.AppsV1alpha1().WorkloadRebalancers()
	t.Cleanup(func() { _ = rebalancers.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := rebalancers.Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(got.Status.ObservedWorkloads) == 1 && got.Status.ObservedWorkloads[0].Result == appsv1alpha1.RebalanceSuccessful, err
	}), "Karmada's controller processed the applied object")

	// A manifest on stdin, and JSON out.
	manifest := []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: rb-plugin
`)
	fromStdin := run(manifest, "rebalance", "-f", "-", "-o", "json", "--wait=false")
	require.Equal(t, cmd.ExitOK, fromStdin.code)
	var printed appsv1alpha1.WorkloadRebalancer
	require.NoError(t, json.Unmarshal([]byte(fromStdin.stdout), &printed))
	assert.Equal(t, []appsv1alpha1.ObjectReference{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}}, printed.Spec.Workloads)
	require.Len(t, printed.Status.ObservedWorkloads, 1)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, printed.Status.ObservedWorkloads[0].Result)

	// Exit codes pass through kubectl.
	missing := run(nil, "rebalance", "deploy/ghost", "-n", ns)
	assert.Equal(t, cmd.ExitFailed, missing.code)
	assert.Contains(t, missing.stdout, "deployment.apps/ghost   Failed")
	usage := run(nil, "rebalance", "--dry-run=sometimes", "deploy/web")
	assert.Equal(t, cmd.ExitError, usage.code)
	assert.Equal(t, "error: invalid --dry-run \"sometimes\": use none, client or server (e.g. --dry-run=client; --dry-run alone means client)\n"+
		"See 'kubectl rebalance -h' for help and examples\n", usage.stderr)
}
