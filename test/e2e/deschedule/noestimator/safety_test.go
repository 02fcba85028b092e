package noestimator

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// stuck creates Deployments of replicas pods each, placed in member by one
// policy, whose pods all stay Unschedulable there.
func (e *env) stuck(member string, replicas int32, names ...string) {
	e.T.Helper()
	for _, name := range names {
		e.CreateDeployment(e.workload(name, replicas))
	}
	e.createPolicy("stuck", deschedtest.Aggregated(member), names...)
	for _, name := range names {
		e.waitPlacement(name, "{"+member+":"+itoa(replicas)+"}")
		e.WaitPods(member, name, podCounts{Unschedulable: int(replicas), Total: int(replicas)})
		e.waitReady(name, member, nil)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// specVersions reads the generation of the bindings of names: it moves with
// every spec write, and not with the status updates of Karmada's controllers.
func (e *env) specVersions(names ...string) map[string]int64 {
	e.T.Helper()
	out := map[string]int64{}
	for _, name := range names {
		out[name] = e.Binding(name).Generation
	}
	return out
}

// TestDescheduleLimits caps the replicas a pass moves, per pass and per
// cluster; what is cut is reported as limited and not written.
func TestDescheduleLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "limits")
	e.stuck("member3", 2, "a", "b", "c")
	before := e.specVersions("a", "b", "c")

	outcomes := func(r *deschedule.PassReport) map[string]string {
		out := map[string]string{}
		for _, b := range r.Bindings {
			out[b.Name] = string(b.Outcome) + "/" + itoa(b.EvictedReplicas)
		}
		return out
	}

	code, report := e.RunJSON("--unschedulable-threshold", "0s", "--dry-run=client", "--max-replicas-per-pass", "3")
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, map[string]string{"a-deployment": "dry-run/2", "b-deployment": "dry-run/1", "c-deployment": "limited/0"}, outcomes(report))
	assert.Equal(t, deschedule.ActionLimited, bindingOf(t, report, "b").Clusters[0].Action)
	assert.Equal(t, int32(1), bindingOf(t, report, "b").Clusters[0].New)
	assert.Equal(t, int32(3), report.Summary.EvictedReplicas)
	assert.Equal(t, 1, report.Summary.Limited)

	code, report = e.RunJSON("--unschedulable-threshold", "0s", "--dry-run=client", "--max-replicas-per-cluster", "1")
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, map[string]string{"a-deployment": "dry-run/1", "b-deployment": "limited/0", "c-deployment": "limited/0"}, outcomes(report))
	assert.Equal(t, before, e.specVersions("a", "b", "c"), "a client dry run writes nothing")

	code, stdout, stderr := e.Run("-n", e.NS, "--unschedulable-threshold", "0s", "--max-replicas-per-pass", "1")
	require.Equal(t, cmd.ExitOK, code)
	assert.Regexp(t, `a-deployment\s+member3\s+2\s+<unknown>\s+2\s+1\s+limited`, stdout)
	assert.Regexp(t, `b-deployment\s+member3\s+2\s+<unknown>\s+2\s+2\s+limited`, stdout)
	assert.Contains(t, stderr, "descheduled 1 binding(s) moving 1 replica(s), 2 held back by limits")
	e.assertEvents("a", "Binding has been descheduled, 1 replica(s) in cluster(member3), 1 total descheduled replica(s)")
	assert.Empty(t, e.events("ResourceBinding", "b-deployment"))
	assert.Empty(t, e.events("ResourceBinding", "c-deployment"))
	assert.Equal(t, before["b"], e.Binding("b").Generation, "held back: not written")
}

