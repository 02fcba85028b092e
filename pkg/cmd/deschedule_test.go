package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	descheduleroptions "github.com/karmada-io/karmada/cmd/descheduler/app/options"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// descheduleKubeconfig writes a kubeconfig whose current context points at
// an address nothing listens on, with namespace shop.
func descheduleKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
- name: karmada
  cluster: {server: "https://127.0.0.1:1"}
- name: member1
  cluster: {server: "https://127.0.0.1:2"}
users:
- name: admin
  user: {token: secret}
contexts:
- name: karmada-apiserver
  context: {cluster: karmada, user: admin, namespace: shop}
- name: member1
  context: {cluster: member1, user: admin}
current-context: karmada-apiserver
`), 0o600))
	return path
}

// runDeschedule runs `kubectl rebalance ARGS...` through Execute, as main does.
func runDeschedule(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := NewCmdRebalance(streams)
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errOut)
	code = Execute(root, streams)
	return code, out.String(), errOut.String()
}

func TestDescheduleRejectsBadInput(t *testing.T) {
	kubeconfig := "--kubeconfig=" + descheduleKubeconfig(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "arguments", args: []string{"deploy/web"}, want: `deschedule takes no arguments, got ["deploy/web"]; choose bindings with -n, -A, -l and --exclude-namespace`},
		{name: "dry run", args: []string{"--dry-run=always"}, want: `invalid --dry-run "always": use none, client or server (e.g. --dry-run=client; --dry-run alone means client)`},
		{name: "output name", args: []string{"-o", "name"}, want: `invalid --output "name": a pass has no name; use one of wide, json, yaml`},
		{name: "output unknown", args: []string{"-o", "xml"}, want: `invalid --output "xml": use one of wide, json, yaml`},
		{name: "negative interval", args: []string{"--interval=-1s"}, want: "--interval must be positive, or 0 for a single pass; got -1s"},
		{name: "leader election without interval", args: []string{"--leader-elect"}, want: "--leader-elect needs --interval: a single pass does not take a lease"},
		{name: "metrics without interval", args: []string{"--metrics-bind-address=:8080"}, want: "--metrics-bind-address needs --interval"},
		{name: "estimator", args: []string{"--estimator=grpc"}, want: `invalid --estimator "grpc": use proxy or kubeconfig`},
		{name: "member kubeconfig missing", args: []string{"--member-kubeconfig=x"}, want: "cannot read --member-kubeconfig x: open x: no such file or directory"},
		{name: "limits", args: []string{"--max-replicas-per-pass=-2"}, want: "must be 0 (no limit) or positive, got -2 and 0"},
		{name: "qps", args: []string{"--kube-api-qps=0"}, want: "--kube-api-qps and --kube-api-burst must be greater than zero, got 0 and 60; e.g. --kube-api-qps 50 --kube-api-burst 100"},
		{name: "old qps name", args: []string{"--qps=0"}, want: "Flag --qps has been deprecated, use --kube-api-qps instead\nerror: --kube-api-qps and --kube-api-burst must be greater than zero"},
		{name: "interval under two names", args: []string{"--interval=1m", "--descheduling-interval=2m"},
			want: "--interval 1m and --descheduling-interval 2m disagree: they are two names of one setting; give only --interval"},
		{name: "qps under two names", args: []string{"--kube-api-qps=5", "--qps=6"}, want: "--kube-api-qps 5 and --qps 6 disagree"},
		{name: "interval not a duration", args: []string{"--interval=often"}, want: `invalid --interval "often": give a duration such as 30s, 5m or 1h30m, or a whole number of seconds such as 300, e.g. --interval 5m`},
		{name: "lease timings", args: []string{"--interval=1m", "--leader-elect", "--leader-elect-renew-deadline=20s"}, want: "--leader-elect-lease-duration (15s) > --leader-elect-renew-deadline (20s)"},
		{name: "log format", args: []string{"--logging-format=xml"}, want: `invalid --logging-format "xml": use text or json`},
		{name: "deprecated log format", args: []string{"--log-format=xml"}, want: "Flag --log-format has been deprecated, use --logging-format instead\nerror: invalid --logging-format \"xml\": use text or json"},
		{name: "probes without interval", args: []string{"--health-probe-bind-address=:10358"}, want: "--health-probe-bind-address needs --interval"},
		{name: "force without interval", args: []string{"--force"}, want: "--force needs --interval"},
		{name: "karmada's interval name", args: []string{"--descheduling-interval=-2m"}, want: "--interval must be positive, or 0 for a single pass; got -2m0s"},
		{name: "excluded namespace selected", args: []string{"--exclude-namespace=kube-system,shop"}, want: "namespace shop is both selected (-n or the kubeconfig) and excluded (--exclude-namespace); use -A"},
		{name: "selector", args: []string{"-l", "a in (b"}, want: `invalid workload label selector "a in (b"`},
		{name: "unknown flag", args: []string{"--scheduler-estimator=x"}, want: `unknown flag --scheduler-estimator for "kubectl rebalance deschedule"`},
		{name: "ignored flag of the wrong type", args: []string{"--scheduler-estimator-port=web"}, want: `invalid --scheduler-estimator-port "web": give a whole number, e.g. --scheduler-estimator-port 10352`},
		{name: "pprof without interval", args: []string{"--enable-pprof"}, want: "--enable-pprof needs --interval: a single pass serves no profiles"},
		{name: "master and server disagree", args: []string{"--server=https://a:1", "--master=https://b:2"}, want: `--master "https://b:2" and --server "https://a:1" disagree`},
		{name: "contexts disagree", args: []string{"--context=a", "--karmada-context=b"}, want: `--karmada-context "b" and --context "a" disagree`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runDeschedule(t, append([]string{"deschedule", kubeconfig}, tt.args...)...)
			assert.Equal(t, ExitError, code)
			assert.Empty(t, stdout)
			assert.True(t, strings.HasPrefix(stderr, "error: ") || strings.HasPrefix(stderr, "Flag --"), stderr)
			assert.Contains(t, stderr, tt.want)
		})
	}
}

func TestDescheduleUnreachableAPIServer(t *testing.T) {
	code, stdout, stderr := runDeschedule(t, "deschedule", "--kubeconfig", descheduleKubeconfig(t), "--request-timeout=2s")
	assert.Equal(t, ExitError, code)
	assert.Empty(t, stdout, "nothing is printed when the bindings cannot be listed")
	assert.Contains(t, stderr, `error: cannot reach the API server at https://127.0.0.1:1 (context "karmada-apiserver")`)
	assert.NotContains(t, stderr, "RBAC", "a server that is not there is not a permission problem")
	assert.Contains(t, stderr, "127.0.0.1:1")
}

