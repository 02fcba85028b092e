package deschedule

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// rawBindingServer serves one ResourceBinding as JSON that the Karmada types
// do not fully know, the way an API server of a newer release stores it: a
// GET or LIST returns it as stored, a PATCH applies to the stored JSON, a
// PUT stores the body as sent.
type rawBindingServer struct {
	mu     sync.Mutex
	stored []byte
	verbs  []string
}

func (s *rawBindingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.verbs = append(s.verbs, r.Method)
	w.Header().Set("Content-Type", "application/json")
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/resourcebindings"):
		_, _ = w.Write([]byte(`{"apiVersion":"work.karmada.io/v1alpha2","kind":"ResourceBindingList","metadata":{"resourceVersion":"1"},"items":[` + string(s.stored) + `]}`))
	case r.Method == http.MethodGet:
		_, _ = w.Write(s.stored)
	case r.Method == http.MethodPatch:
		patch, err := jsonpatch.DecodePatch(body)
		if err == nil {
			var patched []byte
			if patched, err = patch.Apply(s.stored); err == nil {
				s.stored = patched
				_, _ = w.Write(s.stored)
				return
			}
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"` + err.Error() + `","code":422}`))
	case r.Method == http.MethodPut:
		s.stored = body
		_, _ = w.Write(s.stored)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// oneTemplate lists the template of Deployment default/web.
type oneTemplate struct{}

func (oneTemplate) ListTemplates(context.Context, schema.GroupVersionKind, string, labels.Selector) ([]metav1.PartialObjectMetadata, error) {
	return []metav1.PartialObjectMetadata{{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
	}}, nil
}

// The descheduler writes a binding by a patch of the fields it owns: a field
// of the binding that the Karmada types it is built with do not know (here
// v1.19's spec.clusters[].components, and a top-level one) is still there
// after the write, on every entry.
func TestPassKeepsFieldsOurTypesLack(t *testing.T) {
	rb := newBinding("default", "web", cluster{"m1", 4, 1}, cluster{"m2", 2, 2})
	raw, err := json.Marshal(rb)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	doc["apiVersion"], doc["kind"] = "work.karmada.io/v1alpha2", "ResourceBinding"
	spec := doc["spec"].(map[string]any)
	for _, c := range spec["clusters"].([]any) {
		c.(map[string]any)["components"] = []any{map[string]any{"name": "main", "replicas": 1}}
	}
	spec["newerField"] = "kept"
	server := &rawBindingServer{}
	server.stored, err = json.Marshal(doc)
	require.NoError(t, err)
	api := httptest.NewServer(server)
	defer api.Close()
	karmada, err := karmadaclientset.NewForConfig(&rest.Config{Host: api.URL})
	require.NoError(t, err)

	members := map[string]*fake.Clientset{
		"m1": memberCluster(memberWorkload{"default", "web", 1, 3}),
		"m2": memberCluster(memberWorkload{"default", "web", 2, 0}),
	}
	pods := NewClientPodSource(func(cluster string) (kubernetes.Interface, error) { return members[cluster], nil })
	events := NewEventClient(fake.NewClientset(), EventComponent)
	d, err := New(karmada, pods, events, Options{Now: func() time.Time { return testNow }, UnschedulableThreshold: DefaultUnschedulableThreshold, Templates: oneTemplate{}})
	require.NoError(t, err)
	result, err := d.Pass(context.Background())
	require.NoError(t, err)
	require.Len(t, result.Bindings, 1)
	require.Equal(t, OutcomeDescheduled, result.Bindings[0].Outcome, "%v", result.Bindings[0].Err)

	var after map[string]any
	require.NoError(t, json.Unmarshal(server.stored, &after))
	clusters := after["spec"].(map[string]any)["clusters"].([]any)
	require.Len(t, clusters, 2)
	for _, c := range clusters {
		assert.Equal(t, []any{map[string]any{"name": "main", "replicas": float64(1)}}, c.(map[string]any)["components"], "components of %v", c)
	}
	assert.Equal(t, float64(1), clusters[0].(map[string]any)["replicas"], "m1 lowered by its 3 unschedulable replicas")
	assert.Equal(t, float64(2), clusters[1].(map[string]any)["replicas"])
	assert.Equal(t, "kept", after["spec"].(map[string]any)["newerField"])
	assert.Contains(t, after["metadata"].(map[string]any)["annotations"], EvictionsAnnotation)
	assert.NotContains(t, server.verbs, http.MethodPut, "no full update")
}
