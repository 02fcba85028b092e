package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
)

// The catalogue of what a user meets when the server misbehaves or the input
// is wrong. Every case builds the command, runs it against a fake API server
// and checks the exit code and the message: lower-case, naming what failed,
// where (server and context) and what to do next. A fake server is right
// here: these are the client's messages, not Karmada's behaviour.

// bindingsPath is where the fake serves the ResourceBindings of namespace default.
const bindingsPath = "/apis/work.karmada.io/v1alpha2/namespaces/default/resourcebindings"

// webBinding is a scheduled binding of Deployment default/web.
func webBinding(trigger string) map[string]any {
	spec := map[string]any{
		"resource": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web"},
		"replicas": 3, "clusters": []any{map[string]any{"name": "member1", "replicas": 3}},
	}
	generation := 1
	if trigger != "" {
		spec["rescheduleTriggeredAt"] = trigger
		generation = 2
	}
	return map[string]any{
		"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
		"metadata": map[string]any{"name": "web-deployment", "namespace": "default", "uid": "b-1", "resourceVersion": "7", "generation": generation,
			"labels": map[string]any{"propagationpolicy.karmada.io/permanent-id": "p-1"}},
		"spec": spec,
		"status": map[string]any{"lastScheduledTime": "2024-01-01T00:00:00Z", "schedulerObservedGeneration": 1,
			"conditions": []any{map[string]any{"type": "Scheduled", "status": "True", "reason": "Success", "message": "ok", "lastTransitionTime": "2024-01-01T00:00:00Z"}}},
	}
}

// withWeb serves the binding of deploy/web and accepts its trigger.
func withWeb(s *fakeServer) {
	s.object(bindingsPath+"/web-deployment", webBinding(""))
	s.on("PATCH "+bindingsPath+"/web-deployment", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, webBinding(time.Now().UTC().Format(time.RFC3339)))
	})
}

// failing answers with h the first n times, then lets the request through.
func failing(s *fakeServer, n int32, h http.HandlerFunc) http.HandlerFunc {
	var calls atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= n {
			h(w, r)
			return
		}
		s.passThrough(w, r)
	}
}

// reset closes the connection without an answer.
func reset(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func retryAfter(seconds string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", seconds)
		writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "too many requests, please try again later", nil)
	}
}

func unauthorized(w http.ResponseWriter, _ *http.Request) {
	writeStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized", nil)
}

const htmlLogin = "<!DOCTYPE html><html><head><title>Sign in</title></head><body><form>login</form></body></html>"

type catalogueCase struct {
	name  string
	setup func(*fakeServer)
	args  []string
	// stdin, when set, is what the command reads for -f -.
	stdin *string
	// cancel interrupts the command once the server has seen a request to this prefix.
	cancelOn string
	code     int
	// want are parts of stderr (or of stdout, for stdoutWant), in order.
	want       []string
	stdoutWant []string
	// namesServer: the message names the server's URL and the context.
	namesServer bool
}

