package rebalance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// fullBinding is a ResourceBinding with every part a run reads and the
// parts it skips (managedFields, long annotations, other labels).
func fullBinding() *workv1alpha2.ResourceBinding {
	deleting := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	trigger := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	return &workv1alpha2.ResourceBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "work.karmada.io/v1alpha2", Kind: "ResourceBinding"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "app-deployment", Namespace: "shop", UID: "u-1", ResourceVersion: "812", Generation: 7,
			DeletionTimestamp: &deleting,
			Labels: map[string]string{
				"propagationpolicy.karmada.io/permanent-id": "p-1", "app": "web",
			},
			Annotations: map[string]string{
				HandoverAnnotation:                    `{"original":[{"name":"member1","replicas":2}]}`,
				"policy.karmada.io/applied-placement": `{"clusterAffinity":{"clusterNames":["member1","member2"]}}`,
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "app", UID: "d-1"}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "scheduler", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:clusters":{}}}`)}}},
		},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "app", UID: "d-1"},
			Replicas: 3,
			ReplicaRequirements: &workv1alpha2.ReplicaRequirements{ResourceRequest: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
			Clusters:              []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 1}},
			RescheduleTriggeredAt: &trigger,
			Placement: &policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas},
				},
			},
		},
		Status: workv1alpha2.ResourceBindingStatus{
			SchedulerObservedGeneration: 6,
			LastScheduledTime:           &trigger,
			Conditions: []metav1.Condition{{Type: workv1alpha2.Scheduled, Status: metav1.ConditionTrue, Reason: "Success",
				LastTransitionTime: trigger, ObservedGeneration: 6}},
			AggregatedStatus: []workv1alpha2.AggregatedStatusItem{{ClusterName: "member1", Applied: true, Health: workv1alpha2.ResourceHealthy,
				Status: &runtime.RawExtension{Raw: []byte(`{"readyReplicas":2,"replicas":2}`)}}},
		},
	}
}

// TestWireDecodingKeepsWhatTheTypedDecodingKeeps: a binding decoded off the
// wire is the Binding the typed clientset's object converts to.
func TestWireDecodingKeepsWhatTheTypedDecodingKeeps(t *testing.T) {
	tests := []struct {
		name string
		edit func(*workv1alpha2.ResourceBinding)
	}{
		{name: "every part filled"},
		{name: "no handover annotation, not deleting", edit: func(rb *workv1alpha2.ResourceBinding) {
			delete(rb.Annotations, HandoverAnnotation)
			rb.DeletionTimestamp = nil
		}},
		{name: "no annotations, labels or status", edit: func(rb *workv1alpha2.ResourceBinding) {
			rb.Annotations, rb.Labels, rb.Status = nil, nil, workv1alpha2.ResourceBindingStatus{}
		}},
		{name: "cluster-scoped", edit: func(rb *workv1alpha2.ResourceBinding) { rb.Namespace = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb := fullBinding()
			if tt.edit != nil {
				tt.edit(rb)
			}
			data, err := json.Marshal(rb)
			require.NoError(t, err)
			var o wireObject
			require.NoError(t, json.Unmarshal(data, &o))
			// The typed path decodes what the server sent, too.
			var typed workv1alpha2.ResourceBinding
			require.NoError(t, json.Unmarshal(data, &typed))
			assert.Equal(t, fromResourceBinding(&typed), o.binding())
		})
	}
}

// typedAfterWire is the Binding of rb as the typed clientset reads it
// from the server: times come back in the local zone.
func typedAfterWire(t *testing.T, rb *workv1alpha2.ResourceBinding) *Binding {
	t.Helper()
	data, err := json.Marshal(rb)
	require.NoError(t, err)
	var typed workv1alpha2.ResourceBinding
	require.NoError(t, json.Unmarshal(data, &typed))
	return fromResourceBinding(&typed)
}

