package cmd

import (
	"context"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
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
		{[]string{"--ttl", "-5"}, "invalid --ttl -5: a ttl cannot be negative"},
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
	o.configArgs = []string{"--kubeconfig=/k"}
	r := &failbackRunner{o: o}
	name := failback.RecordName("member1", "0a1b2c3d")
	fresh := failback.Request{Cluster: "member1", Key: "0a1b2c3d", Name: name}
	web := rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}
	resolved := &rebalance.Resolved{Targets: []rebalance.Target{web}}

	targets, planned, err := r.targets(context.Background(), fresh, genericiooptions.NewTestIOStreamsDiscard())
	require.NoError(t, err)
	assert.Empty(t, planned)
	assert.Equal(t, []string{"deployments.apps"}, targets.Args, "StatefulSets are opt-in")
	assert.True(t, targets.AllNamespaces)
	assert.Equal(t, "tier=web", targets.LabelSelector)
	assert.False(t, targets.All)
	assert.Equal(t, "/k", *targets.ConfigFlags.KubeConfig)
	assert.Equal(t, float32(40), targets.QPS)
	assert.Equal(t, 60, targets.Burst)
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
	targets, planned, err = r.targets(context.Background(), resume, genericiooptions.NewTestIOStreamsDiscard())
	require.NoError(t, err)
	assert.Empty(t, planned, "no record to read the planned workloads of")
	assert.Equal(t, []string{"workloadrebalancer/" + name}, targets.Args)
	assert.Nil(t, targets.skip, "the record lists its workloads")
	fromRecord := &rebalance.Resolved{Targets: resolved.Targets, Rebalancers: []*appsv1alpha1.WorkloadRebalancer{{ObjectMeta: metav1.ObjectMeta{Name: name}}}}
	assert.Empty(t, r.request(resume, fromRecord).Record.Name, "the record's own name comes with it")
	resumed := r.request(resume, resolved)
	assert.Equal(t, name, resumed.Record.Name, "the planned workloads resume under the record's name")
	assert.Nil(t, resumed.Record.Annotations, "the record keeps the list it has")

	o.DryRun = true
	dry := r.request(fresh, resolved)
	assert.Equal(t, rebalance.DryRunClient, dry.DryRun)
	assert.Zero(t, dry.Record)
	assert.Nil(t, dry.Waves)
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
