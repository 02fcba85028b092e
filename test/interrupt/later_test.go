package interrupt

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stallingAPI answers discovery as a Karmada apiserver does and stalls for
// good on the first request whose "METHOD path" starts with stallOn: it
// takes the connection from net/http (so no handler returns, and nothing
// the test does releases it) and, when body is set, sends the headers of an
// answer and the first byte of its body; otherwise nothing.
type stallingAPI struct {
	*httptest.Server
	reached chan struct{}
	once    sync.Once
	mu      sync.Mutex
	held    []net.Conn
}

func newStallingAPI(t *testing.T, stallOn string, body bool) *stallingAPI {
	t.Helper()
	a := &stallingAPI{reached: make(chan struct{})}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Method+" "+r.URL.Path, stallOn) {
			a.stall(w, body)
			return
		}
		doc := discovery(r.URL.Path)
		if doc == nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(func() {
		a.mu.Lock()
		for _, c := range a.held {
			_ = c.Close()
		}
		a.mu.Unlock()
		a.Close()
	})
	return a
}

func (a *stallingAPI) stall(w http.ResponseWriter, body bool) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if body {
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{")
		_ = buf.Flush()
	}
	a.mu.Lock()
	a.held = append(a.held, conn)
	a.mu.Unlock()
	a.once.Do(func() { close(a.reached) })
}

// discovery returns the discovery document of path (and an empty list of
// clusters), nil for another path.
func discovery(path string) any {
	group := func(name, version string) any {
		gv := map[string]any{"groupVersion": name + "/" + version, "version": version}
		return map[string]any{"name": name, "versions": []any{gv}, "preferredVersion": gv}
	}
	resource := func(name, kind string, namespaced bool, shortNames ...string) any {
		return map[string]any{"name": name, "singularName": strings.ToLower(kind), "kind": kind, "namespaced": namespaced,
			"shortNames": shortNames, "verbs": []string{"get", "list", "watch", "create", "update", "patch", "delete"}}
	}
	list := func(gv string, resources ...any) any {
		return map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
	}
	switch path {
	case "/api":
		return map[string]any{"kind": "APIVersions", "versions": []string{"v1"},
			"serverAddressByClientCIDRs": []any{map[string]any{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}}}
	case "/apis":
		return map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": []any{
			group("apps", "v1"), group("work.karmada.io", "v1alpha2"), group("apps.karmada.io", "v1alpha1"), group("cluster.karmada.io", "v1alpha1")}}
	case "/api/v1":
		return list("v1", resource("namespaces", "Namespace", false), resource("events", "Event", true))
	case "/apis/apps/v1":
		return list("apps/v1", resource("deployments", "Deployment", true, "deploy"))
	case "/apis/work.karmada.io/v1alpha2":
		return list("work.karmada.io/v1alpha2", resource("resourcebindings", "ResourceBinding", true),
			resource("clusterresourcebindings", "ClusterResourceBinding", false))
	case "/apis/apps.karmada.io/v1alpha1":
		return list("apps.karmada.io/v1alpha1", resource("workloadrebalancers", "WorkloadRebalancer", false))
	case "/apis/cluster.karmada.io/v1alpha1":
		return list("cluster.karmada.io/v1alpha1", resource("clusters", "Cluster", false))
	case "/apis/cluster.karmada.io/v1alpha1/clusters":
		return map[string]any{"kind": "ClusterList", "apiVersion": "cluster.karmada.io/v1alpha1", "metadata": map[string]any{}, "items": []any{}}
	}
	return nil
}

const bindingsPath = "/apis/work.karmada.io/v1alpha2/namespaces/default/resourcebindings"

// TestSignalEndsACommandStuckAfterDiscovery stops commands that got past
// discovery and are stuck in a later request: the template list of
// --all, a binding read, plan's reads. Each stall is tried with a server
// that sends nothing and with one that stops in the body.
func TestSignalEndsACommandStuckAfterDiscovery(t *testing.T) {
	tests := []struct {
		name    string
		stallOn string
		args    []string
		code    int
		want    string
	}{
		{name: "template list", stallOn: "GET /apis/apps/v1/namespaces/default/deployments", args: []string{"deployments", "--all"}, code: 3,
			want: "error: interrupted before any binding was read; nothing was written"},
		{name: "binding read", stallOn: "GET " + bindingsPath, args: []string{"deploy/web"}, code: 3,
			want: "interrupted: 0 trigger(s) written, 1 workload(s) not triggered (pending)"},
		{name: "binding read of a dry run", stallOn: "GET " + bindingsPath, args: []string{"deploy/web", "--dry-run=client"}, code: 0,
			want: "interrupted: a dry run, nothing was written"},
		{name: "plan's reads", stallOn: "GET " + bindingsPath, args: []string{"plan", "deploy/web", "--scheduler-estimator=disabled"}, code: 3,
			want: "error: interrupted before the bindings and clusters were read; nothing was predicted, and plan writes nothing"},
	}
	for _, body := range []bool{false, true} {
		for _, tt := range tests {
			name := tt.name + "/nothing"
			if body {
				name = tt.name + "/headers then no body"
			}
			t.Run(name, func(t *testing.T) {
				api := newStallingAPI(t, tt.stallOn, body)
				p := startPlugin(t, append([]string{"--kubeconfig", kubeconfigFor(t, api.URL), "--cache-dir", t.TempDir()}, tt.args...)...)
				select {
				case <-api.reached:
				case <-p.done:
					require.FailNow(t, "the command ended before it got to the stall", "stderr:\n%s", p.stderr.String())
				}
				code, ended := p.stop(t, syscall.SIGINT)
				require.True(t, ended, "SIGINT did not end the command within %s while the server hung", bound)
				assert.Equal(t, tt.code, code)
				assert.Contains(t, p.stderr.String(), tt.want)
			})
		}
	}
}

// TestTimeoutEndsPlanStuckInItsReads lets plan's --timeout run out while
// the server holds its read of the bindings.
func TestTimeoutEndsPlanStuckInItsReads(t *testing.T) {
	api := newStallingAPI(t, "GET "+bindingsPath, true)
	p := startPlugin(t, "--kubeconfig", kubeconfigFor(t, api.URL), "--cache-dir", t.TempDir(),
		"plan", "deploy/web", "--scheduler-estimator=disabled", "--timeout", "2s")
	code, took, ended := p.endsWithin(2*time.Second + bound)
	t.Logf("exit %d after %s (ended: %t); stderr:\n%s", code, took.Round(time.Millisecond), ended, p.stderr.String())
	require.True(t, ended, "plan outlived its 2s deadline by more than %s while the server hung", bound)
	assert.Equal(t, 3, code)
	assert.Contains(t, p.stderr.String(), "error: --timeout 2s ran out before the bindings and clusters were read")
}
