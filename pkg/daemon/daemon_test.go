package daemon

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/reference"
)

func TestHealthEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "kubectl_rebalance_test_total", Help: "a test counter"}))
	h := NewHealth(true)
	server := httptest.NewServer(h.Handler(reg))
	defer server.Close()

	get := func(path string) (int, string) {
		resp, err := http.Get(server.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		var buf [4096]byte
		n, _ := resp.Body.Read(buf[:])
		return resp.StatusCode, string(buf[:n])
	}
	code, _ := get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	h.SetReady(true)
	code, body := get("/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok (standby)\n", body)
	h.SetLeading(true)
	_, body = get("/readyz")
	assert.Equal(t, "ok (leader)\n", body)
	code, _ = get("/healthz")
	assert.Equal(t, http.StatusOK, code)
	code, body = get("/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "kubectl_rebalance_test_total")
}

// TestSeparateHandlers checks that probes and metrics can be served apart,
// as with different --health-probe-bind-address and --metrics-bind-address.
func TestSeparateHandlers(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "kubectl_rebalance_test_total", Help: "a test counter"}))
	h := NewHealth(false)
	h.SetReady(true)
	probes := httptest.NewServer(h.ProbeHandler())
	defer probes.Close()
	metrics := httptest.NewServer(MetricsHandler(reg))
	defer metrics.Close()
	status := func(base, path string) int {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, status(probes.URL, "/healthz"))
	assert.Equal(t, http.StatusOK, status(probes.URL, "/readyz"))
	assert.Equal(t, http.StatusNotFound, status(probes.URL, "/metrics"))
	assert.Equal(t, http.StatusOK, status(metrics.URL, "/metrics"))
	assert.Equal(t, http.StatusNotFound, status(metrics.URL, "/healthz"))
}

// TestProfilingHandler checks what --enable-pprof serves: Go's profiles, and
// nothing of the metrics or probes.
func TestProfilingHandler(t *testing.T) {
	server := httptest.NewServer(ProfilingHandler())
	defer server.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(server.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("/debug/pprof/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine")
	code, body = get("/debug/pprof/goroutine?debug=1")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine profile")
	code, _ = get("/metrics")
	assert.Equal(t, http.StatusNotFound, code)
}

func TestServeReportsBusyPort(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addr, done, err := Serve(ctx, "127.0.0.1:0", "metrics-bind-address", http.NotFoundHandler(), nil)
	require.NoError(t, err)
	_, _, err = Serve(ctx, addr.String(), "health-probe-bind-address", http.NotFoundHandler(), nil)
	assert.ErrorContains(t, err, "cannot listen on "+addr.String()+", choose another --health-probe-bind-address")
	cancel()
	assert.NoError(t, <-done)
}

func TestNilHealth(t *testing.T) {
	var h *Health
	h.SetReady(true)
	h.SetLeading(true)
	assert.False(t, h.IsReady())
	assert.Nil(t, h.Watchdog())
}

// TestEventRecorderFlush records events through client-go's broadcaster
// and checks that Flush returns only once they are stored, with the
// daemon's source, and that its marker never reaches the server.
func TestEventRecorderFlush(t *testing.T) {
	kube := fake.NewClientset()
	r := NewEventRecorder(kube, "test-daemon", "host-1")
	defer r.Shutdown()
	for _, name := range []string{"a", "b", "c"} {
		rb := &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name + "-deployment"}}
		require.NoError(t, r.WriteEvent(context.Background(), rb, corev1.EventTypeNormal, "Moved", "moved"))
		template := &corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-a", Name: name}
		require.NoError(t, r.WriteEvent(context.Background(), template, corev1.EventTypeNormal, "Moved", "moved"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.Flush(ctx))

	events, err := kube.CoreV1().Events("team-a").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, events.Items, 6)
	for _, e := range events.Items {
		assert.Equal(t, corev1.EventSource{Component: "test-daemon", Host: "host-1"}, e.Source)
		assert.Equal(t, "Moved", e.Reason)
	}
	markers, err := kube.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, markers.Items, "the flush marker is never written")

	stopped, stop := context.WithCancel(context.Background())
	stop()
	assert.Error(t, stoppedRecorder(t).Flush(stopped))
}

// stoppedRecorder is a recorder whose broadcaster is shut down,
// so that a Flush can only end with its context.
func stoppedRecorder(t *testing.T) *EventRecorder {
	r := NewEventRecorder(fake.NewClientset(), "test-daemon", "")
	r.Shutdown()
	return r
}

// TestEventSchemeNamesClusters checks that a Cluster read by a typed client
// (no TypeMeta) can be the object of an event.
func TestEventSchemeNamesClusters(t *testing.T) {
	ref, err := reference.GetReference(EventScheme(), &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1", UID: "u1"}})
	require.NoError(t, err)
	assert.Equal(t, "Cluster", ref.Kind)
	assert.Equal(t, "cluster.karmada.io/v1alpha1", ref.APIVersion)
	assert.Equal(t, "member1", ref.Name)
}

// TestEventRecorderReasonsAreRateLimitedApart checks that a flood of one
// reason about an object (a run reporting every workload on its
// WorkloadRebalancer) does not use up the budget of another reason about it
// (the run's end), which client-go's default spam filter would drop after
// 25 events about the object.
func TestEventRecorderReasonsAreRateLimitedApart(t *testing.T) {
	kube := fake.NewClientset()
	r := NewEventRecorder(kube, "test", "")
	defer r.Shutdown()
	rb := &appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: "fleet", UID: "u1"}}
	for i := range 40 {
		r.Recorder().Eventf(rb, corev1.EventTypeNormal, "WorkloadRescheduled", "workload %d rescheduled", i)
	}
	r.Recorder().Event(rb, corev1.EventTypeNormal, "RebalanceFinished", "done")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.Flush(ctx))
	events, err := kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var reasons []string
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason)
		assert.Equal(t, "WorkloadRebalancer", e.InvolvedObject.Kind, "a typed WorkloadRebalancer is named by the scheme")
		assert.Equal(t, "apps.karmada.io/v1alpha1", e.InvolvedObject.APIVersion)
	}
	assert.Contains(t, reasons, "RebalanceFinished")
	assert.NoError(t, r.Err())
}

// TestEventRecorderErr checks that a refused event write is kept for the
// caller to report, as client-go's recorder only logs it.
func TestEventRecorderErr(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New("no"))
	})
	r := NewEventRecorder(kube, "test", "")
	defer r.Shutdown()
	r.Recorder().Event(&appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}}, corev1.EventTypeNormal, "RebalanceStarted", "started")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.Flush(ctx))
	require.Error(t, r.Err())
	assert.True(t, apierrors.IsForbidden(r.Err()))
}