func TestDescheduleHelp(t *testing.T) {
	code, stdout, _ := runDeschedule(t, "deschedule", "--help")
	assert.Equal(t, ExitOK, code)
	assert.Contains(t, stdout, "Usage:\n  kubectl rebalance deschedule [--interval DURATION]")
	assert.Contains(t, stdout, "  kubectl rebalance deschedule --dry-run=client\n")
	for _, flag := range []string{"--unschedulable-threshold", "--estimator", "--member-kubeconfig", "--max-replicas-per-pass", "--max-replicas-per-cluster",
		"--exclude-namespace", "--leader-elect-resource-namespace", "--metrics-bind-address", "--health-probe-bind-address",
		"--logging-format", "--kube-api-qps", "--kube-api-burst", "--force", "--no-headers"} {
		assert.Contains(t, stdout, flag)
	}
	// The flags every command takes are behind `kubectl rebalance options`;
	// aliases and flags that do nothing are not shown.
	assert.Contains(t, stdout, `Use "kubectl rebalance options" for a list of global command-line options`)
	for _, hidden := range append([]string{"--descheduling-interval", "--qps=", "--burst=", "--master", "--log-format", "--leader-elect-namespace", "--kubeconfig"}, ignoredDescheduleFlags...) {
		assert.NotContains(t, stdout, hidden+"=", hidden)
	}
}