func TestErrorCatalogue(t *testing.T) {
	fast := startupBackoff
	startupBackoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1.5, Steps: 4}
	t.Cleanup(func() { startupBackoff = fast })

	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	empty := file("empty.yaml", "")
	onlyComments := file("comments.yaml", "# nothing here\n---\n---\n")
	webYAML := file("web.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\n")
	emptyString, blanks := "", "\n\n  \n"

	bindingsFail := func(h http.HandlerFunc) func(*fakeServer) {
		return func(s *fakeServer) { s.on("GET "+bindingsPath, h) }
	}
	rebalancers := "/apis/apps.karmada.io/v1alpha1/workloadrebalancers"

	cases := []catalogueCase{
		// Discovery: the first requests of every run.
		{name: "discovery 500", setup: func(s *fakeServer) { s.on("GET /apis", answer(500, "text/plain", "boom")) }, args: []string{"deploy/web"},
			code: ExitError, namesServer: true, want: []string{"failed the discovery request GET /apis", "HTTP 500", "may be restarting or overloaded"}},
		{name: "discovery 503", setup: func(s *fakeServer) { s.on("GET /apis", answer(503, "text/plain", "unavailable")) }, args: []string{"deploy/web"},
			code: ExitError, namesServer: true, want: []string{"failed the discovery request GET /apis", "HTTP 503", "try again in a moment"}},
		{name: "discovery 404", setup: func(s *fakeServer) {
			s.on("GET /api", answer(404, "text/plain", "404 page not found"))
		}, args: []string{"deploy/web"}, code: ExitError, namesServer: true, want: []string{"HTTP 404", "serves no Kubernetes API there", "server URL"}},
		{name: "html login page", setup: func(s *fakeServer) { s.on("GET /", answer(200, "text/html", htmlLogin)) }, args: []string{"deploy/web"},
			code: ExitError, namesServer: true, want: []string{"answered the discovery request GET /api with an HTML page", "point at the Karmada apiserver itself"}},
		{name: "html error page with 502", setup: func(s *fakeServer) { s.on("GET /", answer(502, "text/html", "<html>bad gateway</html>")) }, args: []string{"deploy/web"},
			code: ExitError, namesServer: true, want: []string{"HTTP 502", "try again"}},
		{name: "broken json", setup: func(s *fakeServer) {
			s.on("GET /api", answer(200, "application/json", `{"kind":"APIVersions","versions":[`))
		}, args: []string{"deploy/web"},
			code: ExitError, namesServer: true, want: []string{"answered the discovery request GET /api with something that is not a Kubernetes API response", "unexpected end of JSON input"}},
		{name: "credentials rejected", setup: func(s *fakeServer) { s.on("GET /", unauthorized) }, args: []string{"deploy/web"},
			code: ExitError, namesServer: true, want: []string{"did not accept the credentials", "renew them in the kubeconfig"}},
		{name: "discovery forbidden", setup: func(s *fakeServer) { s.on("GET /api", forbidden("get", "", "", "", "")) }, args: []string{"deploy/web"},
			code: ExitError, want: []string{"not allowed to get the non-resource URL /api", `with context "karmada-apiserver"`, "the server answered 403 Forbidden without saying why", "ask an administrator"}},
		{name: "plain kube-apiserver", setup: func(s *fakeServer) { s.plain = true }, args: []string{"deploy/web"},
			code: ExitError, namesServer: true, want: []string{"is not a Karmada control plane", "resourcebindings.work.karmada.io is not served"}},
		{name: "group discovery fails, then answers", setup: func(s *fakeServer) {
			s.on("GET /apis/work.karmada.io/v1alpha2", failing(s, 1, answer(500, "text/plain", "boom")))
			withWeb(s)
		}, args: []string{"deploy/web", "--wait=false"}, code: ExitOK, stdoutWant: []string{"deployment.apps/web", "Successful"}},
		// Passing faults at start-up are retried.
		{name: "discovery 500 once is retried", setup: func(s *fakeServer) {
			s.on("GET /apis", failing(s, 1, answer(500, "text/plain", "boom")))
			withWeb(s)
		}, args: []string{"deploy/web", "--wait=false"}, code: ExitOK, stdoutWant: []string{"deployment.apps/web", "Successful"}},
		{name: "discovery 503 twice is retried", setup: func(s *fakeServer) {
			s.on("GET /api", failing(s, 2, answer(503, "text/plain", "unavailable")))
			withWeb(s)
		}, args: []string{"deploy/web", "--wait=false"}, code: ExitOK, stdoutWant: []string{"Successful"}},
		{name: "discovery 429 with Retry-After is retried", setup: func(s *fakeServer) {
			s.on("GET /apis", failing(s, 1, retryAfter("1")))
			withWeb(s)
		}, args: []string{"deploy/web", "--wait=false"}, code: ExitOK, stdoutWant: []string{"Successful"}},
		{name: "discovery connection reset is retried", setup: func(s *fakeServer) {
			s.on("GET /apis", failing(s, 1, reset))
			withWeb(s)
		}, args: []string{"deploy/web", "--wait=false"}, code: ExitOK, stdoutWant: []string{"Successful"}},
		{name: "template list 500 once is retried", setup: func(s *fakeServer) {
			s.on("GET /apis/apps/v1/namespaces/default/deployments", failing(s, 1, answer(500, "text/plain", "boom")))
			s.object("/apis/apps/v1/namespaces/default/deployments", map[string]any{"apiVersion": "apps/v1", "kind": "DeploymentList", "metadata": map[string]any{}, "items": []any{
				map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web", "namespace": "default", "uid": "d-1"}},
			}})
			withWeb(s)
		}, args: []string{"deployments", "--all", "--wait=false"}, code: ExitOK, stdoutWant: []string{"deployment.apps/web", "Successful"}},
		// Template reads.
		{name: "template list 500 for good", setup: func(s *fakeServer) {
			s.on("GET /apis/apps/v1/namespaces/default/deployments", answer(500, "text/plain", "boom"))
		}, args: []string{"deployments", "--all"}, code: ExitError, namesServer: true,
			want: []string{"failed the request to list deployments.apps in namespace default", "HTTP 500"}},
		{name: "template list forbidden", setup: func(s *fakeServer) {
			s.on("GET /apis/apps/v1/namespaces/default/deployments", forbidden("list", "deployments", "apps", "default", ""))
		}, args: []string{"deployments", "--all"}, code: ExitError,
			want: []string{`not allowed to list deployments.apps in namespace "default"`, `grant "list" on deployments.apps`}},
		{name: "template list html", setup: func(s *fakeServer) {
			s.on("GET /apis/apps/v1/namespaces/default/deployments", answer(200, "text/html", htmlLogin))
		}, args: []string{"deployments", "--all"}, code: ExitError, namesServer: true,
			want: []string{"answered the request to list deployments.apps in namespace default with an HTML page"}},
		// Bindings.
		{name: "binding read forbidden", setup: bindingsFail(forbidden("get", "resourcebindings", "work.karmada.io", "default", "web-deployment")),
			args: []string{"deploy/web"}, code: ExitError,
			want: []string{`not allowed to get resourcebindings.work.karmada.io in namespace "default"`, `grant "get"`}},
		{name: "binding write forbidden", setup: func(s *fakeServer) {
			s.object(bindingsPath+"/web-deployment", webBinding(""))
			s.on("PATCH "+bindingsPath, forbidden("patch", "resourcebindings", "work.karmada.io", "default", "web-deployment"))
		}, args: []string{"deploy/web"}, code: ExitError,
			want: []string{`not allowed to patch resourcebindings.work.karmada.io in namespace "default"`, `grant "patch"`}},
		{name: "binding missing: a failed row with its reason", args: []string{"deploy/web"}, code: ExitFailed,
			stdoutWant: []string{"REASON", "deployment.apps/web", "Failed", "ReferencedBindingNotFound"}, want: []string{"1 failed"}},
		// --timeout runs out at the second read: the first one's answer is in the row.
		{name: "binding read 500 until the timeout: pending with the reason", setup: func(s *fakeServer) {
			s.on("GET "+bindingsPath, s.expiring(2, answer(500, "text/plain", "boom")))
		},
			args: []string{"deploy/web", "--timeout=1s", "-o", "wide"}, code: ExitPending,
			stdoutWant: []string{"Pending", "timed out before the binding could be read", "boom"}, want: []string{"1 pending"}},
		{name: "binding read html until the timeout", setup: func(s *fakeServer) {
			s.on("GET "+bindingsPath, s.expiring(2, answer(200, "text/html", htmlLogin)))
		},
			args: []string{"deploy/web", "--timeout=1s", "-o", "wide"}, code: ExitPending, stdoutWant: []string{"Pending", "timed out before the binding could be read"}},
		// Input.
		{name: "empty file", args: []string{"-f", empty}, code: ExitError, want: []string{empty + " holds no object", "nothing was done"}},
		{name: "file of comments only", args: []string{"-f", onlyComments}, code: ExitError, want: []string{onlyComments + " holds no object"}},
		{name: "empty stdin", args: []string{"-f", "-"}, stdin: &emptyString, code: ExitError, want: []string{"standard input holds no object"}},
		{name: "blank stdin", args: []string{"-f", "-"}, stdin: &blanks, code: ExitError, want: []string{"standard input holds no object"}},
		{name: "missing file", args: []string{"-f", filepath.Join(dir, "nope.yaml")}, code: ExitError, want: []string{"cannot read -f", "nope.yaml", "does not exist", "check the file name"}},
		{name: "unreachable url", args: []string{"-f", "http://127.0.0.1:1/list.yaml"}, code: ExitError,
			want: []string{"cannot read http://127.0.0.1:1/list.yaml given with -f", "connection refused", "download the file"}},
		{name: "url answers 404", args: []string{"-f", "URL/files/list.yaml"}, code: ExitError, want: []string{"cannot read the -f URL", "404", "download the file"}},
		{name: "missing kustomization", args: []string{"-k", filepath.Join(dir, "no-such-dir")}, code: ExitError,
			want: []string{"cannot build the kustomization given with -k", "no-such-dir", "kustomization.yaml"}},
		{name: "file with a workload works", setup: withWeb, args: []string{"-f", webYAML, "--wait=false"}, code: ExitOK, stdoutWant: []string{"Successful"}},
		{name: "go-template without a template", args: []string{"deploy/web", "-o", "go-template"}, code: ExitError,
			want: []string{"-o go-template needs a template", "-o go-template='{{.metadata.name}}'", "--template"}},
		{name: "jsonpath without a template", args: []string{"deploy/web", "-o", "jsonpath"}, code: ExitError, want: []string{"-o jsonpath needs a template", "-o jsonpath='{.metadata.name}'"}},
		{name: "unknown output", args: []string{"deploy/web", "-o", "xml"}, code: ExitError, want: []string{`invalid --output "xml": use one of wide, report-json, report-yaml, json, yaml`}},
		// Deadlines and Ctrl-C.
		{name: "timeout bounds discovery", setup: func(s *fakeServer) { s.on("GET /api", s.expiring(1, hang)) }, args: []string{"deploy/web", "--timeout=1s"},
			code: ExitPending, namesServer: true, want: []string{"--timeout 1s ran out before any binding was read", "the discovery request GET /api", "nothing was written"}},
		{name: "timeout bounds template reads", setup: func(s *fakeServer) { s.on("GET /apis/apps/v1/namespaces/default/deployments", s.expiring(1, hang)) },
			args: []string{"deployments", "--all", "--timeout=1s"}, code: ExitPending,
			want: []string{"--timeout 1s ran out before any binding was read", "list deployments.apps in namespace default", "nothing was written"}},
		{name: "ctrl-c during discovery", setup: func(s *fakeServer) { s.on("GET /api", hang) }, args: []string{"deploy/web"}, cancelOn: "GET /api",
			code: ExitPending, want: []string{"interrupted before any binding was read; nothing was written"}},
		{name: "ctrl-c while reading bindings", setup: bindingsFail(hang), args: []string{"deploy/web"}, cancelOn: "GET " + bindingsPath,
			code: ExitPending, stdoutWant: []string{"Pending"}, want: []string{"interrupted: 0 trigger(s) written, 1 workload(s) not triggered (pending)"}},
		// Recorded runs.
		{name: "record on a Karmada without the CRD", setup: func(s *fakeServer) { s.noRebalancer = true }, args: []string{"deploy/web", "--name", "x"},
			code: ExitError, namesServer: true, want: []string{"does not serve workloadrebalancers.apps.karmada.io", "older than Karmada v1.10"}},
		{name: "record create forbidden", setup: func(s *fakeServer) {
			withWeb(s)
			s.on("POST "+rebalancers, forbidden("create", "workloadrebalancers", "apps.karmada.io", "", ""))
			s.on("GET "+rebalancers, answer(404, "application/json", `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"details":{"name":"x","kind":"workloadrebalancers"}}`))
		}, args: []string{"deploy/web", "--name", "x"}, code: ExitError, want: []string{"not allowed to create workloadrebalancers.apps.karmada.io"}},
		// get.
		{name: "get on a plain kube-apiserver", setup: func(s *fakeServer) { s.plain = true }, args: []string{"get"}, code: ExitError, namesServer: true,
			want: []string{"is not a Karmada control plane: Karmada is not installed there"}},
		{name: "get on a Karmada without the CRD", setup: func(s *fakeServer) { s.noRebalancer = true }, args: []string{"get"}, code: ExitError, namesServer: true,
			want: []string{"older than Karmada v1.10"}},
		{name: "get 500", setup: func(s *fakeServer) { s.on("GET "+rebalancers, answer(500, "text/plain", "boom")) }, args: []string{"get"}, code: ExitError, namesServer: true,
			want: []string{"failed the request to list workloadrebalancers.apps.karmada.io", "HTTP 500"}},
		{name: "get forbidden", setup: func(s *fakeServer) {
			s.on("GET "+rebalancers, forbidden("list", "workloadrebalancers", "apps.karmada.io", "", ""))
		},
			args: []string{"get"}, code: ExitError, want: []string{`not allowed to list workloadrebalancers.apps.karmada.io`, `grant "list"`}},
		{name: "get html", setup: func(s *fakeServer) { s.on("GET "+rebalancers, answer(200, "text/html", htmlLogin)) }, args: []string{"get"}, code: ExitError, namesServer: true,
			want: []string{"with an HTML page"}},
		{name: "get a missing name", setup: func(s *fakeServer) {
			s.on("GET "+rebalancers+"/nope", answer(404, "application/json", `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"workloadrebalancers.apps.karmada.io \"nope\" not found","details":{"name":"nope","group":"apps.karmada.io","kind":"workloadrebalancers"}}`))
		}, args: []string{"get", "nope"}, code: ExitError, want: []string{"workloadrebalancer nope not found; run `kubectl rebalance get` to list them"}},
		{name: "get times out", setup: func(s *fakeServer) { s.on("GET "+rebalancers, s.expiring(1, hang)) }, args: []string{"get", "--timeout=1s"}, code: ExitError, namesServer: true,
			want: []string{"--timeout 1s ran out", "did not answer the request to list workloadrebalancers.apps.karmada.io in time"}},
		{name: "get interrupted", setup: func(s *fakeServer) { s.on("GET "+rebalancers, hang) }, args: []string{"get"}, cancelOn: "GET " + rebalancers, code: ExitError,
			want: []string{"interrupted before the Karmada apiserver answered"}},
		{name: "get go-template without a template", args: []string{"get", "-o", "go-template"}, code: ExitError, want: []string{"-o go-template needs a template"}},
		{name: "get zero timeout", args: []string{"get", "--timeout=0s"}, code: ExitError, want: []string{"--timeout must be greater than zero"}},
		// deschedule.
		{name: "deschedule negative threshold", args: []string{"deschedule", "--unschedulable-threshold=-1m"}, code: ExitError,
			want: []string{"--unschedulable-threshold must be 0 or positive, got -1m0s"}},
		{name: "deschedule zero timeout", args: []string{"deschedule", "--timeout=0s"}, code: ExitError, want: []string{"--timeout must be greater than zero"}},
		{name: "deschedule on a plain kube-apiserver", setup: func(s *fakeServer) { s.plain = true }, args: []string{"deschedule"}, code: ExitError, namesServer: true,
			want: []string{"is not a Karmada control plane: Karmada is not installed there"}},
		{name: "deschedule list 500", setup: bindingsFail(answer(500, "text/plain", "boom")), args: []string{"deschedule"}, code: ExitError, namesServer: true,
			want: []string{"failed the request to list resourcebindings.work.karmada.io in namespace default", "HTTP 500"}},
		{name: "deschedule list forbidden", setup: bindingsFail(forbidden("list", "resourcebindings", "work.karmada.io", "default", "")), args: []string{"deschedule"}, code: ExitError,
			want: []string{`not allowed to list resourcebindings.work.karmada.io in namespace "default"`, `grant "list"`}},
		{name: "deschedule list html", setup: bindingsFail(answer(200, "text/html", htmlLogin)), args: []string{"deschedule"}, code: ExitError, namesServer: true,
			want: []string{"with an HTML page"}},
		{name: "deschedule times out", setup: func(s *fakeServer) { s.on("GET "+bindingsPath, s.expiring(1, hang)) }, args: []string{"deschedule", "--timeout=1s"}, code: ExitFailed, namesServer: true,
			want: []string{"--timeout 1s ran out before the bindings were listed", "nothing was written"}},
		{name: "deschedule interrupted", setup: bindingsFail(hang), args: []string{"deschedule"}, cancelOn: "GET " + bindingsPath, code: ExitFailed,
			want: []string{"interrupted before the bindings were listed; nothing was written"}},
		{name: "deschedule go-template without a template", args: []string{"deschedule", "-o", "go-template"}, code: ExitError, want: []string{"-o go-template needs a template"}},
	}
	require.GreaterOrEqual(t, len(cases), 40)
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			// --timeout runs out when the fake server says so (expiring),
			// never by the clock: the values below are only printed.
			deadlines := &testDeadlines{}
			deadlines.install(t)
			s := newFakeServer(t)
			s.deadlines = deadlines
			if tt.setup != nil {
				tt.setup(s)
			}
			args := []string{"--kubeconfig", kubeconfigFor(t, s.URL), "--cache-dir", t.TempDir()}
			for _, a := range tt.args {
				args = append(args, strings.Replace(a, "URL/", s.URL+"/", 1))
			}
			if tt.stdin != nil {
				withStdin(t, *tt.stdin)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancelOn != "" {
				go func() {
					_ = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
						for _, r := range s.requests() {
							if strings.HasPrefix(r, tt.cancelOn) {
								return true, nil
							}
						}
						return false, nil
					})
					cancel()
				}()
			}
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			root := NewCmdRebalance(streams)
			root.SetArgs(args)
			root.SetContext(ctx)
			code := Execute(root, streams)
			stderr, stdout := errOut.String(), out.String()
			t.Logf("exit %d\nstdout:\n%sstderr:\n%s", code, stdout, stderr)

			assert.Equal(t, tt.code, code, "stderr:\n%s\nstdout:\n%s", stderr, stdout)
			assertInOrder(t, stderr, tt.want)
			assertInOrder(t, stdout, tt.stdoutWant)
			if tt.code == ExitError {
				assert.True(t, strings.HasPrefix(stderr, "error: "), stderr)
				first := strings.TrimPrefix(stderr, "error: ")
				assert.NotEmpty(t, first)
				if first != "" && first[0] != '-' {
					assert.Equal(t, strings.ToLower(first[:1]), first[:1], "lower-case: %s", stderr)
				}
			}
			if tt.namesServer {
				assert.Contains(t, stderr, s.URL, "names the server")
				assert.Contains(t, stderr, `"karmada-apiserver"`, "names the context")
			}
			assert.NotContains(t, stderr, "unknown", "the server's silence is not passed on as a word")
			assert.NotContains(t, stderr, "goroutine")
			assert.NotContains(t, stderr, "RBAC", "no permission hint where permissions are not the problem")
		})
	}
}