// TestDescheduleDryRunAndCounting runs the same pass three ways through a
// proxy that counts requests: a client dry run only reads, a server dry run
// sends the update and nothing is persisted, and reading members through
// kubeconfig contexts sees what the Karmada proxy sees. Member clusters
// are listed with three LIST calls each, whatever the number of bindings.
func TestDescheduleDryRunAndCounting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "dryrun")
	e.stuck("member2", 2, "web", "api")
	before := e.specVersions("web", "api")

	proxy, err := e.CP.StartCountingProxy()
	require.NoError(t, err)
	t.Cleanup(proxy.Close)
	pass := func(dryRun string) (map[string]int, *deschedule.PassReport) {
		t.Helper()
		start := proxy.Counter.Counts()
		code, report := e.RunJSON("--kubeconfig", proxy.Kubeconfig, "--unschedulable-threshold", "0s", "--dry-run="+dryRun)
		require.Equal(t, cmd.ExitOK, code)
		counts := proxy.Counter.Counts()
		for verb, n := range start {
			counts[verb] -= n
		}
		t.Logf("--dry-run=%s: %s", dryRun, harness.FormatCounts(counts))
		return counts, report
	}

	counts, report := pass("client")
	// One LIST of bindings and one of the Deployment templates (their
	// opt-out annotation), then pods, deployments and replicasets of member2:
	// LISTs too, which the counter sees as GETs of clusters/proxy. After the
	// pass, one more LIST of bindings looks for those an interrupted
	// make-before-break move left suspended (reported, not written).
	assert.Equal(t, map[string]int{"LIST": 3, "GET": 3}, counts)
	assert.Equal(t, deschedule.DryRunClient, report.DryRun)
	assert.Equal(t, 2, report.Summary.Descheduled)
	assert.Equal(t, deschedule.OutcomeDryRun, bindingOf(t, report, "web").Outcome)
	assert.Equal(t, int32(0), bindingOf(t, report, "web").Clusters[0].New)

	counts, report = pass("server")
	// The writes are patches of the fields the descheduler owns (issue 26).
	assert.Equal(t, map[string]int{"LIST": 3, "GET": 3, "PATCH": 2}, counts, "the patches reach the server, the events are not sent")
	assert.Equal(t, deschedule.OutcomeDryRun, bindingOf(t, report, "api").Outcome)
	assert.Equal(t, 2, report.Summary.Descheduled)
	assert.Equal(t, before, e.specVersions("web", "api"), "a server dry run persists nothing")
	assert.Empty(t, e.events("ResourceBinding", "web-deployment"))
	assert.Empty(t, e.events("Deployment", "web"))

	// The member contexts of the harness kubeconfig are named like the clusters.
	code, viaContexts := e.RunJSON("--estimator", "kubeconfig", "--unschedulable-threshold", "0s", "--dry-run=client")
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, report.Bindings[0].Clusters, viaContexts.Bindings[0].Clusters)
	assert.Equal(t, report.Bindings[1].Clusters, viaContexts.Bindings[1].Clusters)
}

