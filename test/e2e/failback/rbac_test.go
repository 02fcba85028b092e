package failback

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// The daemon's identity in the Karmada apiserver, from deploy/rbac/failback.yaml.
const (
	failbackUser = "system:serviceaccount:karmada-system:kubectl-rebalance-failback"
	failbackRole = "kubectl-rebalance-failback"
)

// asFailback are the flags that impersonate the daemon's ServiceAccount.
func asFailback() []string {
	as := []string{"--as", failbackUser}
	for _, g := range []string{"system:serviceaccounts", "system:serviceaccounts:karmada-system", "system:authenticated"} {
		as = append(as, "--as-group", g)
	}
	return as
}

// TestFailbackRBAC applies deploy/rbac/failback.yaml to the real Karmada
// apiserver and runs the daemon as its ServiceAccount: the seed story works
// end to end (follow clusters, predict, trigger, wait, record, events,
// Lease). Then, one ClusterRole rule removed at a time, a failback resumed
// from its record (or the start, for clusters) fails with an error naming
// the refused resource.
func TestFailbackRBAC(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns = "failback-rbac"
	objs, err := fixtures.ReadManifest("deploy/rbac/failback.yaml")
	require.NoError(t, err)
	require.NoError(t, fixtures.ApplyObjects(ctx, cp.Karmada, objs, false))
	t.Cleanup(func() { assert.NoError(t, fixtures.DeleteObjects(context.Background(), cp.Karmada, objs)) })
	// The prediction reads Push members through the cluster proxy, which
	// impersonates the daemon's identity in each member.
	memberObjs, err := fixtures.ReadManifest("deploy/members/rbac.yaml")
	require.NoError(t, err)
	for _, m := range cp.Members {
		require.NoError(t, fixtures.ApplyObjects(ctx, m.Config, memberObjs, false))
		t.Cleanup(func() { assert.NoError(t, fixtures.DeleteObjects(context.Background(), m.Config, memberObjs)) })
	}
	fixtures.TestNamespace(ctx, t, c, ns)
	deleteRecords(t, c, "member1")
	t.Cleanup(func() { deleteRecords(t, c, "member1") })
	rt.Deployments(ctx, t, c, ns, "guarded")

	// Allowed: the seed story as the ServiceAccount, through a proxy that
	// notes every API call. The Pull member (member3) is read through its
	// context, as an install gives the daemon local-up-karmada's
	// members.config; the proxy routes that context to it.
	proxy, err := cp.StartCountingProxyWithPullMembers()
	require.NoError(t, err)
	t.Cleanup(proxy.Close)
	d := startDaemon(t, cp, append(asFailback(), "--kubeconfig", proxy.Kubeconfig, "--member-kubeconfig", proxy.Kubeconfig, "-n", ns, "--stabilization-window", window.String(), "--leader-elect-identity", "rbac")...)
	d.waitLog(t, "acting on recoveries", time.Minute)
	fixtures.Failover(ctx, t, c, ns, "guarded-deployment")
	recovered := recoverMember1(ctx, t, c)
	rec := waitRecord(ctx, t, c, "member1", 3*time.Minute, func(rb *appsv1alpha1.WorkloadRebalancer) bool { return rb.Status.FinishTime != nil })
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, rec.Status.ObservedWorkloads[0].Result)
	_, err = c.WaitForPlacement(ctx, ns, "guarded-deployment", 2*time.Minute, fixtures.TutorialSplits...)
	require.NoError(t, err)
	waitEvent(ctx, t, c, ns, "ResourceBinding", "guarded-deployment", failback.ReasonTriggered, recovered)
	waitEvent(ctx, t, c, "default", "Cluster", "member1", failback.ReasonFinished, recovered)
	assert.Equal(t, cmd.ExitOK, d.stop(t))

	// Exactly enough: every permission of the role was used, but for those
	// of the paths the story does not take, which the role's comments name.
	used := map[string]bool{}
	for _, req := range proxy.Requests.List() {
		if p, ok := permissionOf(req); ok {
			used[p] = true
		}
	}
	// The Lease is created only when no daemon ran before in this control
	// plane: used or not, depending on the order of the package's tests.
	used["coordination.k8s.io/leases create"] = true
	// So is the ConfigMap of the leader's view (failback status).
	used["/configmaps create"] = true
	var unused []string
	for _, p := range grantedPermissions(t, objs) {
		if !used[p] {
			unused = append(unused, p)
		}
	}
	assert.ElementsMatch(t, notInTheStory, unused, "permissions granted and not used (calls made: %v)", proxy.Requests.List())

	// One rule less at a time. The record of the recovery is made
	// unfinished again, so that the next daemon resumes it at once.
	full, err := c.Kube.RbacV1().ClusterRoles().Get(ctx, failbackRole, metav1.GetOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { setRules(t, c, full.Rules) })
	for i, rule := range full.Rules {
		resource := rule.Resources[0]
		if resource == "workloadrebalancers/status" {
			// Karmada's controller (on, as in every install) writes the
			// status of the recreated record before the daemon resumes
			// it, so the resumed run has no status to write; the story
			// above uses this permission (it is not in notInTheStory).
			continue
		}
		if resource == "deployments" || resource == "events" || resource == "clusters/proxy" {
			// Not used by a resumed failback: the templates are listed by
			// a new one (-l, the opt-out), and so are the members read for
			// its prediction; events are written in the background and
			// only logged when refused.
			continue
		}
		t.Run(resource, func(t *testing.T) {
			rules := append(append([]rbacv1.PolicyRule{}, full.Rules[:i]...), full.Rules[i+1:]...)
			setRules(t, c, rules)
			pending(ctx, t, c, rec)
			d := startDaemon(t, cp, append(asFailback(), "-n", ns, "--stabilization-window", window.String(), "--leader-elect-identity", "rbac-"+resource)...)
			switch resource {
			case "clusters":
				code := waitExit(t, d)
				assert.Equal(t, cmd.ExitError, code)
				// The error catalogue's words, as every command says them.
				assert.Contains(t, d.text(), "not allowed to list clusters.cluster.karmada.io with context")
				assert.Contains(t, d.text(), `grant "list" on clusters.cluster.karmada.io`)
				return
			case "resourcebindings":
				// The bindings say what a failure displaced: the daemon
				// stops at start instead of waiting for them.
				code := waitExit(t, d)
				assert.Equal(t, cmd.ExitError, code)
				assert.Contains(t, d.text(), `not allowed to list resourcebindings.work.karmada.io in namespace "`+ns+`"`)
				assert.Contains(t, d.text(), `grant "list" on resourcebindings.work.karmada.io`)
				return
			}
			// Refused requests are named: the failback fails (or, without
			// the records, cannot even be found to resume).
			d.waitLog(t, "forbidden", 2*time.Minute)
			assert.Contains(t, d.text(), strings.Split(resource, "/")[0])
			assert.Regexp(t, "failback failed|cannot read the failback records", d.text())
		})
	}
}