// assertInOrder checks that every part occurs in s, in the order given.
func assertInOrder(t *testing.T, s string, parts []string) {
	t.Helper()
	rest := s
	for _, part := range parts {
		i := strings.Index(rest, part)
		if !assert.GreaterOrEqual(t, i, 0, "%q not found (in order) in:\n%s", part, s) {
			return
		}
		rest = rest[i+len(part):]
	}
}

// withStdin makes the process's standard input read content for the test.
func withStdin(t *testing.T, content string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stdin")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	saved := os.Stdin
	os.Stdin = f
	t.Cleanup(func() {
		os.Stdin = saved
		_ = f.Close()
	})
}

// TestBadInputCatalogue: every bad input a user can type gets one error
// line in words: lower-case, naming the flag or object, with a valid
// example or the next step, and none of the parsers' words (strconv,
// IntOrString, cobra's "arg(s)"). The spellings kept for compatibility are
// accepted, with pflag's one-line notice when deprecated. No server is
// needed: the kubeconfig points at an address nothing listens on, and the
// cases that parse stop at an error of their own before any request.
func TestBadInputCatalogue(t *testing.T) {
	kubeconfig := writeKubeconfig(t)
	const recordsNothing = "error: a dry run records nothing: leave out --dry-run, or --name, --ttl and --server-side"
	const waves = "error: --max-in-flight must be at least 1, got 0: a failback goes in waves"
	tests := []struct {
		name string
		args []string
		code int
		// want are parts of stderr, in order; notice, when set, is its
		// first line.
		want   []string
		notice string
		// stdout are parts of stdout, in order.
		stdout []string
	}{
		// Help.
		{name: "bare kubectl rebalance prints help", code: ExitOK,
			stdout: []string{"Trigger a fresh reschedule", "Examples:", "Available Commands:", "Options:", "Usage:\n  kubectl rebalance (TYPE", `Use "kubectl rebalance options"`}},
		{name: "a mistyped subcommand", args: []string{"plna", "deploy/foo"}, code: ExitError,
			want: []string{`error: "plna" is neither a kubectl rebalance command nor a built-in resource type; did you mean plan? (e.g. kubectl rebalance plan deploy/foo)`}},
		{name: "a mistyped subcommand, the kubeconfig unusable", args: []string{"plna", "deploy/foo", "--kubeconfig", "/nonexistent/config"}, code: ExitError,
			want: []string{`error: "plna" is neither a kubectl rebalance command nor a built-in resource type; did you mean plan? (e.g. kubectl rebalance plan deploy/foo)`}},
		{name: "a built-in type close to a subcommand is a type", args: []string{"job", "foo"}, code: ExitError,
			want: []string{"error: cannot reach the API server at https://127.0.0.1:1"}},
		// Member clusters.
		{name: "--cluster given a member cluster", args: []string{"deploy/web", "--cluster", "member7"}, code: ExitError,
			want: []string{`error: cannot use the kubeconfig: invalid configuration: no server found for cluster "member7"`,
				"--cluster member7 names a cluster entry of the kubeconfig, and it has none of that name: to choose Karmada member clusters, use -C/--clusters member7"}},
		{name: "a misspelt --clusters", args: []string{"plan", "deploy/web", "--to-clusters", "member1"}, code: ExitError,
			want: []string{`error: unknown flag --to-clusters for "kubectl rebalance plan"; did you mean -C/--clusters?`}},
		{name: "--to-cluster still works", args: []string{"deploy/web", "--to-cluster", "member1"}, code: ExitError,
			notice: "Flag --to-cluster has been deprecated, use --clusters instead", want: []string{"error: cannot reach the API server at https://127.0.0.1:1"}},
		// Values the parsers used to explain in their own words.
		{name: "a number that is not", args: []string{"deploy/web", "--max-in-flight", "abc"}, code: ExitError,
			want: []string{`error: invalid --max-in-flight "abc": give a whole number, e.g. --max-in-flight 10`}},
		{name: "a bool that is not", args: []string{"deploy/web", "--wait=maybe"}, code: ExitError,
			want: []string{`error: invalid --wait "maybe": give true or false, e.g. --wait=false`}},
		{name: "a surge that is no number", args: []string{"deploy/web", "--max-surge", "lots"}, code: ExitError,
			want: []string{`error: invalid --max-surge "lots": give a number of replicas (e.g. --max-surge 1) or a percentage of the workload's replicas (e.g. --max-surge 25%)`}},
		{name: "failback's surge too", args: []string{"failback", "--max-unavailable", "most"}, code: ExitError,
			want: []string{`error: invalid --max-unavailable "most": give a number of replicas`}},
		{name: "a limit that is no number", args: []string{"deschedule", "--max-replicas-per-pass", "x"}, code: ExitError,
			want: []string{`error: invalid --max-replicas-per-pass "x": give a whole number, e.g. --max-replicas-per-pass 10`}},
		{name: "a flag without its value", args: []string{"deploy/web", "--timeout"}, code: ExitError,
			want: []string{"error: --timeout needs a value, e.g. --timeout 2m0s"}},
		{name: "get of two names", args: []string{"get", "a", "b"}, code: ExitError,
			want: []string{`error: get takes at most 1 name, got 2 ("a" "b"); run 'kubectl rebalance get' to list every WorkloadRebalancer`}},
		{name: "an unknown flag", args: []string{"deploy/web", "--colour"}, code: ExitError,
			want: []string{`error: unknown flag --colour for "kubectl rebalance"`, "See 'kubectl rebalance -h' for help and examples"}},
		// Time flags: a duration or seconds.
		{name: "--ttl in seconds", args: []string{"deploy/web", "--ttl", "300", "--dry-run=client"}, code: ExitError, want: []string{recordsNothing}},
		{name: "--ttl as a duration", args: []string{"deploy/web", "--ttl", "5m", "--dry-run=client"}, code: ExitError, want: []string{recordsNothing}},
		{name: "--ttl neither", args: []string{"deploy/web", "--ttl", "ten"}, code: ExitError,
			want: []string{`error: invalid --ttl "ten": give a duration such as 30s, 5m or 1h30m, or a whole number of seconds such as 300, e.g. --ttl 5m`}},
		{name: "failback --ttl as a duration", args: []string{"failback", "--ttl", "5m", "--max-in-flight", "0"}, code: ExitError, want: []string{waves}},
		{name: "failback --ttl in seconds", args: []string{"failback", "--ttl", "300", "--max-in-flight", "0"}, code: ExitError, want: []string{waves}},
		{name: "--timeout in seconds", args: []string{"deploy/web", "--timeout", "0"}, code: ExitError, want: []string{"error: --timeout must be greater than zero, got 0s"}},
		// Dry run: none|client|server everywhere.
		{name: "failback --dry-run alone", args: []string{"failback", "--dry-run", "--max-in-flight", "0"}, code: ExitError, want: []string{waves}},
		{name: "failback --dry-run=client", args: []string{"failback", "--dry-run=client", "--max-in-flight", "0"}, code: ExitError, want: []string{waves}},
		{name: "failback --dry-run=server", args: []string{"failback", "--dry-run=server", "--max-in-flight", "0"}, code: ExitError, want: []string{waves}},
		{name: "failback --dry-run=none", args: []string{"failback", "--dry-run=none", "--max-in-flight", "0"}, code: ExitError, want: []string{waves}},
		{name: "failback --dry-run=true", args: []string{"failback", "--dry-run=true", "--max-in-flight", "0"}, code: ExitError,
			notice: "Flag --dry-run=true has been deprecated, use --dry-run=client instead", want: []string{waves}},
		{name: "failback --dry-run=false", args: []string{"failback", "--dry-run=false", "--max-in-flight", "0"}, code: ExitError,
			notice: "Flag --dry-run=false has been deprecated, use --dry-run=none instead", want: []string{waves}},
		{name: "--dry-run of another word", args: []string{"failback", "--dry-run=maybe"}, code: ExitError,
			want: []string{`error: invalid --dry-run "maybe": use none, client or server (e.g. --dry-run=client; --dry-run alone means client)`}},
		// Rate limits: karmada's names, the old ones deprecated.
		{name: "--qps is --kube-api-qps", args: []string{"deploy/web", "--qps", "0"}, code: ExitError,
			notice: "Flag --qps has been deprecated, use --kube-api-qps instead",
			want:   []string{"error: --kube-api-qps and --kube-api-burst must be greater than zero, got 0 and 100; e.g. --kube-api-qps 50 --kube-api-burst 100"}},
		{name: "failback takes --burst too", args: []string{"failback", "--burst", "5", "--max-in-flight", "0"}, code: ExitError,
			notice: "Flag --burst has been deprecated, use --kube-api-burst instead", want: []string{waves}},
		{name: "two names, two values", args: []string{"deploy/web", "--qps", "5", "--kube-api-qps", "6"}, code: ExitError,
			notice: "Flag --qps has been deprecated, use --kube-api-qps instead",
			want:   []string{"error: --kube-api-qps 6 and --qps 5 disagree: they are two names of one setting; give only --kube-api-qps"}},
		{name: "deschedule's two interval names", args: []string{"deschedule", "--interval", "1m", "--descheduling-interval", "2m"}, code: ExitError,
			want: []string{"error: --interval 1m and --descheduling-interval 2m disagree: they are two names of one setting; give only --interval"}},
		{name: "deschedule's two interval names agree", args: []string{"deschedule", "--interval", "2m", "--descheduling-interval", "120", "--unschedulable-threshold=-1s"}, code: ExitError,
			want: []string{"error: --unschedulable-threshold must be 0 or positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runRebalance(t, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir(), "--request-timeout", "5s"}, tt.args...)...)
			assert.Equal(t, tt.code, code, "stderr:\n%s", stderr)
			first, rest, _ := strings.Cut(stderr, "\n")
			if tt.notice != "" {
				assert.Equal(t, tt.notice, first, "the notice comes first, on one line")
				stderr = rest
			}
			assertInOrder(t, stderr, tt.want)
			assertInOrder(t, stdout, tt.stdout)
			if tt.code == ExitError {
				require.True(t, strings.HasPrefix(stderr, "error: "), stderr)
				msg := strings.TrimPrefix(stderr, "error: ")
				assert.False(t, unicode.IsUpper(rune(msg[0])), "lower-case: %s", stderr)
				assert.Empty(t, stdout)
			} else {
				assert.Empty(t, stderr)
			}
			for _, internal := range []string{"strconv", "IntOrString", "arg(s)", "invalid argument", "goroutine", "RBAC"} {
				assert.NotContains(t, stderr, internal)
			}
		})
	}
}