// TestDescheduleScope checks what a pass leaves out, and says why: bindings
// that are not candidates are listed as skipped with their reason; -l
// selects by the Deployment's labels; excluded namespaces are never read.
func TestDescheduleScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "scope")
	e.stuck("member1", 1, "web", "deleting", "suspended")

	// Not scheduled: no cluster matches the policy.
	e.CreateDeployment(e.workload("unplaced", 1))
	e.createPolicy("unplaced", deschedtest.Aggregated("nowhere"), "unplaced")
	// Static weights are not dynamic: the original leaves them alone too.
	e.CreateDeployment(e.workload("static", 1))
	static := deschedtest.Aggregated("member1")
	static.ReplicaScheduling.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceWeighted
	static.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
		{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Weight: 1},
	}}
	e.createPolicy("static", static, "static")
	// Not a Deployment.
	_, err := e.C.Kube.CoreV1().ConfigMaps(e.NS).Create(e.Ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.C.Karmada.PolicyV1alpha1().PropagationPolicies(e.NS).Create(e.Ctx, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.Eventually("bindings of the skipped workloads", func() (bool, string) {
		list, err := e.C.Karmada.WorkV1alpha2().ResourceBindings(e.NS).List(e.Ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, rb := range list.Items {
			names = append(names, rb.Name)
		}
		return len(list.Items) == 6, strings.Join(names, ",")
	})
	e.waitScheduled("static")

	// Being deleted: a finalizer of the test holds the binding.
	bindings := e.C.Karmada.WorkV1alpha2().ResourceBindings(e.NS)
	rb := e.Binding("deleting")
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": append([]string{"deschedule-e2e/hold"}, rb.Finalizers...)}})
	require.NoError(t, err)
	_, err = bindings.Patch(e.Ctx, rb.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	held := rb.Name // rb is reused below
	t.Cleanup(func() {
		// By name, not by position: Karmada's own finalizer may come first
		// by now, and a binding left with ours holds its namespace forever.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			b, err := bindings.Get(context.Background(), held, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			}
			b.Finalizers = slices.DeleteFunc(b.Finalizers, func(f string) bool { return f == "deschedule-e2e/hold" })
			_, err = bindings.Update(context.Background(), b, metav1.UpdateOptions{})
			return err
		})
		assert.NoError(t, err, "release the binding held by the test")
	})
	require.NoError(t, bindings.Delete(e.Ctx, rb.Name, metav1.DeleteOptions{}))
	// Scheduling suspended on the binding, as a third-party system would.
	rb = e.Binding("suspended")
	rb.Spec.Suspension = &workv1alpha2.Suspension{Scheduling: ptr.To(true)}
	updated, err := bindings.Update(e.Ctx, rb, metav1.UpdateOptions{})
	require.NoError(t, err)
	// Karmada v1.12 has no spec.suspension.scheduling (added in v1.13): its
	// apiserver drops the field, the binding is not suspended, and a pass
	// descheduling it is right there.
	suspends := e.CP.Versions.KarmadaMinor() >= 13
	if !suspends {
		require.True(t, updated.Spec.Suspension == nil || updated.Spec.Suspension.Scheduling == nil,
			"Karmada %s kept spec.suspension.scheduling", e.CP.Versions.Karmada)
	}

	code, report := e.RunJSON("--unschedulable-threshold", "0s", "--dry-run=client")
	require.Equal(t, cmd.ExitOK, code)
	// The ConfigMap is not a kind of the default --kinds: out of scope.
	assert.Equal(t, 5, report.Summary.Listed)
	var descheduled []string
	for _, b := range report.Bindings {
		descheduled = append(descheduled, b.Name)
	}
	wantSkipped := map[string]deschedule.SkipCode{"deleting-deployment": deschedule.SkipDeleting, "suspended-deployment": deschedule.SkipSuspended,
		"unplaced-deployment": deschedule.SkipNotScheduled, "static-deployment": deschedule.SkipStaticWeight}
	if suspends {
		assert.Equal(t, []string{"web-deployment"}, descheduled)
	} else {
		assert.Equal(t, []string{"suspended-deployment", "web-deployment"}, descheduled)
		delete(wantSkipped, "suspended-deployment")
	}
	reasons := map[string]string{}
	for _, s := range report.Skipped {
		reasons[s.Name] = s.Reason
	}
	assert.Contains(t, reasons["deleting-deployment"], "binding is being deleted")
	if suspends {
		assert.Contains(t, reasons["suspended-deployment"], "scheduling is suspended")
	}
	assert.Contains(t, reasons["unplaced-deployment"], "not scheduled")
	assert.Contains(t, reasons["static-deployment"], "only dynamic weights are descheduled")
	assert.NotContains(t, reasons, "settings-configmap")
	codes := map[string]deschedule.SkipCode{}
	for _, s := range report.Skipped {
		codes[s.Name] = s.Code
	}
	assert.Equal(t, wantSkipped, codes)

	// Every kind: the ConfigMap is listed, and skipped as Karmada's filter says.
	code, report = e.RunJSON("--unschedulable-threshold", "0s", "--dry-run=client", "--kinds", "*")
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, 6, report.Summary.Listed)
	for _, s := range report.Skipped {
		reasons[s.Name] = s.Reason
	}
	assert.Contains(t, reasons["settings-configmap"], "replica scheduling is Duplicated, only Divided is descheduled")

	// The wide table shows the skipped bindings and why.
	code, stdout, _ := e.Run("-n", e.NS, "--unschedulable-threshold", "0s", "--dry-run=client", "-o", "wide")
	require.Equal(t, cmd.ExitOK, code)
	assert.Regexp(t, `web-deployment\s+member1\s+1\s+<unknown>\s+1\s+0\s+evict\s+dry-run\s+Binding has been descheduled`, stdout)
	if suspends {
		assert.Regexp(t, `suspended-deployment\s+<none>\s+<none>\s+<none>\s+<none>\s+<none>\s+skipped\s+skipped\s+scheduling is suspended`, stdout)
	} else {
		assert.Regexp(t, `suspended-deployment\s+member1\s+1\s+<unknown>\s+1\s+0\s+evict\s+dry-run\s+Binding has been descheduled`, stdout)
	}

	// -l selects by the Deployment's labels (fixtures label app=NAME).
	code, report = e.RunJSON("--unschedulable-threshold", "0s", "--dry-run=client", "-l", "app in (web,static)")
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, 2, report.Summary.Listed)
	require.Len(t, report.Bindings, 1)
	assert.Equal(t, "web-deployment", report.Bindings[0].Name)
	require.Len(t, report.Skipped, 1)
	assert.Equal(t, "static-deployment", report.Skipped[0].Name)

	// All namespaces but this one: none of its bindings is even listed.
	code, report = e.RunJSON("-A", "--exclude-namespace", e.NS, "--dry-run=client", "-l", "app=web")
	require.Equal(t, cmd.ExitOK, code)
	for _, b := range report.Bindings {
		assert.NotEqual(t, e.NS, b.Namespace)
	}
	for _, s := range report.Skipped {
		assert.NotEqual(t, e.NS, s.Namespace)
	}
}
