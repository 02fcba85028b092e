package recorded

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestRecordBadInput checks that bad input ends in one actionable line and
// exit code 1, and creates nothing.
func TestRecordBadInput(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, empty = "rec-bad", "rec-bad-empty"
	fixtures.TestNamespace(ctx, t, c, ns)
	fixtures.TestNamespace(ctx, t, c, empty)
	rt.Deployments(ctx, t, c, ns, "web")
	before := rt.Binding(ctx, t, c, ns, "web-deployment")

	named := filepath.Join(t.TempDir(), "named.yaml")
	rt.WriteFile(t, named, "apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata:\n  name: rec-bad-named\nspec:\n  workloads:\n  - apiVersion: apps/v1\n    kind: Deployment\n    namespace: rec-bad\n    name: web\n")
	noWorkloads := filepath.Join(t.TempDir(), "empty.yaml")
	rt.WriteFile(t, noWorkloads, "apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata:\n  name: rec-bad-manifest\nspec:\n  workloads: []\n")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "negative ttl", args: []string{"deploy/web", "-n", ns, "--ttl", "-5"},
			want: `^error: invalid --ttl -5s: a ttl cannot be negative; give 0 to delete the workloadrebalancer as soon as it finished, or leave --ttl out to keep it\n`},
		{name: "ttl not an integer", args: []string{"deploy/web", "-n", ns, "--ttl", "ten"},
			want: `^error: invalid --ttl "ten": give a duration such as 30s, 5m or 1h30m, or a whole number of seconds such as 300, e.g. --ttl 5m\n`},
		{name: "empty selection", args: []string{"deployments", "--all", "-n", empty, "--name", "rec-bad-empty"},
			want: `^error: nothing to record: the selection holds no workload, and a workloadrebalancer needs at least one \(--name, --ttl or --server-side was given\); nothing was created\n$`},
		{name: "manifest without workloads", args: []string{"-f", noWorkloads},
			want: `^error: workloadrebalancer "rec-bad-manifest" in ` + regexp.QuoteMeta(noWorkloads) + ` lists no spec.workloads; add at least one workload\n$`},
		{name: "manifest and another name", args: []string{"-f", named, "--name", "other"},
			want: `^error: the manifest names workloadrebalancer rec-bad-named but --name says other; give the name in one place only\n$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := rt.Rebalance(t, cp, tt.args...)
			assert.Equal(t, cmd.ExitError, res.Code)
			assert.Empty(t, res.Stdout)
			assert.Regexp(t, tt.want, res.Stderr)
		})
	}
	list, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, rb := range list.Items {
		assert.NotContains(t, []string{"rec-bad-empty", "rec-bad-manifest", "rec-bad-named", "other"}, rb.Name, "nothing created")
	}
	assert.Equal(t, before.Generation, rt.Binding(ctx, t, c, ns, "web-deployment").Generation, "nothing triggered")
}

// TestRecordForbidden runs as users who may rebalance but lack one of the
// WorkloadRebalancer verbs: each gets a message naming the verb and the
// resource, and what is left when something was already written.
func TestRecordForbidden(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "rec-forbidden"
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, "web")

	// Every user may rebalance in the namespace; what they may do with
	// WorkloadRebalancers differs.
	grantBindings(ctx, t, c, ns, "no-create", "no-status", "no-delete")
	grantRebalancers(ctx, t, c, "no-create", "get", "list", "watch")
	grantRebalancers(ctx, t, c, "no-status", "get", "list", "watch", "create")
	grantRebalancers(ctx, t, c, "no-delete", "get", "list", "watch", "create", "patch", "status")

	t.Run("create", func(t *testing.T) {
		before := rt.Binding(ctx, t, c, ns, "web-deployment")
		res := rt.Rebalance(t, cp, "deploy/web", "-n", ns, "--name", "rec-no-create", "--as", "no-create")
		assert.Equal(t, cmd.ExitError, res.Code)
		assert.Regexp(t, `(?m)^error: not allowed to create workloadrebalancers.apps.karmada.io with context "karmada-apiserver": .*User "no-create" cannot create resource "workloadrebalancers".*; `+
			`ask an administrator of the Karmada control plane to grant "create" on workloadrebalancers.apps.karmada.io\n$`, res.Stderr)
		assert.Nil(t, rt.Rebalancer(ctx, t, c, "rec-no-create"))
		// The binding was held for a make-before-break move before the
		// create failed; the hold was lifted and its trigger put back.
		after := rt.Binding(ctx, t, c, ns, "web-deployment")
		assert.Equal(t, before.Spec.RescheduleTriggeredAt, after.Spec.RescheduleTriggeredAt, "nothing triggered")
		assert.Equal(t, before.Spec.Clusters, after.Spec.Clusters)
		assert.False(t, after.Spec.SchedulingSuspended(), "the hold is lifted")
		assert.NotContains(t, after.Annotations, handover.LedgerAnnotation)
	})

	t.Run("status", func(t *testing.T) {
		const name = "rec-no-status"
		rt.DeleteRebalancerAfter(t, c, name)
		res := rt.Rebalance(t, cp, "deploy/web", "-n", ns, "--name", name, "--as", "no-status")
		assert.Equal(t, cmd.ExitError, res.Code)
		assert.Regexp(t, `(?m)^error: not allowed to patch workloadrebalancers.apps.karmada.io/status with context "karmada-apiserver": .*; ask an administrator of the Karmada control plane to grant "patch" on workloadrebalancers.apps.karmada.io/status; `+
			`workloadrebalancer rec-no-status exists but its status could not be written \(the bindings' triggers that were written stay\): once that is allowed, run .kubectl rebalance workloadrebalancer/rec-no-status. to record the results \(nothing is triggered twice\)\n$`, res.Stderr)
		rb := rt.Rebalancer(ctx, t, c, name)
		require.NotNil(t, rb)
		assert.Empty(t, rb.Status.ObservedWorkloads)
		triggered := rt.Binding(ctx, t, c, ns, "web-deployment")
		require.NotNil(t, triggered.Spec.RescheduleTriggeredAt)
		assert.False(t, triggered.Spec.RescheduleTriggeredAt.Before(&rb.CreationTimestamp), "the creationTimestamp, or a make-before-break release after it")

		// An administrator records the results; nothing is triggered again.
		admin := rt.Rebalance(t, cp, "workloadrebalancer/"+name, "-o", "wide")
		assert.Equal(t, cmd.ExitOK, admin.Code)
		assert.Contains(t, fixtures.TableLine(t, admin.Stdout, "deployment.apps/web"), "the binding already holds trigger")
		assert.Equal(t, triggered.Generation, rt.Binding(ctx, t, c, ns, "web-deployment").Generation)
		rb = rt.Rebalancer(ctx, t, c, name)
		assert.True(t, finished(rb))
	})

	t.Run("delete", func(t *testing.T) {
		const name = "rec-no-delete"
		rt.DeleteRebalancerAfter(t, c, name)
		res := rt.Rebalance(t, cp, "deploy/web", "-n", ns, "--name", name, "--ttl", "0", "--as", "no-delete")
		assert.Equal(t, cmd.ExitError, res.Code)
		assert.Contains(t, res.Stdout, "deployment.apps/web")
		assert.Regexp(t, `(?m)^error: not allowed to delete workloadrebalancers.apps.karmada.io with context "karmada-apiserver": .*; ask an administrator of the Karmada control plane to grant "delete" on workloadrebalancers.apps.karmada.io; `+
			`workloadrebalancer rec-no-delete exists and its status records what was done: fix the cause, then run .kubectl rebalance workloadrebalancer/rec-no-delete. to finish \(nothing is triggered twice\)\n$`, res.Stderr)
		rb := rt.Rebalancer(ctx, t, c, name)
		require.NotNil(t, rb)
		assert.True(t, finished(rb), "the status is complete")
	})
}