// TestHelpLikeKubectl: help is kubectl's: examples first, Options: (not
// cobra's Flags:), the inherited flags behind `kubectl rebalance options`,
// every -o value listed, no flag that does nothing, and no default that
// says something the command does not do.
func TestHelpLikeKubectl(t *testing.T) {
	help := func(args ...string) string {
		code, out, errOut := runRebalance(t, append(args, "--help")...)
		require.Equal(t, ExitOK, code, errOut)
		return out
	}
	for _, cmd := range [][]string{{}, {"plan"}, {"get"}, {"deschedule"}, {"failback"}, {"version"}} {
		out := help(cmd...)
		name := strings.Join(append([]string{"kubectl rebalance"}, cmd...), " ")
		assert.NotContains(t, out, "Flags:", name)
		assertInOrder(t, out, []string{"Examples:", "Options:", "Usage:", `Use "kubectl rebalance options" for a list of global command-line options`})
		assert.NotContains(t, out, "--kubeconfig=", "%s: the kubeconfig flags are behind kubectl rebalance options", name)
		assert.NotContains(t, out, "Ignored:", "%s: a flag that does nothing is not shown", name)
	}
	root := help()
	assert.Contains(t, root, "One of: (wide, report-json, report-yaml, json, yaml,")
	assert.Contains(t, root, "--kube-api-qps=100:")
	assert.NotContains(t, root, "--qps=")
	assert.Contains(t, root, "-C, --clusters=[]:")
	assert.Contains(t, root, "Without arguments, the command prints this help.")
	assert.Contains(t, help("plan"), "One of: (wide, report-json, report-yaml, json, yaml,")
	assert.NotContains(t, help("plan"), "such as a karmada-scheduler-estimator or a cluster", "estimators are predicted with their own code")
	failback := help("failback")
	assert.Contains(t, failback, "-C, --clusters=[]:")
	assert.Contains(t, failback, "--dry-run='none':")
	assert.Contains(t, failback, "--ttl=24h0m0s:")
	assert.Contains(t, failback, "--kube-api-qps=40:")

	code, options, _ := runRebalance(t, "options")
	require.Equal(t, ExitOK, code)
	for _, flag := range []string{"--kubeconfig=''", "--context=''", "-n, --namespace=''", "--karmada-context=''", "-v, --v=0"} {
		assert.Contains(t, options, flag)
	}
	assert.Contains(t, options, "0, the default, sets no limit of its own: kubectl rebalance, plan and get bound their requests by their --timeout; deschedule, and the failback daemon's own requests (clusters, records, events, the Lease), give up on a request after 1m.")

	// --help says what the command is and prints the same list.
	code, optionsHelp, _ := runRebalance(t, "options", "--help")
	require.Equal(t, ExitOK, code)
	assert.True(t, strings.HasPrefix(optionsHelp, "Print the list of flags inherited by all commands"), optionsHelp)
	assert.Contains(t, optionsHelp, "kubectl rebalance options\n")
	assert.Contains(t, optionsHelp, options)
}

