package predict

import (
	"context"
	"errors"
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

// A listed binding is kept with what a prediction reads and without the
// bulk it does not: managed fields, annotations, the members' aggregated
// status.
func TestSlimKeepsWhatPredictionReads(t *testing.T) {
	now := metav1.Now()
	full := &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "a", Name: "x-deployment", UID: "u1", ResourceVersion: "7", Generation: 3,
			Labels:            map[string]string{"propagationpolicy.karmada.io/permanent-id": "p"},
			Annotations:       map[string]string{"policy.karmada.io/applied-placement": "{}"},
			OwnerReferences:   []metav1.OwnerReference{{Kind: "Deployment", Name: "x", UID: "d1"}},
			DeletionTimestamp: &now,
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "karmada-scheduler"}},
		},
		Spec: workv1alpha2.ResourceBindingSpec{Replicas: 3, Clusters: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 3}}},
		Status: workv1alpha2.ResourceBindingStatus{
			SchedulerObservedGeneration: 3, SchedulerObservedAffinityName: "primary", LastScheduledTime: &now,
			Conditions:       []metav1.Condition{{Type: "Scheduled", Status: metav1.ConditionTrue}},
			AggregatedStatus: []workv1alpha2.AggregatedStatusItem{{ClusterName: "member1"}},
		},
	}
	got := slim(full)
	want := full.DeepCopy()
	want.Annotations, want.ManagedFields, want.Status.AggregatedStatus = nil, nil, nil
	assert.Equal(t, want, got)
}

// The lists go out side by side; when several fail, the error is the first
// in a fixed order (clusters before bindings), whatever finished first.
func TestSourceReadErrorOrder(t *testing.T) {
	karmada := karmadafake.NewSimpleClientset()
	karmada.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("refused " + a.GetResource().Resource)
	})
	targets := []rebalance.Target{
		{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "a", Name: "x"}},
		{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "b", Name: "y"}},
	}
	for range 20 {
		_, err := Source{Karmada: karmada, Estimator: EstimatorDisabled}.Read(context.Background(), targets, false)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "refused clusters")
	}
}
