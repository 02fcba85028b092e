package cmd

import (
	"bytes"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDurationOrSeconds(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{in: "300", want: 5 * time.Minute},
		{in: "5m", want: 5 * time.Minute},
		{in: " 90s ", want: 90 * time.Second},
		{in: "0", want: 0},
		{in: "-5", want: -5 * time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "1.5", err: "give a duration such as 30s, 5m or 1h30m, or a whole number of seconds such as 300"},
		{in: "ten", err: "give a duration such as 30s, 5m or 1h30m, or a whole number of seconds such as 300"},
		{in: "9999999999", err: "it is too long: a duration can be at most about 292 years"},
	}
	for _, tt := range tests {
		got, err := parseDurationOrSeconds(tt.in)
		if tt.err != "" {
			assert.EqualError(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

func TestWholeSeconds(t *testing.T) {
	got, err := wholeSeconds("ttl", 5*time.Minute, "5m")
	require.NoError(t, err)
	assert.Equal(t, int32(300), got)
	_, err = wholeSeconds("ttl", 1500*time.Millisecond, "5m")
	assert.EqualError(t, err, "invalid --ttl 1.5s: it is counted in whole seconds; e.g. --ttl 5m")
	_, err = wholeSeconds("ttl", -time.Second, "5m")
	assert.EqualError(t, err, "invalid --ttl -1s: it cannot be negative; e.g. --ttl 5m")
}

func TestDryRunMode(t *testing.T) {
	tests := []struct{ in, want, notice, err string }{
		{in: "none", want: "none"},
		{in: "", want: "none"},
		{in: "client", want: "client"},
		{in: "server", want: "server"},
		{in: "true", want: "client", notice: "Flag --dry-run=true has been deprecated, use --dry-run=client instead\n"},
		{in: "false", want: "none", notice: "Flag --dry-run=false has been deprecated, use --dry-run=none instead\n"},
		{in: "always", err: `invalid --dry-run "always": use none, client or server (e.g. --dry-run=client; --dry-run alone means client)`},
	}
	for _, tt := range tests {
		var notice bytes.Buffer
		got, err := dryRunMode(tt.in, &notice)
		if tt.err != "" {
			assert.EqualError(t, err, tt.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, tt.in)
		assert.Equal(t, tt.notice, notice.String(), tt.in)
	}
}

// TestFlagAliases: the spellings of one flag share its value; given
// different values they are refused, naming both; a list flag's spellings
// add to one list.
func TestFlagAliases(t *testing.T) {
	newFlags := func() (*pflag.FlagSet, *time.Duration, *[]string) {
		flags := pflag.NewFlagSet("test", pflag.ContinueOnError)
		var interval time.Duration
		var clusters []string
		durationVar(flags, &interval, "interval", 0, "")
		addFlagAlias(flags, "interval", "descheduling-interval", false)
		addFlagAlias(flags, "interval", "old-interval", true)
		addClustersFlag(flags, &clusters, "")
		addFlagAlias(flags, "clusters", "to-cluster", true)
		flags.SetOutput(&bytes.Buffer{})
		return flags, &interval, &clusters
	}
	tests := []struct {
		args     []string
		interval time.Duration
		clusters []string
		err      string
	}{
		{args: []string{"--descheduling-interval", "2m"}, interval: 2 * time.Minute},
		{args: []string{"--interval", "120", "--descheduling-interval", "2m"}, interval: 2 * time.Minute},
		{args: []string{"--interval", "1m", "--descheduling-interval", "2m"}, err: "--interval 1m and --descheduling-interval 2m disagree: they are two names of one setting; give only --interval"},
		{args: []string{"--descheduling-interval", "2m", "--old-interval", "2m"}, interval: 2 * time.Minute},
		{args: []string{"--old-interval", "3m", "--interval", "1m"}, err: "--interval 1m and --old-interval 3m disagree"},
		{args: []string{"-C", "member1", "--to-cluster", "member2"}, clusters: []string{"member1", "member2"}},
		{args: []string{"--to-cluster", "member1"}, clusters: []string{"member1"}},
	}
	for _, tt := range tests {
		flags, interval, clusters := newFlags()
		require.NoError(t, flags.Parse(tt.args), tt.args)
		err := checkFlagAliases(flags)
		if tt.err != "" {
			require.Error(t, err, tt.args)
			assert.Contains(t, err.Error(), tt.err)
			continue
		}
		require.NoError(t, err, tt.args)
		assert.Equal(t, tt.interval, *interval, tt.args)
		assert.Equal(t, tt.clusters, *clusters, tt.args)
	}
	flags, _, _ := newFlags()
	assert.True(t, flags.Lookup("descheduling-interval").Hidden)
	assert.Empty(t, flags.Lookup("descheduling-interval").Deprecated, "another program's name, not an old one")
	assert.Equal(t, "use --interval instead", flags.Lookup("old-interval").Deprecated)
	assert.Equal(t, "use --clusters instead", flags.Lookup("to-cluster").Deprecated)
}

func TestSuggestFlags(t *testing.T) {
	flags := pflag.NewFlagSet("test", pflag.ContinueOnError)
	inherited := pflag.NewFlagSet("inherited", pflag.ContinueOnError)
	var clusters []string
	addClustersFlag(flags, &clusters, "")
	addFlagAlias(flags, "clusters", "to-cluster", true)
	flags.String("cluster", "", "the kubeconfig's")
	inherited.AddFlag(flags.Lookup("cluster"))
	flags.Bool("wait", true, "")
	assert.Equal(t, []string{"-C/--clusters", "--cluster"}, suggestFlags(flags, inherited, "clustres"))
	assert.Equal(t, []string{"-C/--clusters"}, suggestFlags(flags, inherited, "to-clusters"), "a close hidden alias suggests its flag")
	assert.Equal(t, []string{"--wait"}, suggestFlags(flags, inherited, "wiat"))
	assert.Empty(t, suggestFlags(flags, inherited, "colour"))
}
