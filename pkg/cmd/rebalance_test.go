package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
)

// runRebalance builds the command, runs it with args and returns the exit
// code and both streams, as a user would see them.
func runRebalance(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := NewCmdRebalance(streams)
	root.SetArgs(args)
	code := Execute(root, streams)
	return code, out.String(), errOut.String()
}

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(path, []byte(testKubeconfig), 0o600))
	return path
}

func TestRebalanceUsageErrors(t *testing.T) {
	kubeconfig := writeKubeconfig(t)
	manifest := filepath.Join(t.TempDir(), "rb.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte("kind: ConfigMap\n"), 0o600))

	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "nothing named", args: []string{"-l", "app=web"}, wantErr: "error: name the workloads to rebalance: give TYPE/NAME, TYPE NAME..., TYPE -l SELECTOR, TYPE --all or -f FILENAME\nSee 'kubectl rebalance -h' for help and examples\n"},
		{name: "arguments and files", args: []string{"deploy/a", "-f", manifest}, wantErr: "error: give the workloads either as arguments or with -f, not both\n"},
		{name: "all and selector", args: []string{"deployments", "--all", "-l", "app=x"}, wantErr: "error: --all and --selector cannot be combined"},
		{name: "bad dry run", args: []string{"deploy/a", "--dry-run=maybe"}, wantErr: `error: invalid --dry-run "maybe": use none, client or server (e.g. --dry-run=client; --dry-run alone means client)` + "\n"},
		{name: "zero timeout", args: []string{"deploy/a", "--timeout=0s"}, wantErr: "error: --timeout must be greater than zero, got 0s\n"},
		{name: "bad qps", args: []string{"deploy/a", "--kube-api-qps=0"}, wantErr: "error: --kube-api-qps and --kube-api-burst must be greater than zero, got 0 and 100; e.g. --kube-api-qps 50 --kube-api-burst 100\n"},
		{name: "bad output", args: []string{"deploy/a", "-o", "table"}, wantErr: `error: invalid --output "table": use one of wide, report-json, report-yaml, json, yaml`},
		{name: "no room to move", args: []string{"deploy/a", "--max-surge=0", "--max-unavailable=0%"},
			wantErr: "error: --max-surge and --max-unavailable cannot both be 0: a move needs room for an extra replica or leave to stop one first\n"},
		{name: "bad surge", args: []string{"deploy/a", "--max-surge=lots"}, wantErr: `error: invalid --max-surge "lots": give a number of replicas (e.g. --max-surge 1) or a percentage of the workload's replicas (e.g. --max-surge 25%)` + "\n"},
		{name: "unknown flag", args: []string{"deploy/a", "--colour"}, wantErr: "error: unknown flag --colour for \"kubectl rebalance\"\nSee 'kubectl rebalance -h' for help and examples\n"},
		{
			name:    "contexts that disagree",
			args:    []string{"deploy/a", "--karmada-context", "member1", "--context", "karmada-apiserver"},
			wantErr: `error: --karmada-context "member1" and --context "karmada-apiserver" disagree; give only one of them` + "\n",
		},
		{
			name:    "unknown context",
			args:    []string{"deploy/a", "--karmada-context", "nowhere"},
			wantErr: "error: cannot use the kubeconfig: invalid configuration: context was not found for specified context: nowhere; check --kubeconfig and --karmada-context (or $KUBECONFIG)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runRebalance(t, append([]string{"--kubeconfig", kubeconfig}, tt.args...)...)
			assert.Equal(t, ExitError, code)
			assert.Empty(t, out)
			assert.True(t, strings.HasPrefix(errOut, tt.wantErr), "stderr:\n%s\nwant prefix:\n%s", errOut, tt.wantErr)
			assert.NotContains(t, errOut, "goroutine", "no stack trace")
		})
	}
}

