package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
)

func TestPlanUsageErrors(t *testing.T) {
	kubeconfig := writeKubeconfig(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "nothing named", args: []string{"plan"}, wantErr: "error: name the workloads to predict: give TYPE/NAME, TYPE NAME..., TYPE -l SELECTOR, TYPE --all or -f FILENAME\n"},
		{name: "all and selector", args: []string{"plan", "deployments", "--all", "-l", "app=x"}, wantErr: "error: --all and --selector cannot be combined"},
		{name: "bad estimator mode", args: []string{"plan", "deploy/a", "--scheduler-estimator", "maybe"}, wantErr: `error: invalid --scheduler-estimator "maybe": use auto, enabled or disabled`},
		{name: "bad output", args: []string{"plan", "deploy/a", "-o", "table"}, wantErr: `error: invalid --output "table": use one of wide, report-json, report-yaml`},
		{name: "write flags are not plan flags", args: []string{"plan", "deploy/a", "--dry-run"}, wantErr: `error: unknown flag --dry-run for "kubectl rebalance plan"`},
		{name: "a cluster that is a kubeconfig entry", args: []string{"plan", "deploy/a", "--cluster", "member7"},
			wantErr: "error: cannot use the kubeconfig: invalid configuration: no server found for cluster \"member7\"; check --kubeconfig and --karmada-context (or $KUBECONFIG); " +
				"--cluster member7 names a cluster entry of the kubeconfig, and it has none of that name: to choose Karmada member clusters, use -C/--clusters member7"},
		{name: "a misspelt clusters flag", args: []string{"plan", "deploy/a", "--clustres", "member1"},
			wantErr: `error: unknown flag --clustres for "kubectl rebalance plan"; did you mean -C/--clusters or --cluster?`},
		{
			name:    "contexts that disagree",
			args:    []string{"plan", "deploy/a", "--karmada-context", "member1", "--context", "karmada-apiserver"},
			wantErr: `error: --karmada-context "member1" and --context "karmada-apiserver" disagree; give only one of them` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runRebalance(t, append([]string{"--kubeconfig", kubeconfig}, tt.args...)...)
			assert.Equal(t, ExitError, code)
			assert.Empty(t, out)
			assert.True(t, strings.HasPrefix(errOut, tt.wantErr), "stderr:\n%s\nwant prefix:\n%s", errOut, tt.wantErr)
		})
	}
}

func TestPlanHelpNamesTheFlags(t *testing.T) {
	code, out, _ := runRebalance(t, "plan", "--help")
	assert.Equal(t, ExitOK, code)
	for _, flag := range []string{"-C, --clusters", "--changed-only", "--scheduler-estimator", "report-json", "-A, --all-namespaces", "-l, --selector", "-f, --filename"} {
		assert.Contains(t, out, flag)
	}
	assert.NotContains(t, out, "--to-cluster", "the old name is hidden")
	assert.NotContains(t, out, "--kubeconfig", "behind kubectl rebalance options")
}

// The overcommit warning suggests --overcommit-protection only where the
// scheduler's release has that feature gate.
func TestWarnOvercommits(t *testing.T) {
	over := []predict.Overcommit{{Cluster: "member1", Gain: 230, Room: 200}}
	var withGate, without bytes.Buffer
	warnOvercommits(&withGate, over, true)
	warnOvercommits(&without, over, false)
	assert.Contains(t, withGate.String(), "Warning: member1 would gain 230 replicas but its resource summary has room for 200 pods;")
	assert.Contains(t, withGate.String(), "or plan with --overcommit-protection if the scheduler runs with that gate\n")
	assert.Equal(t, "Warning: member1 would gain 230 replicas but its resource summary has room for 200 pods; karmada-scheduler of this release places them all the same "+
		"(every decision reads the same summary) and the rest stay Pending in the member; rebalance fewer workloads at a time\n", without.String())
}
