package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// readClusterRole reads the ClusterRole in a file under deploy/.
func readClusterRole(t *testing.T, path string) *rbacv1.ClusterRole {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", path))
	require.NoError(t, err)
	role := &rbacv1.ClusterRole{}
	require.NoError(t, yaml.UnmarshalStrict(data, role))
	return role
}

// without returns role less one verb of one rule, or nil when that leaves
// the rule empty and it is dropped.
func without(role *rbacv1.ClusterRole, rule int, verb string) *rbacv1.ClusterRole {
	r := role.DeepCopy()
	var verbs []string
	for _, v := range r.Rules[rule].Verbs {
		if v != verb {
			verbs = append(verbs, v)
		}
	}
	r.Rules[rule].Verbs = verbs
	if len(verbs) == 0 {
		r.Rules = append(r.Rules[:rule], r.Rules[rule+1:]...)
	}
	return r
}

// TestPeopleRBAC applies deploy/rbac/kubectl-rebalance.yaml to the real
// Karmada apiserver and runs, impersonating a user bound to it, a plain
// rebalance, a recorded one with a TTL, `get` and `plan`: all work. Then,
// for every verb of every rule in turn, a user bound to the role without
// that verb runs the same commands: one of them fails, with an error that
// names the refused request (verb and resource) and the identity, unless
// the role's comments call the verb optional, in which case every command
// still works.
func TestPeopleRBAC(t *testing.T) {
	cp := harness.Require(t)
	ctx := fixtures.TestContext(t)
	c := fixtures.TestClients(t, cp.Karmada)
	const ns = "people-rbac"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "people", nil, []string{"member1", "member2"}, "web")

	role := readClusterRole(t, "deploy/rbac/kubectl-rebalance.yaml")
	bind := func(name string, r *rbacv1.ClusterRole) string {
		r = r.DeepCopy()
		r.Name = name
		r.ResourceVersion = ""
		user := name + "@example.com"
		_ = c.Kube.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
		_ = c.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = c.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
			_ = c.Kube.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
		})
		return user
	}

	// The commands a person runs, cheapest first.
	record := 0
	commands := []struct {
		name string
		args func() []string
	}{
		{"get", func() []string { return []string{"get"} }},
		{"plan", func() []string { return []string{"plan", "deploy/web", "-n", ns} }},
		{"plain", func() []string { return []string{"deploy/web", "-n", ns} }},
		{"selector", func() []string { return []string{"deployments", "-l", "app=web", "-n", ns} }},
		{"recorded", func() []string {
			record++
			// Karmada's own controller runs here and deletes a record as
			// soon as its TTL has passed; a TTL longer than the run keeps it
			// from deleting the record under the command, which leaves the
			// deletion to that controller.
			return []string{"deploy/web", "-n", ns, "--name", fmt.Sprintf("people-rbac-%d", record), "--ttl", "30", "--wait-ttl=false"}
		}},
	}
	as := func(user string, args []string) commandResult {
		return rebalanceCmd(t, cp, append([]string{"--as", user, "--as-group", "system:authenticated"}, args...)...)
	}

	full := bind("e2e-people-full", role)
	time.Sleep(time.Second) // the authorizer's informers catch up
	for _, command := range commands {
		res := as(full, command.args())
		require.Equal(t, cmd.ExitOK, res.code, "%s with the full role: %s", command.name, res.stderr)
	}

	// The verbs the role's comments call optional: the commands work without
	// them, in a degraded way (polling instead of watching; Karmada's own
	// WorkloadRebalancer controller, which this control plane runs, writing
	// the status and deleting after the TTL; failure reasons only from the
	// binding's condition).
	optional := map[string]bool{
		"watch resourcebindings,clusterresourcebindings": true,
		"list events":                       true,
		"update workloadrebalancers":        true,
		"delete workloadrebalancers":        true,
		"watch workloadrebalancers":         true,
		"update workloadrebalancers/status": true,
	}
	for i, rule := range role.Rules {
		for _, verb := range rule.Verbs {
			label := fmt.Sprintf("%s %s", verb, strings.Join(rule.Resources, ","))
			t.Run(label, func(t *testing.T) {
				name := fmt.Sprintf("e2e-people-minus-%d-%s", i, verb)
				user := bind(name, without(role, i, verb))
				time.Sleep(time.Second)
				for _, command := range commands {
					res := as(user, command.args())
					if optional[label] {
						assert.Equal(t, cmd.ExitOK, res.code, "without the optional %s, %s still works: %s", label, command.name, res.stderr)
						continue
					}
					if res.code == cmd.ExitOK {
						continue
					}
					assert.NotEqual(t, 0, res.code)
					assert.Contains(t, res.stderr, user, "%s: the error names the identity refused", command.name)
					assert.Regexp(t, "(?i)forbidden|not allowed|cannot", res.stderr)
					named := false
					for _, r := range rule.Resources {
						named = named || strings.Contains(res.stderr, strings.TrimSuffix(r, "/status"))
					}
					assert.True(t, named, "%s: the error names the resource:\n%s", command.name, res.stderr)
					t.Logf("without %s, %s fails (exit %d): %s", label, command.name, res.code, strings.TrimSpace(res.stderr))
					return
				}
				if !optional[label] {
					t.Errorf("every command works without %s: the role grants more than it needs", label)
				}
			})
		}
	}
}
