package cmd

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

func TestWaveUsageErrors(t *testing.T) {
	kubeconfig := writeKubeconfig(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "negative window", args: []string{"--max-in-flight=-1"}, wantErr: "error: --max-in-flight must be 0 (no waves) or more, got -1\n"},
		{name: "negative budget", args: []string{"--max-in-flight=2", "--max-failures=-1"}, wantErr: "error: --max-failures must be 0 (no limit) or more, got -1\n"},
		{name: "bad order", args: []string{"--max-in-flight=2", "--order=random"}, wantErr: `error: invalid --order "random": use crd or given` + "\n"},
		{name: "wave flag without waves", args: []string{"--max-failures=2"}, wantErr: "error: --max-failures applies to waves only: add --max-in-flight N\n"},
		{name: "waves without waiting", args: []string{"--max-in-flight=2", "--wait=false"}, wantErr: "error: --max-in-flight needs --wait"},
		{name: "waves server-side", args: []string{"--max-in-flight=2", "--server-side"}, wantErr: "error: --max-in-flight cannot be combined with --server-side"},
		{name: "steps of zero", args: []string{"--name=canary", "--steps=0,100%"}, wantErr: `error: invalid --steps "0,100%": "0" is neither a count of workloads (1 or more) nor a percentage of them (such as 10%); e.g. --steps 1,10%,100%`},
		{name: "steps past 100%", args: []string{"--name=canary", "--steps=1,200%"}, wantErr: `error: invalid --steps "1,200%": "200%" is not a percentage from 1% to 100%; e.g. --steps 1,10%,100%`},
		{name: "steps that shrink", args: []string{"--name=canary", "--steps=50%,10%"}, wantErr: `error: invalid --steps "50%,10%": the steps must grow`},
		{name: "empty steps", args: []string{"--name=canary", "--steps="}, wantErr: `error: invalid --steps "": give at least one step`},
		{name: "steps server-side", args: []string{"--steps=1,100%", "--server-side"}, wantErr: "error: --steps cannot be combined with --server-side"},
		{name: "steps without waiting", args: []string{"--name=canary", "--steps=1,100%", "--wait=false"}, wantErr: "error: --steps needs --wait"},
		{name: "steps of a dry run", args: []string{"--steps=1,100%", "--dry-run=client"}, wantErr: "error: --steps pauses a run that writes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runRebalance(t, append([]string{"--kubeconfig", kubeconfig, "deploy/a"}, tt.args...)...)
			assert.Equal(t, ExitError, code)
			assert.Empty(t, stdout)
			assert.True(t, strings.HasPrefix(stderr, tt.wantErr), "stderr: %q", stderr)
		})
	}
}