func TestRebalanceUnreachableServer(t *testing.T) {
	kubeconfig := writeKubeconfig(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{
			name:    "current context",
			args:    []string{"deploy/a"},
			wantErr: `error: cannot reach the API server at https://127.0.0.1:1 (context "karmada-apiserver"): `,
		},
		{
			name:    "karmada-context picks the context",
			args:    []string{"deploy/a", "--karmada-context", "member1"},
			wantErr: `error: cannot reach the API server at https://127.0.0.1:2 (context "member1"): `,
		},
		{
			name:    "context works the same",
			args:    []string{"deploy/a", "--context", "member1"},
			wantErr: `error: cannot reach the API server at https://127.0.0.1:2 (context "member1"): `,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runRebalance(t, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}, tt.args...)...)
			assert.Equal(t, ExitError, code)
			assert.Empty(t, out)
			assert.True(t, strings.HasPrefix(errOut, tt.wantErr), "stderr:\n%s", errOut)
			assert.Contains(t, errOut, "connection refused")
			assert.True(t, strings.HasSuffix(errOut, "check that the Karmada apiserver is up and that --kubeconfig and --karmada-context point at it\n"), errOut)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line, no client-go log noise:\n%s", errOut)
		})
	}
}

func TestRebalanceHelp(t *testing.T) {
	code, out, _ := runRebalance(t, "--help")
	assert.Equal(t, ExitOK, code)
	for _, want := range []string{
		"kubectl rebalance (TYPE[.VERSION][.GROUP] [NAME...]",
		"Exit codes:",
		"0: every workload was triggered",
		"1: bad usage or input",
		"2: some workload failed",
		"3: the timeout expired",
		"--karmada-context",
		"--dry-run",
		"kubectl rebalance deploy/nginx",
	} {
		assert.Contains(t, out, want)
	}
}

// printFixture is a finished run: one workload rescheduled, one without a
// binding.
func printFixture() (*run.Result, *rebalance.Resolved) {
	at := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 1, 0, time.UTC))
	finish := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 2, 0, time.UTC))
	nginx := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"}
	missing := rebalance.Workload{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "missing"}
	rows := []rebalance.Row{
		{Workload: nginx, Binding: "nginx-deployment", Result: appsv1alpha1.RebalanceSuccessful, TriggeredAt: &at,
			Observation: rebalance.Observation{Outcome: rebalance.OutcomeScheduled, Reason: "Success", Message: "Binding has been scheduled successfully."},
			Before:      []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 3}},
			After:       []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 1}}},
		{Workload: missing, Binding: "missing-configmap", Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound,
			Message: "resourcebinding default/missing-configmap not found"},
	}
	rebalance.SortRows(rows)
	return &run.Result{Rows: rows, TriggerTime: at, FinishTime: &finish, Written: 1, Failed: 1},
		&rebalance.Resolved{Targets: []rebalance.Target{{Workload: nginx}, {Workload: missing}}}
}

func TestRebalancePrint(t *testing.T) {
	tests := []struct {
		name    string
		output  string
		dryRun  rebalance.DryRun
		want    string
		summary string
	}{
		{
			name:   "table",
			output: "",
			want: "" +
				"WORKLOAD                RESULT       OUTCOME     BEFORE        AFTER                    REASON\n" +
				"deployment.apps/nginx   Successful   Scheduled   {member2:3}   {member1:2, member2:1}   Success\n" +
				"configmap/missing       Failed       <none>      <none>        <none>                   ReferencedBindingNotFound\n",
			summary: "2 workloads: 1 successful, 1 failed, 0 pending; 1 rescheduled, 0 ignored\n",
		},
		{
			name:    "names",
			output:  "name",
			want:    "deployment.apps/nginx\nconfigmap/missing\n",
			summary: "2 workloads: 1 successful, 1 failed, 0 pending; 1 rescheduled, 0 ignored\n",
		},
		{
			name:    "dry run is marked",
			output:  "name",
			dryRun:  rebalance.DryRunServer,
			want:    "deployment.apps/nginx\nconfigmap/missing\n",
			summary: "2 workloads: 1 successful, 1 failed, 0 pending; 1 rescheduled, 0 ignored (server dry run)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			o := NewRebalanceOptions(streams)
			o.PrintFlags.OutputFormat = ptr.To(tt.output)
			o.OutputFormat = tt.output
			o.DryRun = tt.dryRun
			if tt.output != "" {
				var err error
				o.printer, err = o.PrintFlags.ToPrinter()
				require.NoError(t, err)
			}
			result, resolved := printFixture()
			require.NoError(t, o.print(result, resolved))
			assert.Equal(t, tt.want, out.String())
			assert.Equal(t, tt.summary, errOut.String())
		})
	}
}

