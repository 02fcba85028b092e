package noestimator

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
)

// daemonRules reads the rules of kind (ClusterRole or Role) in path.
func daemonRules(t *testing.T, path, kind string) []rbacv1.PolicyRule {
	t.Helper()
	for _, obj := range readManifest(t, path) {
		if obj.GetKind() != kind {
			continue
		}
		var role rbacv1.ClusterRole
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role))
		return role.Rules
	}
	t.Fatalf("no %s in %s", kind, path)
	return nil
}

// minus returns rules less verb in rule i.
func minus(rules []rbacv1.PolicyRule, i int, verb string) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	for j, r := range rules {
		r = *r.DeepCopy()
		if j == i {
			var verbs []string
			for _, v := range r.Verbs {
				if v != verb {
					verbs = append(verbs, v)
				}
			}
			r.Verbs = verbs
			if len(verbs) == 0 {
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// TestDescheduleRBACEachPermission grants a user the daemon's permissions of
// deploy/karmada/rbac.yaml (the Lease Role in the test's namespace) and
// deploy/members/rbac.yaml, less one verb at a time, and shows what that
// verb is for: without it a pass (or the daemon) fails with an error naming
// the refused request, or, for events, the pass still writes and says which
// events it could not record. Two verbs are left out, as the role says: get
// on resourcebindings (only read again after a conflict) and update on the
// Lease (only to renew it).
func TestDescheduleRBACEachPermission(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "rbac-minus")
	e.stuck("member1", 1, "web")
	clusterRules := daemonRules(t, "deploy/karmada/rbac.yaml", "ClusterRole")
	leaseRules := daemonRules(t, "deploy/karmada/rbac.yaml", "Role")
	memberRules := daemonRules(t, "deploy/members/rbac.yaml", "ClusterRole")
	ctx := e.Ctx

	// The member side, for every user of this test.
	const memberRole = "e2e-deschedule-minus-member"
	for _, m := range e.CP.Members {
		member, err := kubernetes.NewForConfig(m.Config)
		require.NoError(t, err)
		_ = member.RbacV1().ClusterRoles().Delete(ctx, memberRole, metav1.DeleteOptions{})
		_, err = member.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: memberRole}, Rules: memberRules}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = member.RbacV1().ClusterRoles().Delete(context.Background(), memberRole, metav1.DeleteOptions{})
		})
	}
	grant := func(user string, cluster, lease []rbacv1.PolicyRule) {
		name := strings.TrimSuffix(user, "@example.com")
		kube := e.C.Kube
		subject := []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}
		_ = kube.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
		_ = kube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: cluster}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}, Subjects: subject}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kube.RbacV1().Roles(e.NS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: lease}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kube.RbacV1().RoleBindings(e.NS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}, Subjects: subject}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		for _, m := range e.CP.Members {
			member, err := kubernetes.NewForConfig(m.Config)
			require.NoError(t, err)
			_ = member.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
			_, err = member.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: memberRole}, Subjects: subject}, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = member.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		}
		time.Sleep(time.Second) // the authorizers' informers catch up
	}
	as := func(user string) []string {
		return []string{"--as", user, "--as-group", "system:authenticated", "-n", e.NS}
	}

	// The whole role works: a dry-run pass with -l that would move web.
	full := "e2e-deschedule-full@example.com"
	grant(full, clusterRules, leaseRules)
	code, _, stderr := e.Run(append(as(full), "--dry-run=client", "-l", "app=web", "--unschedulable-threshold=0s")...)
	require.Equal(t, cmd.ExitOK, code, stderr)

	for i, rule := range clusterRules {
		for _, verb := range rule.Verbs {
			label := verb + " " + strings.Join(rule.Resources, ",")
			if label == "get resourcebindings" {
				continue
			}
			t.Run(label, func(t *testing.T) {
				user := fmt.Sprintf("e2e-deschedule-minus-%d-%s@example.com", i, verb)
				grant(user, minus(clusterRules, i, verb), leaseRules)
				args := append(as(user), "--unschedulable-threshold=0s", "--dry-run=server")
				switch label {
				case "list jobs":
					// A pass lists the templates of its bindings' kinds only,
					// and this scenario has no Job binding.
					t.Skip("jobs are listed only for Job bindings, and this scenario has none")
				case "list deployments":
					args = append(args, "-l", "app=web")
				case "create events":
					args = append(as(user), "--unschedulable-threshold=0s") // a real write, so that events follow
				}
				code, _, stderr := e.Run(args...)
				t.Logf("without %s: exit %d\n%s", label, code, stderr)
				if label == "create events" {
					assert.Equal(t, cmd.ExitOK, code, "the binding is written; only its events are refused")
					assert.Contains(t, stderr, "warning: the events of binding "+e.NS+"/web-deployment were not recorded")
					assert.Contains(t, stderr, user)
					return
				}
				assert.NotEqual(t, cmd.ExitOK, code)
				assert.Contains(t, stderr, user, "the error names the identity refused")
				assert.Contains(t, stderr, strings.Split(rule.Resources[0], "/")[0])
			})
		}
	}

	for i, rule := range leaseRules {
		for _, verb := range rule.Verbs {
			label := verb + " leases"
			if verb == "update" {
				continue
			}
			t.Run(label, func(t *testing.T) {
				user := fmt.Sprintf("e2e-deschedule-minus-lease-%d-%s@example.com", i, verb)
				grant(user, clusterRules, minus(leaseRules, i, verb))
				d := e.startDaemon("minus-"+verb, append(as(user), "--dry-run=client", "--interval=1h",
					"--leader-elect-resource-namespace", e.NS, "--leader-elect-identity=minus-"+verb)...)
				switch verb {
				case "get":
					// The check for a running karmada-descheduler reads the Lease first.
					select {
					case <-d.done:
					case <-time.After(time.Minute):
						t.Fatalf("the daemon did not stop:\n%s", d.stderr.String())
					}
					assert.Equal(t, cmd.ExitError, d.code)
					assert.Contains(t, d.stderr.String(), "cannot read lease "+e.NS+"/karmada-descheduler")
					assert.Contains(t, d.stderr.String(), user)
				case "create":
					// Like every Kubernetes component, it keeps trying, says why, and never passes.
					e.Eventually("the refused Lease logged", func() (bool, string) {
						s := d.stderr.String()
						return strings.Contains(s, "forbidden") && strings.Contains(s, "leases"), "not yet"
					})
					assert.Empty(t, d.logged("pass finished"))
					assert.Contains(t, d.stderr.String(), user)
					assert.Equal(t, 0, d.stop(syscall.SIGTERM, 30*time.Second))
				}
			})
		}
	}
}