// wireServer is an API server for one binding: it answers patches with
// answer (or with status code and body), lists with pages of two, and
// watches with events.
type wireServer struct {
	answer     *workv1alpha2.ResourceBinding
	code       int
	body       string
	events     []string
	gotPatch   string
	gotQueries []string
	gotAccept  []string
}

func (s *wireServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.gotQueries = append(s.gotQueries, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	s.gotAccept = append(s.gotAccept, r.Header.Get("Accept"))
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPatch:
		data, _ := io.ReadAll(r.Body)
		s.gotPatch = r.Header.Get("Content-Type") + " " + string(data)
		if s.code != 0 {
			w.WriteHeader(s.code)
			_, _ = io.WriteString(w, s.body)
			return
		}
		_ = json.NewEncoder(w).Encode(s.answer)
	case r.URL.Query().Get("watch") == "true":
		for _, ev := range s.events {
			_, _ = io.WriteString(w, ev+"\n")
		}
	default:
		items := []workv1alpha2.ResourceBinding{*s.answer, *s.answer}
		items[1].Name = "second"
		list := workv1alpha2.ResourceBindingList{ListMeta: metav1.ListMeta{ResourceVersion: "900", Continue: "next"}, Items: items}
		if r.URL.Query().Get("continue") == "next" {
			list.Continue, list.Items = "", items[:1]
		}
		_ = json.NewEncoder(w).Encode(list)
	}
}

func wireClientset(t *testing.T, s *wireServer) karmadaclient.Interface {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	client, err := karmadaclient.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	return client
}

func TestWirePatchTrigger(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	t.Run("the answer is decoded", func(t *testing.T) {
		s := &wireServer{answer: fullBinding()}
		api := NewBindingAPI(wireClientset(t, s))
		require.NotNil(t, api.(*clientsetAPI).wire, "a real clientset goes over the wire")
		b, err := api.PatchTrigger(context.Background(), TriggerWrite{Namespace: "shop", Name: "app-deployment", At: at})
		require.NoError(t, err)
		assert.Equal(t, typedAfterWire(t, fullBinding()), b)
		assert.Equal(t, `application/json-patch+json [{"op":"test","path":"/spec/rescheduleTriggeredAt","value":null},{"op":"add","path":"/spec/rescheduleTriggeredAt","value":"2026-01-02T03:00:00Z"}]`, s.gotPatch)
		assert.Equal(t, []string{"PATCH /apis/work.karmada.io/v1alpha2/namespaces/shop/resourcebindings/app-deployment?"}, s.gotQueries)
	})
	t.Run("a cluster-scoped binding, dry run", func(t *testing.T) {
		s := &wireServer{answer: fullBinding()}
		_, err := NewBindingAPI(wireClientset(t, s)).PatchTrigger(context.Background(), TriggerWrite{Name: "app-deployment", At: at, DryRun: true})
		require.NoError(t, err)
		assert.Equal(t, []string{"PATCH /apis/work.karmada.io/v1alpha2/clusterresourcebindings/app-deployment?dryRun=All"}, s.gotQueries)
	})
	t.Run("a failed test is a changed trigger", func(t *testing.T) {
		status := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", "", 0, false).ErrStatus
		status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"} // as the API server sends it
		body, _ := json.Marshal(status)
		s := &wireServer{code: http.StatusUnprocessableEntity, body: string(body)}
		_, err := NewBindingAPI(wireClientset(t, s)).PatchTrigger(context.Background(), TriggerWrite{Namespace: "shop", Name: "app-deployment", At: at})
		assert.ErrorIs(t, err, ErrTriggerChanged)
	})
	t.Run("a conflict stays a conflict", func(t *testing.T) {
		status := apierrors.NewConflict(workv1alpha2.Resource("resourcebindings"), "app-deployment", fmt.Errorf("changed")).ErrStatus
		status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"} // as the API server sends it
		body, _ := json.Marshal(status)
		s := &wireServer{code: http.StatusConflict, body: string(body)}
		_, err := NewBindingAPI(wireClientset(t, s)).PatchTrigger(context.Background(), TriggerWrite{Namespace: "shop", Name: "app-deployment", At: at, ResourceVersion: "5"})
		assert.True(t, apierrors.IsConflict(err), "got %v", err)
	})
}

