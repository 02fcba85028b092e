package e2e

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestRebalanceErrors checks that bad input and a wrong or insufficient
// connection end in one actionable line and exit code 1, and write nothing.
func TestRebalanceErrors(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "rb-errors"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "app", nil, []string{"member1", "member2"}, "app")
	before := fixtures.WaitScheduled(ctx, t, c, ns, "app-deployment")

	// "reader" may read bindings but not write them; "nobody" may do nothing.
	_, err := c.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "binding-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"work.karmada.io"}, Resources: []string{"resourcebindings"},
			Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "binding-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "binding-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "reader"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	dir := t.TempDir()
	malformed := filepath.Join(dir, "malformed.yaml")
	require.NoError(t, writeFile(malformed, []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n    namespace: rb-errors\n")))
	noNamespace := filepath.Join(dir, "rebalancer.yaml")
	require.NoError(t, writeFile(noNamespace, []byte(`apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata:
  name: missing-namespace
spec:
  workloads:
  - apiVersion: apps/v1
    kind: Deployment
    name: app
`)))
	noKind := filepath.Join(dir, "nokind.yaml")
	require.NoError(t, writeFile(noKind, []byte("apiVersion: apps/v1\nmetadata:\n  name: app\n")))
	member1 := cp.Member("member1")
	require.NotNil(t, member1)

	tests := []struct {
		name string
		args []string
		want string
	}{
		{
			name: "unknown resource type",
			args: []string{"frobnicators/x", "-n", ns},
			want: `^error: unknown resource type "frobnicators": the API server behind context "karmada-apiserver" does not serve it; run 'kubectl api-resources --context karmada-apiserver' to list the types it serves\n$`,
		},
		{
			name: "not a Karmada control plane",
			args: []string{"deploy/app", "-n", ns, "--karmada-context", "member1"},
			want: `^error: the cluster behind context "member1" \(` + regexp.QuoteMeta(member1.Endpoint) + `\) is not a Karmada control plane: resourcebindings.work.karmada.io is not served; point --karmada-context or --kubeconfig at the Karmada apiserver\n$`,
		},
		{
			name: "malformed file",
			args: []string{"-f", malformed},
			want: `^error: cannot parse ` + regexp.QuoteMeta(malformed) + `: .*line 5.*; fix the file and run the command again\n$`,
		},
		{
			name: "manifest without a kind",
			args: []string{"-f", noKind},
			want: `^error: cannot read "` + regexp.QuoteMeta(noKind) + `": an object in it has no kind; give every manifest its apiVersion and kind\n$`,
		},
		{
			name: "namespaced kind without a namespace",
			args: []string{"-f", noNamespace},
			want: `^error: workloadrebalancer "missing-namespace" in ` + regexp.QuoteMeta(noNamespace) + `: spec.workloads\[0\] \(apps/v1 Deployment app\): Deployment is namespaced, so the entry needs a namespace; fix the manifest and run the command again\n$`,
		},
		{
			name: "names across all namespaces",
			args: []string{"deploy/app", "-A"},
			want: `^error: workloads named one by one cannot be combined with --all-namespaces: give their namespace with -n, or select them with -l or --all\n$`,
		},
		{
			name: "type without names",
			args: []string{"deployments", "-n", ns},
			want: `^error: a resource type alone selects nothing: add names, -l SELECTOR or --all \(e.g. kubectl rebalance deployments --all\)\n$`,
		},
		{
			name: "no permission to read bindings",
			args: []string{"deploy/app", "-n", ns, "--as", "nobody"},
			want: `^error: not allowed to get resourcebindings.work.karmada.io in namespace "rb-errors" with context "karmada-apiserver": .*User "nobody" cannot get resource "resourcebindings".*; ask an administrator of the Karmada control plane to grant "get" on resourcebindings.work.karmada.io\n$`,
		},
		{
			name: "no permission to write bindings",
			args: []string{"deploy/app", "-n", ns, "--as", "reader"},
			want: `^error: not allowed to patch resourcebindings.work.karmada.io in namespace "rb-errors" with context "karmada-apiserver": .*User "reader" cannot patch resource "resourcebindings".*; ask an administrator of the Karmada control plane to grant "patch" on resourcebindings.work.karmada.io\n$`,
		},
		{
			name: "no permission to list workloads",
			args: []string{"deployments", "--all", "-n", ns, "--as", "reader"},
			want: `^error: not allowed to list deployments.apps in namespace "rb-errors" with context "karmada-apiserver" \(https://127.0.0.1:\d+\): .*User "reader" cannot list resource "deployments".*; ask an administrator of the Karmada control plane to grant "list" on deployments.apps\n$`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := rebalanceCmd(t, cp, tt.args...)
			assert.Equal(t, cmd.ExitError, res.code)
			assert.Empty(t, res.stdout)
			assert.Regexp(t, tt.want, res.stderr)
			assert.NotContains(t, res.stderr, "goroutine")
		})
	}

	after, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Get(ctx, "app-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	if before.Generation != after.Generation {
		for _, f := range after.ManagedFields {
			t.Logf("binding field manager %s %s at %s: %s", f.Manager, f.Operation, f.Time, f.FieldsV1)
		}
		t.Logf("spec before: %+v\nspec after: %+v", before.Spec, after.Spec)
	}
	assert.Equal(t, before.Generation, after.Generation, "no error case wrote to the binding")
	assert.Nil(t, after.Spec.RescheduleTriggeredAt)
}

// TestRebalanceTimeoutLeavesPending checks exit code 3: a timeout too short
// for any request leaves the workload pending and says so.
func TestRebalanceTimeoutLeavesPending(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "rb-timeout"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "slow", nil, []string{"member1", "member2"}, "slow")

	// --timeout bounds the whole run, the first request included: 1ms runs
	// out at discovery, before any binding is read, and says so.
	res := rebalanceCmd(t, cp, "deploy/slow", "-n", ns, "--timeout", "1ms", "-o", "wide")
	assert.Equal(t, cmd.ExitPending, res.code)
	assert.Empty(t, res.stdout)
	assert.Contains(t, res.stderr, "--timeout 1ms ran out before any binding was read")
	assert.Contains(t, res.stderr, "nothing was written, run the command again with a longer --timeout")
}