// TestDescheduleInheritsKubeconfigFlags checks that the root command's
// persistent kubeconfig flags reach the subcommand wherever they are given.
func TestDescheduleInheritsKubeconfigFlags(t *testing.T) {
	kubeconfig := descheduleKubeconfig(t)
	tests := []struct {
		name          string
		args          []string
		wantNamespace string
		wantHost      string
		wantGroups    []string
	}{
		{name: "after the subcommand", args: []string{"deschedule", "--kubeconfig", kubeconfig}, wantNamespace: "shop", wantHost: "https://127.0.0.1:1"},
		{name: "before the subcommand", args: []string{"--kubeconfig", kubeconfig, "-n", "blog", "deschedule"}, wantNamespace: "blog", wantHost: "https://127.0.0.1:1"},
		{name: "karmada context", args: []string{"deschedule", "--kubeconfig", kubeconfig, "--karmada-context", "member1"}, wantNamespace: "default", wantHost: "https://127.0.0.1:2"},
		{name: "all namespaces", args: []string{"deschedule", "--kubeconfig", kubeconfig, "-A"}, wantNamespace: "", wantHost: "https://127.0.0.1:1"},
		{name: "karmada's master", args: []string{"deschedule", "--kubeconfig", kubeconfig, "--master", "https://karmada-apiserver.karmada-system.svc:5443"}, wantNamespace: "shop", wantHost: "https://karmada-apiserver.karmada-system.svc:5443"},
		{name: "master and server agree", args: []string{"--server", "https://127.0.0.1:3", "deschedule", "--kubeconfig", kubeconfig, "--master", "https://127.0.0.1:3"}, wantNamespace: "shop", wantHost: "https://127.0.0.1:3"},
		{
			name: "impersonation", args: []string{"deschedule", "--kubeconfig", kubeconfig, "--as", "system:serviceaccount:karmada-system:d", "--as-group", "a", "--as-group", "b"},
			wantNamespace: "shop", wantHost: "https://127.0.0.1:1", wantGroups: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			streams, _, _, _ := genericiooptions.NewTestIOStreams()
			root := NewCmdRebalance(streams)
			var got *DescheduleOptions
			for _, c := range root.Commands() {
				if c.Name() == "deschedule" {
					c.RunE = func(c *cobra.Command, args []string) error {
						got = NewDescheduleOptions(streams)
						got.AllNamespaces, _ = c.Flags().GetBool("all-namespaces")
						return got.Complete(c, args)
					}
				}
			}
			root.SetArgs(tt.args)
			require.NoError(t, root.Execute())
			require.NotNil(t, got)
			assert.Equal(t, tt.wantNamespace, got.Namespace)
			assert.Equal(t, tt.wantHost, got.restConfig.Host)
			assert.Equal(t, float32(defaultDescheduleQPS), got.restConfig.QPS)
			assert.Contains(t, got.restConfig.UserAgent, "kubectl-rebalance-deschedule/")
			if tt.wantGroups != nil {
				assert.Equal(t, "system:serviceaccount:karmada-system:d", got.restConfig.Impersonate.UserName)
				assert.Equal(t, tt.wantGroups, got.restConfig.Impersonate.Groups)
			}
		})
	}
}

// TestDescheduleKarmadaFlags checks that karmada-descheduler's flag names
// set the same options as ours, that renamed flags keep working with a
// deprecation notice, and karmada-descheduler's defaults.
func TestDescheduleKarmadaFlags(t *testing.T) {
	kubeconfig := descheduleKubeconfig(t)
	parse := func(t *testing.T, args ...string) *DescheduleOptions {
		t.Helper()
		streams, _, _, _ := genericiooptions.NewTestIOStreams()
		root := NewCmdRebalance(streams)
		o := NewDescheduleOptions(streams)
		for _, c := range root.Commands() {
			if c.Name() == "deschedule" {
				c.RunE = func(c *cobra.Command, _ []string) error {
					f := c.Flags()
					o.Interval, _ = f.GetDuration("interval")
					o.QPS, _ = f.GetFloat32("qps")
					o.Burst, _ = f.GetInt("burst")
					o.LeaderElect, _ = f.GetBool("leader-elect")
					o.LeaderElectNamespace, _ = f.GetString("leader-elect-resource-namespace")
					o.LeaderElectName, _ = f.GetString("leader-elect-resource-name")
					o.LogFormat, _ = f.GetString("logging-format")
					return nil
				}
			}
		}
		root.SetArgs(append([]string{"deschedule", "--kubeconfig", kubeconfig}, args...))
		require.NoError(t, root.Execute())
		return o
	}

	o := parse(t)
	assert.True(t, o.LeaderElect, "leader election is on by default")
	assert.Equal(t, "karmada-system", o.LeaderElectNamespace)
	assert.Equal(t, "karmada-descheduler", o.LeaderElectName, "karmada-descheduler's Lease")

	o = parse(t, "--descheduling-interval=2m", "--kube-api-qps=40", "--kube-api-burst=60", "--leader-elect=false",
		"--leader-elect-resource-namespace=ops", "--logging-format=json")
	assert.Equal(t, 2*time.Minute, o.Interval)
	assert.Equal(t, float32(40), o.QPS)
	assert.Equal(t, 60, o.Burst)
	assert.False(t, o.LeaderElect)
	assert.Equal(t, "ops", o.LeaderElectNamespace)
	assert.Equal(t, "json", o.LogFormat)

	o = parse(t, "--leader-elect-namespace=old", "--leader-elect-name=mine", "--log-format=json")
	assert.Equal(t, "old", o.LeaderElectNamespace)
	assert.Equal(t, "mine", o.LeaderElectName)
	assert.Equal(t, "json", o.LogFormat)

	// The real command warns about the old names, on stderr.
	_, stdout, stderr := runDeschedule(t, "deschedule", "--kubeconfig", kubeconfig, "--leader-elect-namespace=old", "--log-format=json", "--interval=-1s")
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "Flag --leader-elect-namespace has been deprecated, use --leader-elect-resource-namespace instead\n")
	assert.Contains(t, stderr, "Flag --log-format has been deprecated, use --logging-format instead\n")
}