// grantBindings lets users read, watch and trigger the bindings of ns.
func grantBindings(ctx context.Context, t *testing.T, c *fixtures.Clients, ns string, users ...string) {
	t.Helper()
	_, err := c.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "rebalancer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"work.karmada.io"}, Resources: []string{"resourcebindings"},
			Verbs: []string{"get", "list", "watch", "patch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var subjects []rbacv1.Subject
	for _, u := range users {
		subjects = append(subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "User", Name: u})
	}
	_, err = c.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rebalancer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "rebalancer"},
		Subjects:   subjects,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// grantRebalancers gives user the verbs on WorkloadRebalancers; "status"
// stands for patch on the status subresource (records are written by
// patches).
func grantRebalancers(ctx context.Context, t *testing.T, c *fixtures.Clients, user string, verbs ...string) {
	t.Helper()
	name := "rec-" + user
	var plain []string
	rules := []rbacv1.PolicyRule{}
	for _, v := range verbs {
		if v == "status" {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{appsv1alpha1.GroupName}, Resources: []string{"workloadrebalancers/status"}, Verbs: []string{"patch"}})
			continue
		}
		plain = append(plain, v)
	}
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{appsv1alpha1.GroupName}, Resources: []string{"workloadrebalancers"}, Verbs: plain})
	_, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		bg := context.Background()
		_ = c.Kube.RbacV1().ClusterRoleBindings().Delete(bg, name, metav1.DeleteOptions{})
		_ = c.Kube.RbacV1().ClusterRoles().Delete(bg, name, metav1.DeleteOptions{})
	})
}

