package interrupt

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// leasingAPI is a Karmada apiserver small enough to lead against: it serves
// discovery, empty lists of clusters and bindings, watches that stay open,
// events, and Leases kept in memory, so that a daemon wins its election and
// renews it as on a real server. Once hang is called, it answers nothing any
// more, for good: every request after that is taken from net/http and held,
// open and unanswered, until the test ends.
type leasingAPI struct {
	*httptest.Server
	t       *testing.T
	hanging atomic.Bool
	reached chan struct{} // closed once a request met the hang
	once    sync.Once
	mu      sync.Mutex
	leases  map[string]*coordinationv1.Lease
	version int
	held    []net.Conn
}

func newLeasingAPI(t *testing.T) *leasingAPI {
	t.Helper()
	a := &leasingAPI{t: t, reached: make(chan struct{}), leases: map[string]*coordinationv1.Lease{}}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(func() {
		a.mu.Lock()
		for _, c := range a.held {
			_ = c.Close()
		}
		a.mu.Unlock()
		a.CloseClientConnections()
		a.Close()
	})
	return a
}

// hang makes the server stop answering from now on.
func (a *leasingAPI) hang() { a.hanging.Store(true) }

const leasesPrefix = "/apis/coordination.k8s.io/v1/namespaces/"

func (a *leasingAPI) serve(w http.ResponseWriter, r *http.Request) {
	if a.hanging.Load() {
		a.hold(w)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, leasesPrefix) && strings.Contains(r.URL.Path, "/leases"):
		a.lease(w, r)
	case r.URL.Query().Get("watch") == "true":
		// A watch that sees no change: open until the client leaves. A
		// watch that lists first (client-go's informers) is told at once
		// that the list, empty, is done.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			// The bookmark is of the watched kind: an informer refuses
			// another (the failback daemon follows bindings too).
			apiVersion, kind := watchedKind(r.URL.Path)
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{
				"kind": kind, "apiVersion": apiVersion,
				"metadata": map[string]any{"resourceVersion": "1", "annotations": map[string]any{"k8s.io/initial-events-end": "true"}}}})
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events"):
		answer(w, http.StatusCreated, map[string]any{"kind": "Event", "apiVersion": "v1", "metadata": map[string]any{"name": "event"}})
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/resourcebindings"):
		answer(w, http.StatusOK, emptyList("work.karmada.io/v1alpha2", "ResourceBindingList"))
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/workloadrebalancers"):
		answer(w, http.StatusOK, emptyList("apps.karmada.io/v1alpha1", "WorkloadRebalancerList"))
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/clusterresourcebindings"):
		answer(w, http.StatusOK, emptyList("work.karmada.io/v1alpha2", "ClusterResourceBindingList"))
	default:
		if doc := discovery(r.URL.Path); doc != nil && r.Method == http.MethodGet {
			answer(w, http.StatusOK, doc)
			return
		}
		answer(w, http.StatusNotFound, notFound(r.URL.Path))
	}
}

// watchedKind is the apiVersion and kind of the objects a watch of path
// streams.
func watchedKind(path string) (string, string) {
	switch {
	case strings.HasSuffix(path, "/resourcebindings"):
		return "work.karmada.io/v1alpha2", "ResourceBinding"
	case strings.HasSuffix(path, "/clusterresourcebindings"):
		return "work.karmada.io/v1alpha2", "ClusterResourceBinding"
	case strings.HasSuffix(path, "/workloadrebalancers"):
		return "apps.karmada.io/v1alpha1", "WorkloadRebalancer"
	}
	return "cluster.karmada.io/v1alpha1", "Cluster"
}

// hold takes the connection from net/http and never answers on it.
func (a *leasingAPI) hold(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	a.mu.Lock()
	a.held = append(a.held, conn)
	a.mu.Unlock()
	a.once.Do(func() { close(a.reached) })
}

// lease serves get, create and update of the Leases in memory, with the
// resourceVersion check a real server makes. Leases come as protobuf (as
// daemons send them) or JSON, and go back as JSON.
func (a *leasingAPI) lease(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, leasesPrefix), "/") // ns, leases[, name]
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && len(parts) == 3:
		lease, ok := a.leases[parts[0]+"/"+parts[2]]
		if !ok {
			answer(w, http.StatusNotFound, notFound(r.URL.Path))
			return
		}
		answer(w, http.StatusOK, lease)
	case (r.Method == http.MethodPost && len(parts) == 2) || (r.Method == http.MethodPut && len(parts) == 3):
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		lease := &coordinationv1.Lease{}
		if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, lease); err != nil {
			answer(w, http.StatusBadRequest, notFound(r.URL.Path))
			return
		}
		key := parts[0] + "/" + lease.Name
		stored, exists := a.leases[key]
		if r.Method == http.MethodPost && exists || r.Method == http.MethodPut && (!exists || stored.ResourceVersion != lease.ResourceVersion) {
			answer(w, http.StatusConflict, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409})
			return
		}
		a.version++
		lease.Namespace, lease.ResourceVersion = parts[0], fmt.Sprint(a.version)
		lease.Kind, lease.APIVersion = "Lease", "coordination.k8s.io/v1"
		a.leases[key] = lease
		code := http.StatusOK
		if r.Method == http.MethodPost {
			code = http.StatusCreated
		}
		answer(w, code, lease)
	default:
		answer(w, http.StatusNotFound, notFound(r.URL.Path))
	}
}

func answer(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

func emptyList(apiVersion, kind string) any {
	return map[string]any{"kind": kind, "apiVersion": apiVersion, "metadata": map[string]any{"resourceVersion": "1"}, "items": []any{}}
}

func notFound(path string) any {
	return map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
		"message": path + " not found"}
}

// TestSignalEndsALeadingDaemonWhoseServerHangs lets a daemon win its Lease
// on a server that answers, then makes the server hang for good and stops
// the daemon with SIGTERM while its renewal waits for an answer. Its way out
// (the write in flight, the Lease's release, the last events) shares one
// shutdown budget of about a second, so it ends within bound, and says that
// the Lease was not released: a standby waits for it to expire.
func TestSignalEndsALeadingDaemonWhoseServerHangs(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "deschedule daemon", args: []string{"deschedule", "--interval", "1m"}},
		{name: "failback daemon", args: []string{"failback", "-A"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newLeasingAPI(t)
			p := startPlugin(t, append([]string{"--kubeconfig", kubeconfigFor(t, api.URL), "--cache-dir", t.TempDir(),
				"--leader-elect-retry-period", "200ms", "--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, tt.args...)...)
			if !assert.Eventually(t, func() bool { return strings.Contains(p.stderr.String(), "msg=leading") }, 30*time.Second, 20*time.Millisecond) {
				require.FailNow(t, "the daemon never led", "stderr:\n%s", p.stderr.String())
			}
			api.hang()
			select {
			case <-api.reached:
				time.Sleep(200 * time.Millisecond) // the renewal is waiting
			case <-time.After(10 * time.Second):
				require.FailNow(t, "the daemon made no request after the server began to hang", "stderr:\n%s", p.stderr.String())
			}
			code, ended := p.stop(t, syscall.SIGTERM)
			require.True(t, ended, "SIGTERM did not end the leading daemon within %s while the server hung", bound)
			assert.Equal(t, 0, code)
			stderr := p.stderr.String()
			assert.Contains(t, stderr, "did not release the lease")
			assert.Contains(t, stderr, "msg=stopped")
		})
	}
}
