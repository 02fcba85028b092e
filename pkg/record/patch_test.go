package record

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
	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// rawRebalancerServer serves one WorkloadRebalancer as raw JSON, so that it
// can hold fields our Go types lack (a newer Karmada's): GET, PATCH (JSON
// or merge patch, on the object or its status, with a resourceVersion
// precondition) and PUT, which stores what it is sent.
type rawRebalancerServer struct {
	mu     sync.Mutex
	stored []byte
	rv     int
	verbs  []string
}

func (s *rawRebalancerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.verbs = append(s.verbs, r.Method)
	w.Header().Set("Content-Type", "application/json")
	body, _ := io.ReadAll(r.Body)
	fail := func(code int, msg string) {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":` + quote(msg) + `,"code":` + itoa(code) + `}`))
	}
	var next []byte
	var err error
	switch r.Method {
	case http.MethodGet:
		_, _ = w.Write(s.stored)
		return
	case http.MethodPatch:
		switch r.Header.Get("Content-Type") {
		case "application/json-patch+json":
			var patch jsonpatch.Patch
			if patch, err = jsonpatch.DecodePatch(body); err == nil {
				next, err = patch.Apply(s.stored)
			}
		default:
			var meta struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(body, &meta)
			if rv := meta.Metadata.ResourceVersion; rv != "" && rv != itoa(s.rv) {
				fail(http.StatusConflict, "the object has been modified")
				return
			}
			next, err = jsonpatch.MergePatch(s.stored, body)
		}
	case http.MethodPut:
		next = body
	default:
		fail(http.StatusNotFound, "not found")
		return
	}
	if err != nil {
		fail(http.StatusUnprocessableEntity, err.Error())
		return
	}
	s.rv++
	var doc map[string]any
	_ = json.Unmarshal(next, &doc)
	doc["metadata"].(map[string]any)["resourceVersion"] = itoa(s.rv)
	s.stored, _ = json.Marshal(doc)
	_, _ = w.Write(s.stored)
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
func itoa(n int) string     { b, _ := json.Marshal(n); return string(b) }

// Writing a record changes only the fields the plugin owns: a field of the
// spec and one of the status that our types lack (a newer Karmada's) are
// still there after a reconciliation and a spec change.
func TestRecordWritesKeepFieldsOurTypesLack(t *testing.T) {
	doc := map[string]any{
		"apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer",
		"metadata": map[string]any{"name": "demo", "uid": "uid-1", "generation": 1, "resourceVersion": "1",
			"creationTimestamp": serverNow.Format(time.RFC3339)},
		"spec": map[string]any{"workloads": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web"}},
			"newerSpecField": "kept"},
		"status": map[string]any{"newerStatusField": "kept"},
	}
	server := &rawRebalancerServer{rv: 1}
	var err error
	server.stored, err = json.Marshal(doc)
	require.NoError(t, err)
	api := httptest.NewServer(server)
	defer api.Close()
	karmada, err := karmadaclientset.NewForConfig(&rest.Config{Host: api.URL})
	require.NoError(t, err)
	bindings := karmadafake.NewSimpleClientset(scheduled(webDeploy, webDeploy, ""))
	clock := rebalance.NewServerClock()
	clock.Observe(time.Now())
	rec := &Recorder{
		Client:  karmada.AppsV1alpha1().WorkloadRebalancers(),
		Runner:  &rebalance.Runner{API: rebalance.NewBindingAPI(bindings), Clock: clock, Options: rebalance.Options{Workers: 1}},
		Backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30},
	}
	ctx := context.Background()
	rb, err := rec.Client.Get(ctx, "demo", metav1.GetOptions{})
	require.NoError(t, err)

	pass, err := rec.Reconcile(ctx, rb)
	require.NoError(t, err)
	require.Len(t, pass.Rebalancer.Status.ObservedWorkloads, 1)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, pass.Rebalancer.Status.ObservedWorkloads[0].Result)

	desired := pass.Rebalancer.DeepCopy()
	ttl := int32(30)
	desired.Spec.TTLSecondsAfterFinished = &ttl
	_, applied, err := rec.Apply(ctx, desired, ApplyOptions{UpdateSpec: true})
	require.NoError(t, err)
	assert.Equal(t, AppliedConfigured, applied)

	var after map[string]any
	require.NoError(t, json.Unmarshal(server.stored, &after))
	assert.Equal(t, "kept", after["spec"].(map[string]any)["newerSpecField"])
	assert.Equal(t, "kept", after["status"].(map[string]any)["newerStatusField"])
	assert.Equal(t, float64(30), after["spec"].(map[string]any)["ttlSecondsAfterFinished"])
	assert.NotContains(t, strings.Join(server.verbs, " "), http.MethodPut, "no full update")
}