// TestRecordWithoutTheCRD removes the WorkloadRebalancer CRD, as on a
// Karmada control plane older than v1.10: recording, applying a manifest and
// listing say so; rebalancing without a record still works.
func TestRecordWithoutTheCRD(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "rec-nocrd"
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, "web")
	manifest := filepath.Join(t.TempDir(), "rb.yaml")
	rt.WriteFile(t, manifest, "apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata:\n  name: rec-nocrd\nspec:\n  workloads:\n  - apiVersion: apps/v1\n    kind: Deployment\n    namespace: rec-nocrd\n    name: web\n")

	dyn, err := dynamic.NewForConfig(cp.Karmada)
	require.NoError(t, err)
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	const crdName = "workloadrebalancers.apps.karmada.io"
	saved, err := crds.Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, crds.Delete(ctx, crdName, metav1.DeleteOptions{}))
	t.Cleanup(func() { restoreCRD(t, crds, saved) })
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}))

	notServed := `the Karmada control plane behind context "karmada-apiserver" \(https://127.0.0.1:\d+\) does not serve workloadrebalancers.apps.karmada.io: it is older than Karmada v1.10, which introduced WorkloadRebalancers; ` +
		`rebalance without --name, --ttl, --server-side or a WorkloadRebalancer manifest \(nothing is recorded then\), or upgrade Karmada\n$`
	for _, args := range [][]string{
		{"deploy/web", "-n", ns, "--name", "rec-nocrd"},
		{"-f", manifest},
		{"get"},
		{"get", "rec-nocrd"},
	} {
		res := rt.Rebalance(t, cp, args...)
		assert.Equal(t, cmd.ExitError, res.Code, args)
		assert.Empty(t, res.Stdout)
		assert.Regexp(t, "^error: "+notServed, res.Stderr)
	}
	plain := rt.Rebalance(t, cp, "deploy/web", "-n", ns, "--wait=false")
	assert.Equal(t, cmd.ExitOK, plain.Code, "a run without a record needs no CRD")
}

// restoreCRD puts the saved CRD back and waits until it is served.
func restoreCRD(t *testing.T, crds dynamic.NamespaceableResourceInterface, saved *unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obj := saved.DeepCopy()
	unstructured.RemoveNestedField(obj.Object, "status")
	unstructured.RemoveNestedField(obj.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(obj.Object, "metadata", "uid")
	unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := crds.Create(ctx, obj, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	require.NoError(t, err, "restore the CRD")
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, saved.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cond := range conditions {
			m, _ := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "the restored CRD is established")
}
