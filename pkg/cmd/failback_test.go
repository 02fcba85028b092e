package cmd

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
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
		{[]string{"--ttl", "-5"}, "invalid --ttl -5s: a ttl cannot be negative"},
		{[]string{"--ttl", "1.5s"}, "invalid --ttl 1.5s: it is counted in whole seconds; e.g. --ttl 24h"},
		{[]string{"--ttl", "a day"}, `invalid --ttl "a day": give a duration such as 30s, 5m or 1h30m, or a whole number of seconds such as 300`},
		{[]string{"--dry-run=maybe"}, `invalid --dry-run "maybe": use none, client or server`},
		{[]string{"--kube-api-qps", "0"}, "--kube-api-qps and --kube-api-burst must be greater than zero"},
		{[]string{"--max-surge", "lots"}, `invalid --max-surge "lots": give a number of replicas (e.g. --max-surge 1) or a percentage of the workload's replicas (e.g. --max-surge 25%)`},
		{[]string{"--kinds", "deploy/x"}, `invalid --kinds entry "deploy/x"`},
		{[]string{"--kinds", "deployments.apps,sts"}, "--kinds sts names StatefulSets, which are failed back only with --include-stateful"},
		{[]string{"--cooldown", "-1m"}, "--cooldown cannot be negative, got -1m0s"},
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

// TestFailbackRunRequest checks that a failback is kubectl rebalance's run
// with the daemon's flags: a new one selects the daemon's kinds and records
// under the recovery's name; a resumed one continues its record; a dry run
// records nothing.
func TestFailbackRunRequest(t *testing.T) {
	o := NewFailbackOptions(genericiooptions.NewTestIOStreamsDiscard())
	o.AllNamespaces = true
	o.LabelSelector = "tier=web"
	o.MaxFailures = 2
	o.ProgressDeadline = time.Minute
	o.configFlags = genericclioptions.NewConfigFlags(true)
	*o.configFlags.KubeConfig = "/k"
	o.kubeConfig = &rest.Config{Host: "https://karmada.example:5443", QPS: 5}
	r := &failbackRunner{o: o}
	name := failback.RecordName("member1", "0a1b2c3d")
	fresh := failback.Request{Cluster: "member1", Key: "0a1b2c3d", Name: name}
	web := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}
	resolved := &rebalance.Resolved{Targets: []rebalance.Target{web}}

	targets := r.targets(context.Background(), fresh, genericiooptions.NewTestIOStreamsDiscard())
	assert.Nil(t, targets.workloads)
	assert.Equal(t, []string{"deployments.apps"}, targets.Args, "StatefulSets are opt-in")
	assert.True(t, targets.AllNamespaces)
	assert.Equal(t, "tier=web", targets.LabelSelector)
	assert.False(t, targets.All)
	assert.Equal(t, "/k", *targets.ConfigFlags.KubeConfig)
	assert.Equal(t, float32(40), targets.QPS)
	assert.Equal(t, 60, targets.Burst)
	config, err := targets.factory.ToRESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://karmada.example:5443", config.Host, "the daemon's config, not read again")
	assert.Equal(t, float32(40), config.QPS, "with the run's own rate limits")
	assert.Equal(t, float32(5), o.kubeConfig.QPS, "on a copy")
	require.NotNil(t, targets.skip)
	assert.True(t, targets.skip(map[string]string{failback.SkipAnnotation: "true"}))
	assert.False(t, targets.skip(nil))

	ttl := int32(86400)
	assert.Equal(t, run.Request{
		Targets: resolved.Targets, DryRun: rebalance.DryRunNone, Wait: true, Workers: 60, Timeout: defaultTimeout,
		Record: run.Recording{Name: name, TTL: &ttl, Labels: failback.RecordLabels("member1", "0a1b2c3d"),
			Annotations: map[string]string{failback.PlannedAnnotation: `[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","namespace":"shop"}]`}},
		Waves: &run.Waves{Options: waves.Options{MaxInFlight: 10, WaitReady: true, ProgressDeadline: time.Minute, MaxFailures: 2}},
	}, r.request(fresh, resolved))

	resume := fresh
	resume.Resume = true
	targets = r.targets(context.Background(), resume, genericiooptions.NewTestIOStreamsDiscard())
	assert.Nil(t, targets.workloads, "no record to read the planned workloads of")
	assert.Equal(t, []string{"workloadrebalancer/" + name}, targets.Args)
	assert.Nil(t, targets.skip, "the record lists its workloads")
	fromRecord := &rebalance.Resolved{Targets: resolved.Targets, Rebalancers: []*appsv1alpha1.WorkloadRebalancer{{ObjectMeta: metav1.ObjectMeta{Name: name}}}}
	assert.Empty(t, r.request(resume, fromRecord).Record.Name, "the record's own name comes with it")
	resumed := r.request(resume, resolved)
	assert.Equal(t, name, resumed.Record.Name, "the planned workloads resume under the record's name")
	assert.Nil(t, resumed.Record.Annotations, "the record keeps the list it has")

	o.DryRun = rebalance.DryRunClient
	dry := r.request(fresh, resolved)
	assert.Equal(t, rebalance.DryRunClient, dry.DryRun)
	assert.Zero(t, dry.Record)
	assert.Nil(t, dry.Waves)
}

