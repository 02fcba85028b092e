package predict

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	workclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/typed/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
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

// Through a REST client, the bindings are listed in pages, each decoded
// while the next is read: every binding of every page is kept, slimmed, and
// an error of a later page is the list's error.
func TestSourceReadsBindingPages(t *testing.T) {
	page := func(from int, next string) string {
		var items []string
		for i := from; i < from+3; i++ {
			items = append(items, fmt.Sprintf(`{"metadata":{"namespace":"a","name":"w%d-deployment","managedFields":[{"manager":"m"}]},"spec":{"resource":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"a","name":"w%d"},"replicas":2}}`, i, i))
		}
		return fmt.Sprintf(`{"apiVersion":"work.karmada.io/v1alpha2","kind":"ResourceBindingList","items":[%s],"metadata":{"continue":%q}}`, strings.Join(items, ","), next)
	}
	for _, tt := range []struct {
		name      string
		failPage3 bool
	}{{name: "three pages"}, {name: "the third page refused", failPage3: true}} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var continues []string
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/apis/work.karmada.io/v1alpha2/namespaces/a/resourcebindings" {
					http.NotFound(w, r)
					return
				}
				cont := r.URL.Query().Get("continue")
				mu.Lock()
				continues = append(continues, cont)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				switch cont {
				case "":
					fmt.Fprint(w, page(0, "p2"))
				case "p2":
					fmt.Fprint(w, page(3, "p3"))
				default:
					if tt.failPage3 {
						w.WriteHeader(http.StatusForbidden)
						fmt.Fprint(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"Forbidden","code":403,"message":"User \"someone\" cannot list resource \"resourcebindings\""}`)
						return
					}
					fmt.Fprint(w, page(6, ""))
				}
			}))
			defer server.Close()
			work, err := workclient.NewForConfig(&rest.Config{Host: server.URL})
			require.NoError(t, err)
			karmada := karmadafake.NewSimpleClientset()
			in, err := Source{Karmada: karmada, Work: work.RESTClient(), Estimator: EstimatorDisabled}.
				ReadScope(context.Background(), Scope{Namespaces: []string{"a"}})
			assert.Equal(t, []string{"", "p2", "p3"}, continues)
			if tt.failPage3 {
				require.Error(t, err)
				assert.True(t, apierrors.IsForbidden(err), "%v", err)
				assert.Contains(t, err.Error(), `User "someone" cannot list resource "resourcebindings"`, "the server's own words")
				return
			}
			require.NoError(t, err)
			require.Len(t, in.Bindings, 9)
			b := in.Bindings["a/w7-deployment"]
			require.NotNil(t, b)
			assert.Equal(t, int32(2), b.Spec.Replicas)
			assert.Empty(t, b.ManagedFields, "slimmed")
		})
	}
}

// Bindings that ask for the same replica requirements share one copy of
// them; different ones keep their own.
func TestSlimSharesReplicaRequirements(t *testing.T) {
	withRequests := func(name, cpu string) *workv1alpha2.ResourceBinding {
		return &workv1alpha2.ResourceBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name},
			Spec: workv1alpha2.ResourceBindingSpec{Replicas: 3, ReplicaRequirements: &workv1alpha2.ReplicaRequirements{
				ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}}},
		}
	}
	one, two, other := slim(withRequests("x", "100m")), slim(withRequests("y", "100m")), slim(withRequests("z", "250m"))
	assert.Same(t, one.Spec.ReplicaRequirements, two.Spec.ReplicaRequirements)
	assert.NotSame(t, one.Spec.ReplicaRequirements, other.Spec.ReplicaRequirements)
	q := other.Spec.ReplicaRequirements.ResourceRequest[corev1.ResourceCPU]
	assert.Equal(t, "250m", q.String())
}