func TestWireWatch(t *testing.T) {
	rb := fullBinding()
	data, err := json.Marshal(rb)
	require.NoError(t, err)
	gone, err := json.Marshal(apierrors.NewResourceExpired("too old resource version: 1 (812)").ErrStatus)
	require.NoError(t, err)
	s := &wireServer{events: []string{
		`{"type":"ADDED","object":` + string(data) + `}`,
		`{"type":"BOOKMARK","object":{"kind":"ResourceBinding","apiVersion":"work.karmada.io/v1alpha2","metadata":{"resourceVersion":"815"}}}`,
		`{"type":"DELETED","object":` + string(data) + `}`,
		`{"type":"ERROR","object":` + string(gone) + `}`,
	}}
	w, err := NewBindingAPI(wireClientset(t, s)).Watch(context.Background(), Scope{Namespace: "shop"}, "800")
	require.NoError(t, err)
	defer w.Stop()
	var got []watch.Event
	for ev := range w.ResultChan() {
		got = append(got, ev)
	}
	require.Len(t, got, 4)
	assert.Equal(t, watch.Added, got[0].Type)
	assert.Equal(t, typedAfterWire(t, rb), fromObject(got[0].Object))
	assert.Equal(t, watch.Bookmark, got[1].Type)
	m, err := meta.Accessor(got[1].Object)
	require.NoError(t, err)
	assert.Equal(t, "815", m.GetResourceVersion())
	assert.Equal(t, watch.Deleted, got[2].Type)
	assert.Equal(t, "app-deployment", fromObject(got[2].Object).Name)
	assert.Equal(t, watch.Error, got[3].Type)
	assert.True(t, isExpired(apierrors.FromObject(got[3].Object)), "got %#v", got[3].Object)
	assert.Equal(t, []string{"GET /apis/work.karmada.io/v1alpha2/namespaces/shop/resourcebindings?allowWatchBookmarks=true&resourceVersion=800&watch=true"}, s.gotQueries)
	copied := got[0].Object.DeepCopyObject()
	assert.Equal(t, fromObject(got[0].Object), fromObject(copied))
}

func TestListBindingsPage(t *testing.T) {
	s := &wireServer{answer: fullBinding()}
	client := wireClientset(t, s)
	page, list, err := ListBindingsPage(context.Background(), client, "shop", false, metav1.ListOptions{Limit: 2})
	require.NoError(t, err)
	require.Len(t, page, 2)
	assert.Equal(t, typedAfterWire(t, fullBinding()), page[0])
	assert.Equal(t, "second", page[1].Name)
	assert.Equal(t, metav1.ListMeta{ResourceVersion: "900", Continue: "next"}, list)
	_, list, err = ListBindingsPage(context.Background(), client, "shop", false, metav1.ListOptions{Limit: 2, Continue: list.Continue})
	require.NoError(t, err)
	assert.Empty(t, list.Continue)
	assert.Equal(t, []string{
		"GET /apis/work.karmada.io/v1alpha2/namespaces/shop/resourcebindings?limit=2",
		"GET /apis/work.karmada.io/v1alpha2/namespaces/shop/resourcebindings?continue=next&limit=2",
	}, s.gotQueries)
	assert.Equal(t, []string{"application/json", "application/json"}, s.gotAccept, "decoded as JSON, so asked for as JSON")

	// A fake clientset sends no requests: the typed path serves it.
	fake := karmadafake.NewSimpleClientset(fullBinding())
	assert.Nil(t, newWireClient(fake))
	page, _, err = ListBindingsPage(context.Background(), fake, "shop", false, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, fromResourceBinding(fullBinding()), page[0])
}
