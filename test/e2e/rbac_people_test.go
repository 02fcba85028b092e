package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

// peopleCommand is a command a person runs, given the run's sequence number
// (records need names of their own).
type peopleCommand struct {
	name string
	args func(run int) []string
}

// TestPeopleRBAC applies deploy/rbac/kubectl-rebalance.yaml and
// kubectl-rebalance-optional.yaml to the real Karmada apiserver and runs
// the commands as users bound to them (impersonation):
//   - kubectl-rebalance alone runs a plain rebalance, a -l selection, `get`,
//     `plan` and a recorded run left to Karmada's controller; without any one
//     of its verbs, one of them fails with an error that names the refused
//     request (verb and resource) and the identity;
//   - with kubectl-rebalance-optional too, the recorded runs that keep their
//     record from the client work as well: waiting out a TTL, re-applying a
//     changed WorkloadRebalancer manifest. Without its watch or update on
//     workloadrebalancers they fail, with the same clear error; without its
//     delete or status update they fail the same way only when they reach the
//     record before Karmada's controller (which deletes and writes statuses
//     too); without its other verbs they still work (polling instead of
//     watching, no failure events).
func TestPeopleRBAC(t *testing.T) {
	cp := harness.Require(t)
	ctx := fixtures.TestContext(t)
	c := fixtures.TestClients(t, cp.Karmada)
	const ns = "people-rbac"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "people", nil, []string{"member1", "member2"}, "web")

	base := readClusterRole(t, "deploy/rbac/kubectl-rebalance.yaml")
	optional := readClusterRole(t, "deploy/rbac/kubectl-rebalance-optional.yaml")
	require.Equal(t, "kubectl-rebalance", base.Name)
	require.Equal(t, "kubectl-rebalance-optional", optional.Name)
	rebalancers := c.Karmada.AppsV1alpha1().WorkloadRebalancers()

	// bind grants the roles to a user of their own and returns the user.
	bind := func(name string, roles ...*rbacv1.ClusterRole) string {
		user := name + "@example.com"
		for i, r := range roles {
			r = r.DeepCopy()
			r.Name = fmt.Sprintf("%s-%d", name, i)
			r.ResourceVersion = ""
			_ = c.Kube.RbacV1().ClusterRoles().Delete(ctx, r.Name, metav1.DeleteOptions{})
			_ = c.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, r.Name, metav1.DeleteOptions{})
			_, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{})
			require.NoError(t, err)
			_, err = c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: r.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: r.Name},
				Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = c.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, r.Name, metav1.DeleteOptions{})
				_ = c.Kube.RbacV1().ClusterRoles().Delete(ctx, r.Name, metav1.DeleteOptions{})
			})
		}
		time.Sleep(time.Second) // the authorizer's informers catch up
		return user
	}
	record := func(prefix string, run int) string {
		name := fmt.Sprintf("people-%s-%d", prefix, run)
		t.Cleanup(func() { _ = rebalancers.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		return name
	}

	// The commands of the base role, cheapest first.
	baseCommands := []peopleCommand{
		{"get", func(int) []string { return []string{"get"} }},
		{"plan", func(int) []string { return []string{"plan", "deploy/web", "-n", ns} }},
		{"plain", func(int) []string { return []string{"deploy/web", "-n", ns} }},
		{"selector", func(int) []string { return []string{"deployments", "-l", "app=web", "-n", ns} }},
		{"recorded, left to Karmada's controller", func(run int) []string {
			// A TTL longer than the run keeps Karmada's controller from
			// deleting the record under the command.
			return []string{"deploy/web", "-n", ns, "--name", record("left", run), "--ttl", "30", "--wait-ttl=false"}
		}},
	}
	// The recorded runs that keep their record from the client.
	manifests := t.TempDir()
	recordCommands := []peopleCommand{
		{"recorded, waiting out its ttl", func(run int) []string {
			// Long enough for the run to end and its watch to start before
			// Karmada's controller deletes the record. --wait-ttl: without
			// it a run leaves a record the controller handles to the
			// controller, and never watches it.
			return []string{"deploy/web", "-n", ns, "--name", record("ttl", run), "--ttl", "10", "--wait-ttl"}
		}},
		{"changed manifest re-applied", func(run int) []string {
			name := record("apply", run)
			_, err := rebalancers.Create(ctx, &appsv1alpha1.WorkloadRebalancer{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: appsv1alpha1.WorkloadRebalancerSpec{
					Workloads:               []appsv1alpha1.ObjectReference{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}},
					TTLSecondsAfterFinished: ptr.To[int32](600),
				},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			path := filepath.Join(manifests, name+".yaml")
			require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata:
  name: %s
spec:
  ttlSecondsAfterFinished: 300
  workloads:
  - {apiVersion: apps/v1, kind: Deployment, namespace: %s, name: web}
`, name, ns), 0o600))
			return []string{"-f", path, "--wait-ttl=false"}
		}},
	}
	run := 0
	as := func(user string, command peopleCommand) commandResult {
		run++
		return rebalanceCmd(t, cp, append([]string{"--as", user, "--as-group", "system:authenticated"}, command.args(run)...)...)
	}
	// refused checks that a failed command says which request of which rule
	// was refused, and to whom.
	refused := func(t *testing.T, user string, rule rbacv1.PolicyRule, command peopleCommand, res commandResult) {
		t.Helper()
		assert.NotEqual(t, 0, res.code)
		assert.Contains(t, res.stderr, user, "%s: the error names the identity refused", command.name)
		assert.Regexp(t, "(?i)forbidden|not allowed|cannot", res.stderr)
		named := false
		for _, r := range rule.Resources {
			named = named || strings.Contains(res.stderr, strings.TrimSuffix(r, "/status"))
		}
		assert.True(t, named, "%s: the error names the resource:\n%s", command.name, res.stderr)
	}

	baseOnly := bind("e2e-people-base", base)
	for _, command := range baseCommands {
		res := as(baseOnly, command)
		require.Equal(t, cmd.ExitOK, res.code, "%s with the kubectl-rebalance role: %s", command.name, res.stderr)
	}
	both := bind("e2e-people-both", base, optional)
	for _, command := range append(slices.Clone(baseCommands), recordCommands...) {
		res := as(both, command)
		require.Equal(t, cmd.ExitOK, res.code, "%s with both roles: %s", command.name, res.stderr)
	}

	// kubectl-rebalance is least privilege: every verb is needed.
	for i, rule := range base.Rules {
		for _, verb := range rule.Verbs {
			label := fmt.Sprintf("%s %s", verb, strings.Join(rule.Resources, ","))
			t.Run("kubectl-rebalance without "+label, func(t *testing.T) {
				user := bind(fmt.Sprintf("e2e-people-minus-%d-%s", i, verb), without(base, i, verb))
				for _, command := range baseCommands {
					if res := as(user, command); res.code != cmd.ExitOK {
						refused(t, user, rule, command, res)
						t.Logf("without %s, %s fails (exit %d): %s", label, command.name, res.code, strings.TrimSpace(res.stderr))
						return
					}
				}
				t.Errorf("every command works without %s: the role grants more than it needs", label)
			})
		}
	}

	// kubectl-rebalance-optional: the record commands need its watch and
	// patch on workloadrebalancers. Its delete and status patch race
	// Karmada's controller, which deletes expired records and writes
	// statuses too: a run fails without them only when it gets there first
	// (a re-applied manifest, with nothing to wait for, usually writes its
	// status first). The rest only changes how the commands work.
	needed := map[string]bool{"watch workloadrebalancers": true, "patch workloadrebalancers": true}
	racesController := map[string]bool{"delete workloadrebalancers": true, "patch workloadrebalancers/status": true}
	for i, rule := range optional.Rules {
		for _, verb := range rule.Verbs {
			label := fmt.Sprintf("%s %s", verb, strings.Join(rule.Resources, ","))
			t.Run("kubectl-rebalance-optional without "+label, func(t *testing.T) {
				user := bind(fmt.Sprintf("e2e-people-optional-minus-%d-%s", i, verb), base, without(optional, i, verb))
				failed := false
				for _, command := range recordCommands {
					res := as(user, command)
					switch {
					case res.code == cmd.ExitOK:
					case needed[label]:
						refused(t, user, rule, command, res)
						t.Logf("without %s, %s fails (exit %d): %s", label, command.name, res.code, strings.TrimSpace(res.stderr))
						failed = true
					case racesController[label]:
						refused(t, user, rule, command, res)
						t.Logf("without %s, %s failed: it got to the record before Karmada's controller did", label, command.name)
					default:
						t.Errorf("without the optional %s, %s fails: %s", label, command.name, res.stderr)
					}
				}
				if needed[label] && !failed {
					t.Errorf("every command works without %s: the optional role grants more than it needs", label)
				}
			})
		}
	}
}