func manyTargets(n int) []rebalance.Target {
	out := make([]rebalance.Target, 0, n)
	for i := range n {
		ns := fmt.Sprintf("ns-%d", i%3)
		out = append(out, rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: fmt.Sprintf("app-%d", i)}})
	}
	out = append(out, rebalance.Target{Workload: rebalance.Workload{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns-0", Name: "settings"}})
	return out
}

func TestAnnounce(t *testing.T) {
	streams, in, _, errOut := genericiooptions.NewTestIOStreams()
	o := NewRebalanceOptions(streams)
	o.MaxInFlight, o.WaitReady, o.ProgressDeadline, o.MaxFailures, o.DryRun = 10, true, 5*time.Minute, 3, rebalance.DryRunNone

	goOn, err := o.announce(manyTargets(3))
	require.NoError(t, err)
	assert.True(t, goOn)
	assert.Empty(t, errOut.String(), "a handful is not announced")

	goOn, err = o.announce(manyTargets(30))
	require.NoError(t, err)
	assert.True(t, goOn)
	assert.Equal(t, "about to rebalance 31 workloads (1 configmap, 30 deployment.apps) in 3 namespace(s): in waves of at most 10 in flight, each done when rescheduled and ready within 5m0s, stopping after 3 failure(s); Ctrl-C stops starting new ones\n", errOut.String())

	errOut.Reset()
	o.Interactive = true
	in.WriteString("n\n")
	goOn, err = o.announce(manyTargets(30))
	require.NoError(t, err)
	assert.False(t, goOn)
	assert.Contains(t, errOut.String(), "  ns-0/deployment.apps/app-0\n")
	assert.Contains(t, errOut.String(), "  ... and 11 more\nDo you want to continue? (y/n): rebalance cancelled: nothing was written\n")

	errOut.Reset()
	in.WriteString("y\n")
	goOn, err = o.announce(manyTargets(2))
	require.NoError(t, err)
	assert.True(t, goOn, "-i asks even for a handful")
	assert.Contains(t, errOut.String(), "Do you want to continue? (y/n): ")

	errOut.Reset()
	o.Interactive, o.MaxInFlight = false, 0
	_, _ = o.announce(manyTargets(30))
	assert.Contains(t, errOut.String(), ": every trigger at once; add --max-in-flight N to go in waves, -i to confirm first\n")

	errOut.Reset()
	_, _ = o.announce(manyTargets(10000))
	assert.Contains(t, errOut.String(), "; at karmada-scheduler's pace (about 20 bindings a second) the answers take about 8m20s, longer than --timeout 2m0s: raise --timeout, or use --max-in-flight")
}

func TestProgressText(t *testing.T) {
	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	s := waves.Status{Total: 100, Done: 38, Failed: 2, InFlight: 10, Pending: 50, Started: start}
	assert.Equal(t, "waves: 38 done, 10 in flight, 50 pending, 2 failed; 2.0/s, ETA 30s", progressText(s, start.Add(20*time.Second)))
	assert.Equal(t, "waves: 0 done, 10 in flight, 90 pending, 0 failed; rate and ETA after the first workload finishes",
		progressText(waves.Status{Total: 100, InFlight: 10, Pending: 90, Started: start}, start.Add(time.Second)))
}

func TestWaveProgressOffATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newWaveProgress(&buf, false)
	p.Update(waves.Status{Total: 3, Pending: 3, Started: time.Now()})
	p.Close()
	assert.NotContains(t, buf.String(), "\r", "no terminal control off a terminal")
	quiet := newWaveProgress(&buf, true)
	quiet.Update(waves.Status{Total: 3, Pending: 3, Started: time.Now()})
	quiet.Close()
	assert.Empty(t, buf.String())
}

func TestProgressDisplay(t *testing.T) {
	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	now := start.Add(20 * time.Second)
	w := func(ns, name string) rebalance.Workload {
		return rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}
	}
	var many []waves.Moving
	for i := range maxMovingLines + 2 {
		many = append(many, waves.Moving{Workload: w("shop", fmt.Sprintf("app-%d", i)), Since: start})
	}
	tests := []struct {
		name  string
		s     waves.Status
		width int
		want  []string
	}{
		{name: "counts and the workloads in flight",
			s: waves.Status{Total: 4, Done: 2, InFlight: 2, Started: start, Moving: []waves.Moving{
				{Workload: w("shop", "api"), Since: start.Add(8 * time.Second)}, {Workload: w("", "web"), Since: start.Add(15 * time.Second)}}},
			want: []string{"waves: 2 done, 2 in flight, 0 pending, 0 failed; 0.1/s, ETA 20s",
				"  moving shop/deployment.apps/api for 12s", "  moving deployment.apps/web for 5s"}},
		{name: "paused at a step", s: waves.Status{Total: 4, Done: 1, Pending: 3, Started: start, Paused: true},
			want: []string{"waves: 1 done, 0 in flight, 3 pending, 0 failed; 0.1/s, ETA 1m0s; paused at a step, waiting for an approval (kubectl rebalance approve)"}},
		{name: "lines cut to the terminal", s: waves.Status{Total: 4, Pending: 4, Started: start}, width: 11,
			want: []string{"waves: 0 d"}},
		{name: "a bounded list", s: waves.Status{Total: 10, InFlight: 10, Started: start, Moving: many},
			want: append([]string{"waves: 0 done, 10 in flight, 0 pending, 0 failed; rate and ETA after the first workload finishes"},
				"  moving shop/deployment.apps/app-0 for 20s", "  moving shop/deployment.apps/app-1 for 20s", "  moving shop/deployment.apps/app-2 for 20s",
				"  moving shop/deployment.apps/app-3 for 20s", "  moving shop/deployment.apps/app-4 for 20s", "  moving shop/deployment.apps/app-5 for 20s",
				"  moving shop/deployment.apps/app-6 for 20s", "  moving shop/deployment.apps/app-7 for 20s", "  ... and 2 more in flight")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, progressDisplay(tt.s, now, tt.width))
		})
	}
}

// TestWaveProgressRedrawsInPlace checks the terminal display: a redraw
// moves up over the lines drawn before and clears them, a notice goes
// above the display, and Close leaves nothing of it.
func TestWaveProgressRedrawsInPlace(t *testing.T) {
	var buf bytes.Buffer
	p := &waveProgress{w: &buf, terminal: true, stop: make(chan struct{})}
	start := time.Now()
	two := waves.Status{Total: 3, InFlight: 2, Pending: 1, Started: start, Moving: []waves.Moving{
		{Workload: rebalance.Workload{Kind: "Deployment", APIVersion: "apps/v1", Namespace: "ns", Name: "a"}, Since: start},
		{Workload: rebalance.Workload{Kind: "Deployment", APIVersion: "apps/v1", Namespace: "ns", Name: "b"}, Since: start}}}
	p.Update(two)
	assert.Equal(t, 3, p.lines)
	assert.NotContains(t, buf.String(), "\033[", "the first draw has nothing to clear")
	buf.Reset()
	p.Notice("paused after step 1 of 2")
	assert.True(t, strings.HasPrefix(buf.String(), "\033[2A\r\033[Jpaused after step 1 of 2\n"), "cleared, the notice, then drawn again: %q", buf.String())
	assert.Equal(t, 3, p.lines)
	buf.Reset()
	p.Close()
	assert.Equal(t, "\033[2A\r\033[J", buf.String())
	assert.Zero(t, p.lines)
}