func TestRebalancePrintsAnApplicableRebalancer(t *testing.T) {
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	o := NewRebalanceOptions(streams)
	o.PrintFlags.OutputFormat = ptr.To("yaml")
	o.OutputFormat = "yaml"
	var err error
	o.printer, err = o.PrintFlags.ToPrinter()
	require.NoError(t, err)

	result, resolved := printFixture()
	require.NoError(t, o.print(result, resolved))

	var rb appsv1alpha1.WorkloadRebalancer
	require.NoError(t, yaml.UnmarshalStrict(out.Bytes(), &rb))
	assert.Equal(t, "apps.karmada.io/v1alpha1", rb.APIVersion)
	assert.Equal(t, "WorkloadRebalancer", rb.Kind)
	assert.Equal(t, "rebalance-20240501-100001", rb.Name)
	assert.Empty(t, rb.ResourceVersion, "a manifest to apply carries no resourceVersion")
	assert.Equal(t, []rebalance.Workload{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "missing"},
	}, rb.Spec.Workloads)
	assert.Equal(t, []appsv1alpha1.ObservedWorkload{
		{Workload: rb.Spec.Workloads[0], Result: appsv1alpha1.RebalanceSuccessful},
		{Workload: rb.Spec.Workloads[1], Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound},
	}, rb.Status.ObservedWorkloads)
	assert.Equal(t, int64(1), rb.Status.ObservedGeneration)
	require.NotNil(t, rb.Status.FinishTime)
	assert.Equal(t, "2024-05-01T10:00:02Z", rb.Status.FinishTime.UTC().Format(time.RFC3339))
}

func TestRebalancerKeepsTheManifestsNameAndTTL(t *testing.T) {
	o := NewRebalanceOptions(genericiooptions.NewTestIOStreamsDiscard())
	result, resolved := printFixture()
	resolved.Rebalancers = []*appsv1alpha1.WorkloadRebalancer{{
		ObjectMeta: metav1.ObjectMeta{Name: "after-failover"},
		Spec: appsv1alpha1.WorkloadRebalancerSpec{
			Workloads:               []rebalance.Workload{resolved.Targets[0].Workload, resolved.Targets[1].Workload},
			TTLSecondsAfterFinished: ptr.To[int32](60),
		},
	}}
	rb := o.rebalancer(result, resolved)
	assert.Equal(t, "after-failover", rb.Name)
	assert.Equal(t, ptr.To[int32](60), rb.Spec.TTLSecondsAfterFinished)
}

func TestProgressLine(t *testing.T) {
	tests := []struct {
		name     string
		terminal bool
		updates  []rebalance.Progress
		want     string
	}{
		{name: "not a terminal", updates: []rebalance.Progress{{Phase: "waiting", Done: 1, Total: 2}}, want: ""},
		{
			name:     "terminal",
			terminal: true,
			updates:  []rebalance.Progress{{Phase: "reading", Done: 1, Total: 1}, {Phase: "waiting", Done: 2, Total: 2}},
			want:     "\r\033[Kreading: 1/1 workload\r\033[Kwaiting: 2/2 workloads\r\033[K",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			p := &progressLine{w: &out, enabled: tt.terminal}
			for _, u := range tt.updates {
				p.Update(u)
			}
			p.Clear()
			assert.Equal(t, tt.want, out.String())
		})
	}
}

// The client's rate limits: by default faster than karmada-scheduler answers
// (docs/performance.md), and what --qps and --burst say when given.
func TestRebalanceRateLimits(t *testing.T) {
	kubeconfig := writeKubeconfig(t)
	tests := []struct {
		name      string
		args      []string
		wantQPS   float32
		wantBurst int
	}{
		{name: "defaults", wantQPS: 100, wantBurst: 100},
		{name: "flags", args: []string{"--qps", "20", "--burst", "30"}, wantQPS: 20, wantBurst: 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := NewCmdRebalance(genericiooptions.NewTestIOStreamsDiscard())
			require.NoError(t, root.ParseFlags(append([]string{"--kubeconfig", kubeconfig}, tt.args...)))
			flags := root.Flags()
			qps, err := flags.GetFloat32("qps")
			require.NoError(t, err)
			burst, err := flags.GetInt("burst")
			require.NoError(t, err)
			assert.Equal(t, tt.wantQPS, qps)
			assert.Equal(t, tt.wantBurst, burst)
		})
	}
	assert.Greater(t, float64(defaultQPS), float64(2*schedulerPace), "the default must outpace karmada-scheduler's own answers")
}
