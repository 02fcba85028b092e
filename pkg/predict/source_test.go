package predict

import (
	"context"
	"testing"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// The reads cost one LIST per namespace and one of clusters, however many
// workloads; cluster-scoped bindings and estimator Services are listed once.
func TestSourceReadCost(t *testing.T) {
	objects := []runtime.Object{
		&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}},
		&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member2"}},
		&workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x-deployment"}},
		&workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "y-deployment"}},
		&workv1alpha2.ClusterResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "r-clusterrole"}},
	}
	karmada := karmadafake.NewSimpleClientset(objects...)
	kube := kubefake.NewSimpleClientset(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: EstimatorNamespace, Name: EstimatorServicePrefix + "member2"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: EstimatorNamespace, Name: "karmada-webhook"}},
	)
	var targets []rebalance.Target
	for i := range 50 {
		ns := []string{"a", "b"}[i%2]
		targets = append(targets, rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "x"}})
	}
	targets = append(targets, rebalance.Target{Workload: rebalance.Workload{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "r"}})

	in, err := Source{Karmada: karmada, Kube: kube}.Read(context.Background(), targets, false)
	require.NoError(t, err)
	assert.Len(t, in.Clusters, 2)
	assert.Contains(t, in.Bindings, "a/x-deployment")
	assert.Contains(t, in.Bindings, "b/y-deployment")
	assert.Contains(t, in.Bindings, "r-clusterrole")
	assert.Equal(t, []string{"member2"}, in.Estimated)
	assert.Equal(t, map[string]int{"list clusters": 1, "list resourcebindings": 2, "list clusterresourcebindings": 1}, verbs(karmada.Actions()))
	assert.Equal(t, map[string]int{"list services": 1}, verbs(kube.Actions()))

	karmada.ClearActions()
	in, err = Source{Karmada: karmada, Estimator: EstimatorDisabled}.Read(context.Background(), targets[:10], true)
	require.NoError(t, err)
	assert.Empty(t, in.Estimated)
	assert.Equal(t, map[string]int{"list clusters": 1, "list resourcebindings": 1}, verbs(karmada.Actions()), "one list across all namespaces")

	in, err = Source{Karmada: karmada, Estimator: EstimatorEnabled}.Read(context.Background(), targets[:1], false)
	require.NoError(t, err)
	assert.Equal(t, []string{"member1", "member2"}, in.Estimated)
}

func verbs(actions []clienttesting.Action) map[string]int {
	out := map[string]int{}
	for _, a := range actions {
		out[a.GetVerb()+" "+a.GetResource().Resource]++
	}
	return out
}