// setRules writes the rules of the daemon's ClusterRole.
func setRules(t *testing.T, c *fixtures.Clients, rules []rbacv1.PolicyRule) {
	t.Helper()
	role, err := c.Kube.RbacV1().ClusterRoles().Get(context.Background(), failbackRole, metav1.GetOptions{})
	require.NoError(t, err)
	role.Rules = rules
	_, err = c.Kube.RbacV1().ClusterRoles().Update(context.Background(), role, metav1.UpdateOptions{})
	require.NoError(t, err)
	// RBAC takes effect as the apiserver's informer sees the change.
	time.Sleep(2 * time.Second)
}

// pending recreates rec without a status: a failback a restart stopped
// before it triggered anything.
func pending(ctx context.Context, t *testing.T, c *fixtures.Clients, rec *appsv1alpha1.WorkloadRebalancer) {
	t.Helper()
	rbs := c.Karmada.AppsV1alpha1().WorkloadRebalancers()
	_ = rbs.Delete(ctx, rec.Name, metav1.DeleteOptions{})
	fresh := &appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: rec.Name, Labels: rec.Labels}, Spec: rec.Spec}
	require.NoError(t, waitFor(func() error { _, err := rbs.Create(ctx, fresh, metav1.CreateOptions{}); return err }))
}

func waitFor(f func() error) error {
	var err error
	for range 50 {
		if err = f(); err == nil || !strings.Contains(err.Error(), "being deleted") && !strings.Contains(err.Error(), "already exists") {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("after retries: %w", err)
}

// waitExit waits for the daemon to exit by itself.
func waitExit(t *testing.T, d *daemon) int {
	t.Helper()
	select {
	case code := <-d.done:
		d.done <- code
		return code
	case <-time.After(time.Minute):
		require.FailNow(t, "the daemon did not exit", "logs:\n%s", d.text())
	}
	return -1
}

// notInTheStory are the permissions of deploy/rbac/failback.yaml that the
// seed story does not use, each needed on another path.
var notInTheStory = []string{
	// Records past their TTL (the story's has a day left).
	"apps.karmada.io/workloadrebalancers delete",
	// The templates of StatefulSets, failed back with --include-stateful
	// only.
	"apps/statefulsets list",
	// A repeated event: client-go's recorder counts it up with a patch.
	"/events patch",
	// A binding that fails to schedule: the scheduler's event says why.
	"/events list",
}

// permissionOf turns a request noted by the proxy ("VERB PATH") into the
// RBAC permission it needs ("group/resource[/subresource] verb"); false for
// discovery and other non-resource paths, which every user may read.
func permissionOf(request string) (string, bool) {
	verb, path, _ := strings.Cut(request, " ")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	group := ""
	switch {
	case len(parts) > 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) > 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return "", false
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource := parts[0]
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	rbacVerb, ok := map[string]string{"GET": "get", "LIST": "list", "WATCH": "watch", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[verb]
	if resource == "clusters/proxy" && verb == "LIST" {
		// A list in a member, through the proxy: Karmada authorizes the
		// proxy request by its HTTP verb.
		rbacVerb = "get"
	}
	return group + "/" + resource + " " + rbacVerb, ok
}

// grantedPermissions lists the permissions of the ClusterRole and the Role
// of the manifest, as permissionOf names them.
func grantedPermissions(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, obj := range objs {
		if obj.GetKind() != "ClusterRole" && obj.GetKind() != "Role" {
			continue
		}
		var role rbacv1.ClusterRole
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role))
		for _, rule := range role.Rules {
			for _, g := range rule.APIGroups {
				for _, r := range rule.Resources {
					for _, v := range rule.Verbs {
						out = append(out, g+"/"+r+" "+v)
					}
				}
			}
		}
	}
	return out
}