// syncBuffer is a buffer a daemon's goroutines may write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestDaemonsWordServerErrorsAlike: both daemons meet a Karmada apiserver
// that refuses connections at start; they retry (it may be restarting) and
// log the catalogue's words for it, the same in both, and never put it down
// to permissions.
func TestDaemonsWordServerErrorsAlike(t *testing.T) {
	fast := daemon.StartupBackoff
	daemon.StartupBackoff.Duration, daemon.StartupBackoff.Cap = 10*time.Millisecond, 10*time.Millisecond
	t.Cleanup(func() { daemon.StartupBackoff = fast })
	kubeconfig := descheduleKubeconfig(t)
	const words = `cannot reach the API server at https://127.0.0.1:1 (context \"karmada-apiserver\"): `
	const next = "check that the Karmada apiserver is up and that --kubeconfig and --karmada-context point at it"
	for _, args := range [][]string{{"deschedule", "--interval", "1m"}, {"failback", "-A"}} {
		t.Run(args[0], func(t *testing.T) {
			var out, errOut syncBuffer
			streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
			root := NewCmdRebalance(streams)
			root.SetArgs(append(args, "--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			root.SetContext(ctx)
			done := make(chan int, 1)
			go func() { done <- Execute(root, streams) }()
			require.Eventually(t, func() bool { return strings.Count(errOut.String(), "failed, retrying") >= 2 }, time.Minute, 10*time.Millisecond,
				"the daemon retries a refused connection at start:\n%s", errOut.String())
			cancel()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the daemon did not stop")
			}
			logs := errOut.String()
			t.Log(logs)
			assert.Contains(t, logs, words)
			assert.Contains(t, logs, "connection refused")
			assert.Contains(t, logs, next)
			assert.NotContains(t, logs, "RBAC", "a server that is not there is not a permission problem")
		})
	}
}

// TestExplainKeep: a daemon's server error reads as the catalogue says it,
// after the step that failed, and keeps its cause for the retry decision.
func TestExplainKeep(t *testing.T) {
	e := endpoint{context: "karmada-apiserver", server: "https://karmada:5443", guard: &requestGuard{}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "karmada-descheduler", errors.New("no"))
	err := e.explainKeep(fmt.Errorf("cannot read lease karmada-system/karmada-descheduler to check that karmada-descheduler is not running: %w", forbidden))
	assert.True(t, strings.HasPrefix(err.Error(), "cannot read lease karmada-system/karmada-descheduler to check that karmada-descheduler is not running: not allowed to "), err.Error())
	assert.Contains(t, err.Error(), "ask an administrator of the Karmada control plane")
	assert.True(t, apierrors.IsForbidden(err), "the cause stays")
	assert.Same(t, err, e.explainKeep(err), "explained once")

	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	err = e.explainKeep(fmt.Errorf("cannot list clusters.cluster.karmada.io: %w", &url.Error{Op: "Get", URL: "https://karmada:5443/apis", Err: refused}))
	assert.True(t, strings.HasPrefix(err.Error(), `cannot reach the API server at https://karmada:5443 (context "karmada-apiserver"): cannot list clusters.cluster.karmada.io: `), err.Error())
	assert.NotContains(t, err.Error(), "RBAC")
	assert.True(t, utilnet.IsConnectionRefused(err), "a refused connection is still retried by a daemon")
	assert.True(t, daemonRetriable(context.Background())(err))
	assert.Nil(t, e.explainKeep(nil))
}
