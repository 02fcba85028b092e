package cmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeServer is an HTTP server that answers like a Karmada apiserver just far
// enough for the command's client-side messages to be tested: discovery, and
// whatever each test adds. It never proves a feature (test/e2e does that on a
// real control plane); it makes a server misbehave on purpose.
type fakeServer struct {
	*httptest.Server
	// plain leaves out Karmada's groups: a kube-apiserver without Karmada.
	plain bool
	// noRebalancer leaves out apps.karmada.io: Karmada older than v1.10.
	noRebalancer bool
	// deadlines, when the test installed them, end the run's --timeout
	// (see expiring).
	deadlines *testDeadlines

	mu      sync.Mutex
	routes  []fakeRoute
	objects map[string]any
	seen    []string
}

// fakeRoute answers the requests whose "METHOD path" starts with prefix.
type fakeRoute struct {
	prefix  string
	handler http.HandlerFunc
}

func newFakeServer(t testing.TB) *fakeServer {
	t.Helper()
	s := &fakeServer{objects: map[string]any{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// on answers requests matching "METHOD /path-prefix" with h, before anything else.
func (s *fakeServer) on(prefix string, h http.HandlerFunc) *fakeServer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes = append(s.routes, fakeRoute{prefix: prefix, handler: h})
	return s
}

// object serves obj as JSON at path (GET).
func (s *fakeServer) object(path string, obj any) *fakeServer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[path] = obj
	return s
}

// requests returns the "METHOD path" of every request seen so far.
func (s *fakeServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func (s *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	s.mu.Lock()
	s.seen = append(s.seen, key)
	var handler http.HandlerFunc
	for _, route := range s.routes {
		if strings.HasPrefix(key, route.prefix) {
			handler = route.handler
			break
		}
	}
	obj, found := s.objects[r.URL.Path]
	s.mu.Unlock()
	if handler != nil {
		handler(w, r)
		return
	}
	s.answerDefault(w, r, obj, found)
}

// passThrough answers r as if no route matched.
func (s *fakeServer) passThrough(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	obj, found := s.objects[r.URL.Path]
	s.mu.Unlock()
	s.answerDefault(w, r, obj, found)
}

func (s *fakeServer) answerDefault(w http.ResponseWriter, r *http.Request, obj any, found bool) {
	if r.Method == http.MethodGet && found {
		writeJSON(w, http.StatusOK, obj)
		return
	}
	if r.Method == http.MethodGet {
		if body := s.discovery(r.URL.Path); body != nil {
			writeJSON(w, http.StatusOK, body)
			return
		}
	}
	writeStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource", nil)
}

// discovery answers the discovery documents of a Karmada apiserver.
func (s *fakeServer) discovery(path string) any {
	groups := []any{group("apps", "v1")}
	if !s.plain {
		groups = append(groups, group("work.karmada.io", "v1alpha2"))
		if !s.noRebalancer {
			groups = append(groups, group("apps.karmada.io", "v1alpha1"))
		}
	}
	switch path {
	case "/version":
		return map[string]any{"major": "1", "minor": "31", "gitVersion": "v1.31.0"}
	case "/api":
		return map[string]any{"kind": "APIVersions", "versions": []string{"v1"},
			"serverAddressByClientCIDRs": []any{map[string]any{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}}}
	case "/apis":
		return map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
	case "/api/v1":
		return resourceList("v1",
			apiResource("configmaps", "ConfigMap", true, "cm"),
			apiResource("namespaces", "Namespace", false, "ns"),
			apiResource("events", "Event", true, "ev"))
	case "/apis/apps/v1":
		return resourceList("apps/v1", apiResource("deployments", "Deployment", true, "deploy"))
	case "/apis/work.karmada.io/v1alpha2":
		if s.plain {
			return nil
		}
		return resourceList("work.karmada.io/v1alpha2",
			apiResource("resourcebindings", "ResourceBinding", true, "rb"),
			apiResource("clusterresourcebindings", "ClusterResourceBinding", false, "crb"))
	case "/apis/apps.karmada.io/v1alpha1":
		if s.plain || s.noRebalancer {
			return nil
		}
		return resourceList("apps.karmada.io/v1alpha1", apiResource("workloadrebalancers", "WorkloadRebalancer", false))
	}
	return nil
}

func group(name, version string) map[string]any {
	gv := map[string]any{"groupVersion": name + "/" + version, "version": version}
	return map[string]any{"name": name, "versions": []any{gv}, "preferredVersion": gv}
}

func apiResource(name, kind string, namespaced bool, shortNames ...string) map[string]any {
	return map[string]any{"name": name, "singularName": strings.ToLower(kind), "kind": kind, "namespaced": namespaced,
		"shortNames": shortNames, "verbs": []string{"get", "list", "watch", "create", "update", "patch", "delete"}}
}

func resourceList(groupVersion string, resources ...map[string]any) map[string]any {
	return map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": groupVersion, "resources": resources}
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// writeStatus answers with a metav1.Status, as the API server does.
func writeStatus(w http.ResponseWriter, code int, reason, message string, details map[string]any) {
	status := map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code}
	if details != nil {
		status["details"] = details
	}
	writeJSON(w, code, status)
}

// answer returns a handler writing code with a body of the given content type.
func answer(code int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}
}

// hang never answers, until the client gives up or the test ends.
func hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-closing:
	}
}

// closing is closed by nothing; it keeps hang's select readable.
var closing = make(chan struct{})

// forbidden answers 403 the way the API server words it.
func forbidden(verb, resource, group, namespace, name string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		what := resource
		if group != "" {
			what += "." + group
		}
		msg := fmt.Sprintf("%s %q is forbidden: User \"alice\" cannot %s resource %q in API group %q", what, name, verb, resource, group)
		if namespace != "" {
			msg += fmt.Sprintf(" in the namespace %q", namespace)
		} else {
			msg += " at the cluster scope"
		}
		writeStatus(w, http.StatusForbidden, "Forbidden", msg, map[string]any{"name": name, "group": group, "kind": resource})
	}
}

// kubeconfigFor writes a kubeconfig whose current context, karmada-apiserver,
// points at the server, with namespace default.
func kubeconfigFor(t testing.TB, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: karmada
  cluster: {server: %q}
users:
- name: admin
  user: {token: secret}
contexts:
- name: karmada-apiserver
  context: {cluster: karmada, user: admin, namespace: default}
current-context: karmada-apiserver
`, server)), 0o600))
	return path
}
