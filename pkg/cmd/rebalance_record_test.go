package cmd

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRebalanceRecordUsageErrors(t *testing.T) {
	kubeconfig := writeKubeconfig(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "negative ttl", args: []string{"deploy/a", "--ttl", "-1"},
			wantErr: "error: invalid --ttl -1s: a ttl cannot be negative; give 0 to delete the workloadrebalancer as soon as it finished, or leave --ttl out to keep it\n"},
		{name: "ttl not a duration", args: []string{"deploy/a", "--ttl", "ten"},
			wantErr: `error: invalid --ttl "ten": give a duration such as 30s, 5m or 1h30m, or a whole number of seconds such as 300, e.g. --ttl 5m` + "\n"},
		{name: "fractional ttl", args: []string{"deploy/a", "--ttl=1.5"},
			wantErr: `error: invalid --ttl "1.5": give a duration such as 30s, 5m or 1h30m, or a whole number of seconds such as 300`},
		{name: "ttl of a fraction of a second", args: []string{"deploy/a", "--ttl=1500ms"},
			wantErr: `error: invalid --ttl 1.5s: it is counted in whole seconds; e.g. --ttl 5m`},
		{name: "ttl too large", args: []string{"deploy/a", "--ttl=3000000000"},
			wantErr: `error: invalid --ttl 833333h20m0s: at most 2147483647 seconds (about 68 years); e.g. --ttl 5m`},
		{name: "ttl too large to count", args: []string{"deploy/a", "--ttl=9999999999"},
			wantErr: `error: invalid --ttl "9999999999": it is too long: a duration can be at most about 292 years, e.g. --ttl 5m`},
		{name: "ttl without a value", args: []string{"deploy/a", "--ttl"},
			wantErr: `error: --ttl needs a value, e.g. --ttl 5m`},
		{name: "invalid name", args: []string{"deploy/a", "--name", "Not_A_Name"},
			wantErr: `error: invalid --name "Not_A_Name": a lowercase RFC 1123 subdomain must consist of`},
		{name: "dry run with a name", args: []string{"deploy/a", "--name", "x", "--dry-run=client"},
			wantErr: "error: a dry run records nothing: leave out --dry-run, or --name, --ttl and --server-side\n"},
		{name: "server dry run with server-side", args: []string{"deploy/a", "--server-side", "--dry-run=server"},
			wantErr: "error: a dry run records nothing"},
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

func TestRebalanceRecordHelp(t *testing.T) {
	code, out, _ := runRebalance(t, "--help")
	assert.Equal(t, ExitOK, code)
	for _, want := range []string{
		"--name=''", "--ttl=0s", "--wait-ttl=true", "--server-side=false",
		"kubectl rebalance deploy/nginx --name nginx-after-failover --ttl 5m",
		"List records with 'kubectl rebalance get'.",
		"get           List WorkloadRebalancers with a summary, or show the workloads of one",
	} {
		assert.Contains(t, out, want)
	}
}