// TestDescheduleAcceptsEveryKarmadaFlag checks that every flag of
// karmada-descheduler (its options at the pinned Karmada version, and its
// log flags) is a flag of ours of the same type, so that its arguments run
// here unchanged. Those that do nothing here, and karmada-descheduler's
// spellings of our flags, are hidden from help.
func TestDescheduleAcceptsEveryKarmadaFlag(t *testing.T) {
	theirs := pflag.NewFlagSet("karmada-descheduler", pflag.ContinueOnError)
	descheduleroptions.NewOptions().AddFlags(theirs)
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	root := NewCmdRebalance(streams)
	d, _, err := root.Find([]string{"deschedule"})
	require.NoError(t, err)
	ours := d.Flags()
	ours.AddFlagSet(root.PersistentFlags())
	theirs.VisitAll(func(f *pflag.Flag) {
		got := ours.Lookup(f.Name)
		if assert.NotNil(t, got, "karmada-descheduler's --%s", f.Name) {
			assert.Equal(t, f.Value.Type(), got.Value.Type(), "type of --%s", f.Name)
			hidden := slices.Contains(ignoredDescheduleFlags, f.Name) || f.Name == "descheduling-interval" || f.Name == "master"
			assert.Equal(t, hidden, got.Hidden, "--%s is hidden from help", f.Name)
		}
	})
	for _, name := range []string{"v", "logging-format"} {
		assert.NotNil(t, ours.Lookup(name), "karmada-descheduler's log flag --%s", name)
	}
}

// TestDescheduleIgnoredKarmadaFlags runs the arguments of Karmada's own
// karmada-descheduler manifest (artifacts/deploy/karmada-descheduler.yaml):
// all are accepted, and the scheduler-estimator ones are reported ignored
// on stderr, never silently; help does not show them.
func TestDescheduleIgnoredKarmadaFlags(t *testing.T) {
	kubeconfig := descheduleKubeconfig(t)
	args := []string{"deschedule", "--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=127.0.0.1:8080", "--health-probe-bind-address=127.0.0.1:10358",
		"--scheduler-estimator-ca-file=/etc/karmada/pki/scheduler-estimator-client/ca.crt",
		"--scheduler-estimator-cert-file=/etc/karmada/pki/scheduler-estimator-client/tls.crt",
		"--scheduler-estimator-key-file=/etc/karmada/pki/scheduler-estimator-client/tls.key",
		"--logging-format=json", "--v=4",
		"--scheduler-estimator-port=10352", "--scheduler-estimator-timeout=3s", "--insecure-skip-estimator-verify",
		"--scheduler-estimator-service-namespace=karmada-system", "--scheduler-estimator-service-prefix=karmada-scheduler-estimator",
		// Stops the command after the flags are read, before it starts.
		"--descheduling-interval=-1s"}
	code, stdout, stderr := runDeschedule(t, args...)
	assert.Equal(t, ExitError, code)
	assert.Empty(t, stdout)
	assert.NotContains(t, stderr, "unknown flag")
	assert.Contains(t, stderr, "error: --interval must be positive")
	for _, name := range ignoredDescheduleFlags {
		assert.Contains(t, stderr, "Flag --"+name+" is ignored: this command counts unschedulable pods by reading the members through --estimator", name)
	}

	_, help, _ := runDeschedule(t, "deschedule", "--help")
	assert.NotContains(t, help, "Ignored")
	assert.NotContains(t, help, "--master")
	assert.Contains(t, help, "--enable-pprof")
}

// TestDaemonRetriable: a daemon's start-up requests are retried after a
// passing fault, never after a refusal, and not once the daemon stops.
func TestDaemonRetriable(t *testing.T) {
	gr := schema.GroupResource{Group: "work.karmada.io", Resource: "resourcebindings"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"500", apierrors.NewInternalError(errors.New("injected")), true},
		{"503", apierrors.NewServiceUnavailable("shutting down"), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{"request timeout", fmt.Errorf("list: %w", context.DeadlineExceeded), true},
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"forbidden", apierrors.NewForbidden(gr, "", errors.New("no RBAC")), false},
		{"not served", apierrors.NewNotFound(gr, ""), false},
		{"unauthorized", apierrors.NewUnauthorized("who are you"), false},
	}
	retriable := daemonRetriable(context.Background())
	for _, tt := range tests {
		assert.Equal(t, tt.want, retriable(tt.err), tt.name)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, daemonRetriable(stopped)(apierrors.NewInternalError(errors.New("injected"))), "nothing is retried once the daemon stops")
}