// TestFailbackKeepDisplaced: a failback narrows the selected workloads to
// those the failure displaced, and says why each displaced workload it
// does not select is left alone.
func TestFailbackKeepDisplaced(t *testing.T) {
	web := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	other := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "other"}
	db := rebalance.Workload{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "shop", Name: "db"}
	labelled := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "labelled"}
	resolved := &rebalance.Resolved{Targets: []rebalance.Target{{Workload: web}, {Workload: other}}}

	leftOut := keepDisplaced(resolved, []rebalance.Workload{db, web, labelled})
	assert.Equal(t, []rebalance.Target{{Workload: web}}, resolved.Targets)
	assert.Equal(t, []rebalance.Workload{db, labelled}, leftOut)

	assert.Equal(t, "statefulset shop/db was displaced by the failure of member1 and is not failed back: StatefulSets are failed back only with --include-stateful "+
		"(the pods re-created on member1 reattach the volumes left there before the failover; see docs/failback.md)", leftOutLine(db, "member1", false))
	assert.Equal(t, "statefulset shop/db was displaced by the failure of member1 and is not failed back: it is not among the workloads this daemon selects "+
		"(--kinds, -l, or the failback.kubectl-rebalance.io/skip=true annotation)", leftOutLine(db, "member1", true))
	assert.Contains(t, leftOutLine(labelled, "member1", false), "deployment shop/labelled was displaced by the failure of member1 and is not failed back: it is not among")
}

