package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestRebalanceResolution names workloads every way kubectl users do:
// selectors across namespaces, --all in a namespace, several names of one
// type, and directories of manifests holding Lists, several documents and a
// WorkloadRebalancer.
func TestRebalanceResolution(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const nsA, nsB, nsEmpty = "rb-sel-a", "rb-sel-b", "rb-sel-empty"
	for _, ns := range []string{nsA, nsB, nsEmpty} {
		fixtures.TestNamespace(ctx, t, c, ns)
	}
	selected := map[string]string{"rebalance-e2e": "selector"}
	deployWithPolicy(ctx, t, c, nsA, "a-selected", selected, []string{"member1", "member2"}, "a1")
	deployWithPolicy(ctx, t, c, nsA, "a-other", nil, []string{"member1", "member2"}, "a2")
	deployWithPolicy(ctx, t, c, nsB, "b-selected", selected, []string{"member2", "member3"}, "b1")

	t.Run("selector in all namespaces", func(t *testing.T) {
		res := rebalanceCmd(t, cp, "deployments", "-l", "rebalance-e2e=selector", "-A")
		require.Equal(t, cmd.ExitOK, res.code)
		lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
		require.Len(t, lines, 3)
		assert.Equal(t, []string{"NAMESPACE", "WORKLOAD"}, fixtures.SplitCells(lines[0])[:2])
		assert.Equal(t, []string{nsA, "deployment.apps/a1", "Successful", "Scheduled"}, fixtures.SplitCells(lines[1])[:4])
		assert.Equal(t, []string{nsB, "deployment.apps/b1", "Successful", "Scheduled"}, fixtures.SplitCells(lines[2])[:4])
	})

	t.Run("all of a type in a namespace", func(t *testing.T) {
		res := rebalanceCmd(t, cp, "deployments", "--all", "-n", nsA, "-o", "name", "--wait=false")
		require.Equal(t, cmd.ExitOK, res.code)
		assert.Equal(t, "deployment.apps/a1\ndeployment.apps/a2\n", res.stdout)
	})

	t.Run("several names of one type and a fully qualified type", func(t *testing.T) {
		res := rebalanceCmd(t, cp, "deployments.v1.apps", "a2", "a1", "-n", nsA, "-o", "name", "--no-headers")
		require.Equal(t, cmd.ExitOK, res.code)
		assert.Equal(t, "deployment.apps/a1\ndeployment.apps/a2\n", res.stdout)
	})

	t.Run("no headers", func(t *testing.T) {
		res := rebalanceCmd(t, cp, "deploy/a1", "-n", nsA, "--no-headers", "--wait=false")
		require.Equal(t, cmd.ExitOK, res.code)
		assert.True(t, strings.HasPrefix(res.stdout, "deployment.apps/a1 "), res.stdout)
	})

	t.Run("nothing selected", func(t *testing.T) {
		res := rebalanceCmd(t, cp, "deployments", "--all", "-n", nsEmpty)
		require.Equal(t, cmd.ExitOK, res.code)
		assert.Empty(t, res.stdout)
		assert.Equal(t, "No resources found in rb-sel-empty namespace.\n", res.stderr)
	})

	t.Run("files and directories", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "nested"), 0o755))
		// Two documents, one of them a List, and objects without a
		// namespace that take the one of -n or the kubeconfig.
		require.NoError(t, writeFile(filepath.Join(dir, "apps.yaml"), []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: a1
  namespace: rb-sel-a
---
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: b1
    namespace: rb-sel-b
`)))
		require.NoError(t, writeFile(filepath.Join(dir, "nested", "rebalancer.yaml"), []byte(`apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata:
  name: from-a-file
spec:
  workloads:
  - apiVersion: apps/v1
    kind: Deployment
    namespace: rb-sel-a
    name: a2
  - apiVersion: apps/v1
    kind: Deployment
    namespace: rb-sel-a
    name: a1
`)))
		// The one-write move: a make-before-break move waits for the new
		// replicas and the scheduler even with --wait=false (it cannot move
		// without), and would count as rescheduled.
		res := rebalanceCmd(t, cp, "-f", dir, "-R", "-o", "name", "--wait=false", "--max-unavailable=100%")
		require.Equal(t, cmd.ExitOK, res.code)
		assert.Equal(t, "deployment.apps/a1\ndeployment.apps/a2\ndeployment.apps/b1\n", res.stdout, "one row per workload, a1 named twice")
		assert.Equal(t, "3 workloads: 3 successful, 0 failed, 0 pending; 0 rescheduled, 0 ignored\n", res.stderr)

		// Without -R the nested rebalancer is not read.
		res = rebalanceCmd(t, cp, "-f", dir, "-o", "name", "--wait=false", "--max-unavailable=100%")
		require.Equal(t, cmd.ExitOK, res.code)
		assert.Equal(t, "deployment.apps/a1\ndeployment.apps/b1\n", res.stdout)
	})
}
