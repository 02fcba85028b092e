package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// detectedRange is what the plugin must tell of each release the harness
// can start (make test-matrix). v1.16 is told from v1.15 by the wording of a
// description in the served schema: the check that descriptions are served.
var detectedRange = map[int]string{12: "v1.12", 13: "v1.13 or v1.14", 16: "v1.16", 18: "v1.18"}

// TestKarmadaVersionDetected tells the release of the running control plane
// from what its apiserver publishes, and refuses a plain kube-apiserver (a
// member cluster) in plain words.
func TestKarmadaVersionDetected(t *testing.T) {
	cp := harness.Require(t)
	disco, err := discovery.NewDiscoveryClientForConfig(cp.Karmada)
	require.NoError(t, err)
	info, err := karmadaversion.Detect(disco)
	require.NoError(t, err)
	t.Logf("Karmada %s detected as %s (%s)", cp.Versions.Karmada, info.Range(), info.Evidence)

	minor := cp.Versions.KarmadaMinor()
	assert.LessOrEqual(t, info.Oldest.Minor, minor)
	if info.Newest.Minor != 0 {
		assert.GreaterOrEqual(t, info.Newest.Minor, minor)
	}
	if want, ok := detectedRange[minor]; ok {
		assert.Equal(t, want, info.Range())
	}
	assert.True(t, info.Supported())

	// The aggregated apiserver's own /version is what a Karmada release
	// could report, but clients reach it only through the APIService's
	// group path, never at /version; log what it says for the record.
	logAggregatedVersion(t, cp)

	member, err := discovery.NewDiscoveryClientForConfig(cp.Members[0].Config)
	require.NoError(t, err)
	_, err = karmadaversion.Detect(member)
	var unsupported *karmadaversion.UnsupportedError
	require.True(t, errors.As(err, &unsupported), "%v", err)
	assert.EqualError(t, err, "not a supported Karmada control plane: it does not serve resourcebindings.work.karmada.io/v1alpha2: "+
		"it is not a Karmada apiserver, or Karmada's CRDs are not installed")
}

// TestAffinityGroupOnRebalance places a Deployment in its second
// clusterAffinities group because the first matches no cluster, makes the
// first group fit, and rebalances: Karmada v1.18 and older keep it in the
// second group (v1.19 starts again from the first, karmada#5425), and the
// command says which, in plain words.
func TestAffinityGroupOnRebalance(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name, binding = "versions-affinity", "aff", "aff-deployment"
	// A label of our own on member3 opens the first group; nothing else uses it.
	const label = "rebalance.e2e/affinity-primary"
	fixtures.TestNamespace(ctx, t, c, ns)
	t.Cleanup(func() { _ = labelCluster(context.Background(), c, "member3", label, false) })

	_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, fixtures.Deployment(ns, name, 2), metav1.CreateOptions{})
	require.NoError(t, err)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: name}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
					{AffinityName: "primary", ClusterAffinity: policyv1alpha1.ClusterAffinity{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}}}},
					{AffinityName: "backup", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}},
				},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated},
			},
		},
	}
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	rb := fixtures.WaitScheduled(ctx, t, c, ns, binding)
	require.Equal(t, "backup", rb.Status.SchedulerObservedAffinityName, "the first group matches no cluster yet")
	require.Equal(t, "{member2:2}", fixtures.Placement(rb.Spec.Clusters))

	// The first group fits now; a label alone reschedules nothing.
	require.NoError(t, labelCluster(ctx, c, "member3", label, true))
	time.Sleep(3 * time.Second)
	rb = fixtures.WaitScheduled(ctx, t, c, ns, binding)
	require.Equal(t, "backup", rb.Status.SchedulerObservedAffinityName, "a cluster label alone moved the workload")

	disco, err := discovery.NewDiscoveryClientForConfig(cp.Karmada)
	require.NoError(t, err)
	info, err := karmadaversion.Detect(disco)
	require.NoError(t, err)
	restarts := info.RescheduleRestartsAffinityGroups()
	require.True(t, restarts.Known, "Karmada %s detected as %s", cp.Versions.Karmada, info.Range())

	// The one-write move: a make-before-break move does not say this yet
	// (docs/make-before-break.md, limits).
	res := rebalanceCmd(t, cp, "deploy/"+name, "-n", ns, "--max-unavailable=100%")
	require.Equal(t, cmd.ExitOK, res.code)
	warning := fmt.Sprintf(`warning: binding %s/%s was placed by its clusterAffinities group "backup", not the first group "primary": this control plane runs Karmada %s (%s), which `,
		ns, binding, info.Range(), info.Evidence)
	rb = fixtures.WaitScheduled(ctx, t, c, ns, binding)
	if !restarts.Yes {
		assert.Contains(t, res.stderr, warning+`reschedules from the group a workload is in, so this rebalance keeps it in "backup" and cannot bring it back to "primary" (Karmada v1.19 changed that, karmada#5425)`+"\n")
		assert.Equal(t, "backup", rb.Status.SchedulerObservedAffinityName)
		assert.Equal(t, "{member2:2}", fixtures.Placement(rb.Spec.Clusters))
		return
	}
	assert.Contains(t, res.stderr, warning+`reschedules from the first group, so this rebalance may have moved it back to "primary"`+"\n")
	assert.Equal(t, "primary", rb.Status.SchedulerObservedAffinityName)
	assert.Equal(t, "{member3:2}", fixtures.Placement(rb.Spec.Clusters))
}

// logAggregatedVersion asks karmada-aggregated-apiserver for /version
// directly, at the port of its APIService.
func logAggregatedVersion(t *testing.T, cp *harness.ControlPlane) {
	ctx := fixtures.TestContext(t)
	c := fixtures.TestClients(t, cp.Karmada)
	svc, err := c.Kube.CoreV1().Services("karmada-system").Get(ctx, "karmada-aggregated-apiserver", metav1.GetOptions{})
	if err != nil || len(svc.Spec.Ports) == 0 {
		t.Logf("no karmada-aggregated-apiserver Service: %v", err)
		return
	}
	cfg := rest.CopyConfig(cp.Karmada)
	cfg.Host = fmt.Sprintf("https://localhost:%d", svc.Spec.Ports[0].Port)
	direct, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	v, err := direct.ServerVersion()
	require.NoError(t, err)
	t.Logf("karmada-aggregated-apiserver of Karmada %s answers /version with gitVersion %s (major %q, minor %q)", cp.Versions.Karmada, v.GitVersion, v.Major, v.Minor)
}

// labelCluster sets (or removes) label=yes on a Cluster.
func labelCluster(ctx context.Context, c *fixtures.Clients, cluster, label string, set bool) error {
	value := `"yes"`
	if !set {
		value = "null"
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, label, value)
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Karmada.ClusterV1alpha1().Clusters().Patch(ctx, cluster, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err == nil, nil
	})
}