// TestFailbackMoveOptions: the daemon has kubectl rebalance's
// --max-surge and --max-unavailable (same defaults, same errors), and
// each failback's run gets the make-before-break mover they describe,
// built by the same targetOptions.handoverMover, or moves in one write
// and says why.
func TestFailbackMoveOptions(t *testing.T) {
	v112 := karmadaversion.Info{Oldest: karmadaversion.OldestSupported, Newest: karmadaversion.OldestSupported}
	tests := []struct {
		name     string
		args     []string
		release  *karmadaversion.Info
		dryRun   rebalance.DryRun
		wantErr  string
		budget   handover.Budget
		mover    bool
		line     string
		oneWrite string
		warning  string
	}{
		{name: "default: make-before-break", mover: true, budget: handover.DefaultBudget(),
			line: "moving make-before-break (--max-surge 100%, --max-unavailable 0): the replicas a cluster gains start and become ready before another cluster loses any"},
		{name: "a smaller budget", args: []string{"--max-surge=1", "--max-unavailable=25%"}, mover: true,
			budget: handover.Budget{MaxSurge: intstr.FromInt32(1), MaxUnavailable: intstr.FromString("25%")},
			line:   "moving make-before-break (--max-surge 1, --max-unavailable 25%)"},
		{name: "100% unavailable is the one-write move", args: []string{"--max-unavailable=100%"},
			line:     "moving in one write (--max-unavailable 100% lets every replica be unavailable): Karmada scales the clusters that lose replicas down at once",
			oneWrite: "--max-unavailable 100% lets every replica be unavailable"},
		{name: "Karmada v1.12 cannot suspend", release: &v112,
			line:     "moving in one write: this Karmada release cannot suspend a binding's scheduling",
			oneWrite: "this Karmada release cannot suspend a binding's scheduling",
			warning:  "warning: Karmada v1.12 has no spec.suspension.scheduling on bindings (added in v1.13): moving in one write"},
		{name: "a dry run moves nothing", dryRun: rebalance.DryRunClient},
		{name: "no room to move", args: []string{"--max-surge=0", "--max-unavailable=0%"},
			wantErr: "--max-surge and --max-unavailable cannot both be 0: a move needs room for an extra replica or leave to stop one first"},
		{name: "bad surge", args: []string{"--max-surge=lots"}, wantErr: `invalid --max-surge "lots": give a number of replicas (e.g. --max-surge 1) or a percentage of the workload's replicas (e.g. --max-surge 25%)`},
		{name: "bad unavailable", args: []string{"--max-unavailable=-1"}, wantErr: `invalid --max-unavailable "-1": it cannot be negative`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewFailbackOptions(genericiooptions.NewTestIOStreamsDiscard())
			cmd := &cobra.Command{Use: "failback"}
			o.AddFlags(cmd)
			require.NoError(t, cmd.ParseFlags(tt.args))
			o.DryRun = tt.dryRun
			if o.DryRun == "" {
				o.DryRun = rebalance.DryRunNone
			}
			err := o.Validate()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)

			r := &failbackRunner{o: o}
			req := failback.Request{Cluster: "member1", Key: "k", Name: failback.RecordName("member1", "k")}
			web := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}
			var log bytes.Buffer
			streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &log, ErrOut: &log}
			targets := r.targets(context.Background(), req, streams)
			if tt.release != nil {
				targets.releaseOnce.Do(func() { targets.release = *tt.release })
			} else {
				targets.releaseOnce.Do(func() { targets.releaseErr = errors.New("not asked in this test") })
			}
			rr := r.request(req, &rebalance.Resolved{Targets: []rebalance.Target{web}})
			engine := &run.Engine{Karmada: karmadafake.NewSimpleClientset(), Clock: rebalance.NewServerClock()}
			why := r.mover(targets, engine, &rr, &log)

			assert.Equal(t, tt.oneWrite, why)
			if tt.line == "" {
				assert.Empty(t, log.String())
			} else {
				assert.Contains(t, log.String(), tt.line)
			}
			if tt.warning != "" {
				assert.Contains(t, log.String(), tt.warning)
			}
			if !tt.mover {
				assert.Nil(t, rr.Mover)
				if rr.Waves != nil {
					assert.Nil(t, rr.Waves.Mover)
				}
				return
			}
			m, ok := rr.Mover.(*handover.Mover)
			require.True(t, ok, "the failback moves with kubectl rebalance's mover")
			assert.Same(t, rr.Mover, rr.Waves.Mover, "its waves move with it too")
			assert.Equal(t, tt.budget, m.Budget)
			assert.True(t, m.WaitReady, "a failback's waves wait for ready replicas (--wait-ready)")
			require.NotNil(t, m.OneWrite)
		})
	}
}

// TestFailbackResumesPlannedWorkloads: a failback resumed with the
// workloads its record planned resolves them as values, checked against
// the server's types and never read or listed, under clients built from
// the daemon's config; a workload of a kind the server does not serve is
// named.
func TestFailbackResumesPlannedWorkloads(t *testing.T) {
	web := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	tests := []struct {
		name      string
		workloads []rebalance.Workload
		wantErr   string
	}{
		{name: "served kinds", workloads: []rebalance.Workload{web}},
		{name: "a kind not served", workloads: []rebalance.Workload{web, {APIVersion: "apps/v1", Kind: "Gadget", Namespace: "shop", Name: "g"}},
			wantErr: "workloads[1] (apps/v1 Gadget shop/g): the API server does not serve kind Gadget in apps/v1"},
		{name: "a namespaced kind without namespace", workloads: []rebalance.Workload{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			wantErr: "workloads[0] (apps/v1 Deployment web): Deployment is namespaced, so the entry needs a namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeServer(t)
			cf := genericclioptions.NewConfigFlags(true)
			*cf.KubeConfig = kubeconfigFor(t, s.URL)
			config, err := cf.ToRESTConfig()
			require.NoError(t, err)
			targets := newTargetOptionsForConfig(genericiooptions.NewTestIOStreamsDiscard(), cf, config, tt.workloads)
			targets.deadline = time.Now().Add(time.Minute)

			_, resolved, err := targets.startup(context.Background())
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			want := make([]rebalance.Target, 0, len(tt.workloads))
			for _, w := range tt.workloads {
				want = append(want, rebalance.Target{Workload: w})
			}
			assert.Equal(t, &rebalance.Resolved{Targets: want}, resolved, "no manifest to apply comes with them")
			for _, r := range s.requests() {
				assert.NotContains(t, r, "/deployments", "planned workloads are not read")
			}
		})
	}
}
