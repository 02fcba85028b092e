package cmd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
)

func TestFailbackFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"deploy/x"}, `failback takes no arguments, got ["deploy/x"]`},
		{[]string{"--stabilization-window", "-1s"}, "--stabilization-window cannot be negative, got -1s"},
		{[]string{"--max-in-flight", "0"}, "--max-in-flight must be at least 1, got 0: a failback goes in waves"},
		{[]string{"--max-failures", "-1"}, "--max-failures must be 0 (no limit) or more, got -1"},
		{[]string{"--ttl", "-5"}, "invalid --ttl -5: a ttl cannot be negative"},
		{[]string{"--kinds", "deploy/x"}, `invalid --kinds entry "deploy/x"`},
		{[]string{"--leader-elect-renew-deadline", "20s"}, "leader election needs --leader-elect-lease-duration (15s) > --leader-elect-renew-deadline (20s)"},
		{[]string{"--logging-format", "xml"}, `invalid --logging-format "xml": use text or json`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			root := NewCmdRebalance(streams)
			root.SetArgs(append([]string{"failback", "--kubeconfig", writeKubeconfig(t)}, tt.args...))
			code := Execute(root, streams)
			assert.Equal(t, ExitError, code)
			assert.Contains(t, errOut.String(), tt.want)
			assert.Empty(t, out.String())
		})
	}
}

// TestFailbackRunArgs checks that a failback is the interactive command
// with the daemon's flags: a new one selects by --to-cluster and records
// under the recovery's name; a resumed one continues its record.
func TestFailbackRunArgs(t *testing.T) {
	o := NewFailbackOptions(genericiooptions.NewTestIOStreamsDiscard())
	o.AllNamespaces = true
	o.LabelSelector = "tier=web"
	o.MaxFailures = 2
	o.ProgressDeadline = time.Minute
	o.configArgs = []string{"--kubeconfig=/k"}
	r := &failbackRunner{o: o}
	name := failback.RecordName("member1", "0a1b2c3d")
	assert.Equal(t, []string{"deployments.apps,statefulsets.apps", "--to-cluster", "member1", "--all-namespaces", "--selector", "tier=web",
		"--name", name, "--ttl", "86400", "--wait-ttl=false", "--max-in-flight", "10", "--wait-ready=true", "--progress-deadline", "1m0s",
		"--max-failures", "2", "--pause", "0s", "--qps", "40", "--burst", "60", "--quiet", "--output=wide", "--kubeconfig=/k"},
		r.args(failback.Request{Cluster: "member1", Key: "0a1b2c3d", Name: name}))
	resumed := r.args(failback.Request{Cluster: "member1", Key: "0a1b2c3d", Name: name, Resume: true})
	require.NotEmpty(t, resumed)
	assert.Equal(t, "workloadrebalancer/"+name, resumed[0])
	assert.NotContains(t, resumed, "--to-cluster")
	assert.NotContains(t, resumed, "--name")

	o.DryRun = true
	assert.Equal(t, []string{"deployments.apps,statefulsets.apps", "--to-cluster", "member1", "--all-namespaces", "--selector", "tier=web",
		"--dry-run=client", "--output=wide", "--kubeconfig=/k"}, r.args(failback.Request{Cluster: "member1", Key: "0a1b2c3d", Name: name}))
}

// TestForwardedConfigArgs checks that the kubeconfig flags given to the
// daemon reach the rebalances it runs, and only those.
func TestForwardedConfigArgs(t *testing.T) {
	cf := genericclioptions.NewConfigFlags(true)
	*cf.KubeConfig = "/etc/karmada/config/karmada.config"
	*cf.Context = "karmada-apiserver"
	*cf.Impersonate = "system:serviceaccount:karmada-system:kubectl-rebalance-failback"
	*cf.ImpersonateGroup = []string{"a", "b"}
	assert.ElementsMatch(t, []string{"--kubeconfig=/etc/karmada/config/karmada.config", "--context=karmada-apiserver",
		"--as=system:serviceaccount:karmada-system:kubectl-rebalance-failback", "--as-group=a", "--as-group=b"}, forwardedConfigArgs(cf))
	assert.Empty(t, forwardedConfigArgs(genericclioptions.NewConfigFlags(true)))
}
