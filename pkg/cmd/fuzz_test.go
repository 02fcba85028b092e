package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Fuzz targets for what parses user input: workload files and
// WorkloadRebalancer manifests (-f), target arguments, duration and threshold
// flags, and output formats. Each runs the whole command, as a user would,
// against a fake API server that serves discovery and nothing else (every
// binding is missing), so parsing, resolving and printing are all reached.
// `go test` runs the seeds; `make fuzz` explores.

// fuzzRig is a fake server and a kubeconfig shared by a fuzz target's runs.
type fuzzRig struct {
	server     *fakeServer
	kubeconfig string
	cacheDir   string
	dir        string
}

func newFuzzRig(f *testing.F) *fuzzRig {
	s := newFakeServer(f)
	s.object("/apis/apps.karmada.io/v1alpha1/workloadrebalancers", map[string]any{
		"apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancerList", "metadata": map[string]any{},
		"items": []any{map[string]any{"apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer",
			"metadata": map[string]any{"name": "demo", "generation": 1, "creationTimestamp": "2024-05-01T10:00:00Z"},
			"spec":     map[string]any{"workloads": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web"}}},
			"status": map[string]any{"observedGeneration": 1, "observedWorkloads": []any{
				map[string]any{"workload": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web"}, "result": "Successful"}}},
		}},
	})
	return &fuzzRig{server: s, kubeconfig: kubeconfigFor(f, s.URL), cacheDir: f.TempDir(), dir: f.TempDir()}
}

// run runs the command with args and checks what every run must hold: a
// documented exit code, and an error line for a failure.
func (r *fuzzRig) run(t *testing.T, args ...string) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := NewCmdRebalance(streams)
	root.SetArgs(append([]string{"--kubeconfig", r.kubeconfig, "--cache-dir", r.cacheDir, "--timeout", "5s"}, args...))
	code := Execute(root, streams)
	stderr := withoutFlagNotices(errOut.String())
	if code < ExitOK || code > ExitPending {
		t.Fatalf("undocumented exit code %d for %q:\n%s", code, args, stderr)
	}
	if code == ExitError && !strings.HasPrefix(stderr, "error: ") {
		t.Fatalf("exit 1 without an error line for %q:\nstderr:\n%s\nstdout:\n%s", args, stderr, out.String())
	}
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic:") {
		t.Fatalf("a crash for %q:\n%s", args, stderr)
	}
}

// withoutFlagNotices drops pflag's notices ("Flag --qps has been
// deprecated, ...") that come before an error.
func withoutFlagNotices(stderr string) string {
	for strings.HasPrefix(stderr, "Flag --") {
		_, rest, _ := strings.Cut(stderr, "\n")
		stderr = rest
	}
	return stderr
}

// safeArg keeps fuzzed arguments away from standard input, files and
// commands that would run until stopped.
func safeArg(arg string) bool {
	for _, bad := range []string{"-f", "--f", "-k", "--k", "--filename", "--kustomize", "--interval", "--watch", "--ttl", "--server-side", "--name", "/dev/", "--kubeconfig", "--cache-dir", "--server", "-s"} {
		if strings.HasPrefix(arg, bad) {
			return false
		}
	}
	return arg != "-" && !strings.ContainsRune(arg, 0)
}

func FuzzWorkloadFile(f *testing.F) {
	for _, seed := range []string{
		"",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: a}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: b}\n",
		"apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata:\n  name: demo\nspec:\n  workloads:\n  - apiVersion: apps/v1\n    kind: Deployment\n    namespace: default\n    name: web\n  ttlSecondsAfterFinished: 60\n",
		"apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata: {name: x}\nspec:\n  workloads: []\n",
		"apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nspec:\n  workloads:\n  - {apiVersion: apps/v1, kind: Deployment, name: nons}\n",
		"apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nspec:\n  workloads:\n  - {apiVersion: '::', kind: '', name: ''}\n",
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"j","namespace":"default"}}`,
		"---\n---\n# only comments\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n    namespace: bad-indent\n",
		"apiVersion: apps/v1\nmetadata:\n  name: nokind\n",
		"kind: Frobnicator\napiVersion: example.io/v1\nmetadata: {name: f}\n",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: 'system:edit'}\n",
		"\xff\xfe\x00binary",
	} {
		f.Add(seed)
	}
	rig := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(t.TempDir(), "input.yaml")
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		rig.run(t, "-f", path, "--dry-run=client")
	})
}

func FuzzTargetArgs(f *testing.F) {
	for _, seed := range []string{
		"deploy/web", "deployment.apps/web", "deployments.v1.apps/web", "deploy", "cm/a", "clusterrole/system:edit",
		"deploy/", "/web", "deploy//web", "deploy/web/extra", "frobnicators/x", "rb/x", ".apps/x", "deploy.v1./x",
		"workloadrebalancer/demo", "DEPLOY/Web", "deploy/a,b", "deploy/\u00e9", "-n", "--all", "-A", "-l", "app=web", "--selector=in(x",
	} {
		f.Add(seed, "")
		f.Add("deployments", seed)
	}
	rig := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, first, second string) {
		if !safeArg(first) || !safeArg(second) {
			t.Skip()
		}
		args := []string{first}
		if second != "" {
			args = append(args, second)
		}
		rig.run(t, append(args, "--dry-run=client")...)
	})
}

func FuzzFlagValues(f *testing.F) {
	for _, seed := range []string{"", "0", "0s", "-1s", "1ns", "5m", "1h2m3s", "1e3s", "300", "-5", "ten", "9999999999999999h", "1.5", "\t5m", "5 m", "µs"} {
		f.Add(seed)
	}
	rig := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, value string) {
		if strings.ContainsRune(value, 0) {
			t.Skip()
		}
		rig.run(t, "deploy/web", "--dry-run=client", "--timeout="+value)
		rig.run(t, "deploy/web", "--ttl="+value, "--dry-run=client")
		rig.run(t, "deploy/web", "--kube-api-qps="+value)
		rig.run(t, "deploy/web", "--qps="+value)
		rig.run(t, "deschedule", "--dry-run=client", "--unschedulable-threshold="+value)
		rig.run(t, "deschedule", "--dry-run=client", "--timeout="+value, "--max-replicas-per-pass="+value)
		rig.run(t, "get", "--timeout="+value)
	})
}

func FuzzOutputFormat(f *testing.F) {
	for _, seed := range []string{
		"", "wide", "yaml", "json", "name", "kyaml", "go-template", "go-template={{.metadata.name}}", "go-template={{", "go-template={{.nope.nope}}",
		"jsonpath={.items[*].metadata.name}", "jsonpath={", "jsonpath", "jsonpath-as-json={.spec}", "template={{range .status.observedWorkloads}}{{.result}}{{end}}",
		"go-template-file=/nonexistent", "custom-columns=NAME:.metadata.name", "xml", "wide=x", "report-json",
	} {
		f.Add(seed)
	}
	rig := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, format string) {
		if strings.ContainsRune(format, 0) || strings.Contains(format, "/dev/") {
			t.Skip()
		}
		rig.run(t, "deploy/web", "-o", format)
		rig.run(t, "get", "-o", format)
		rig.run(t, "get", "demo", "-o", format)
		rig.run(t, "deschedule", "--dry-run=client", "-o", format)
	})
}
