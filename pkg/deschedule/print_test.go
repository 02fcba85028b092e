package deschedule

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
)

func samplePass() *PassResult {
	return &PassResult{
		DryRun: DryRunNone,
		Listed: 5,
		Bindings: []BindingResult{
			{
				Namespace: "default", Name: "web-deployment", Outcome: OutcomeDescheduled, Evicted: 2,
				Message: "Binding has been descheduled, 2 replica(s) in cluster(m1), 2 total descheduled replica(s)",
				Rows: []ClusterRow{
					{Cluster: "m1", Spec: 4, Ready: ptr.To[int32](2), Counted: true, Unschedulable: 2, New: 2, Action: ActionEvict},
					{Cluster: "m2", Spec: 2, Ready: ptr.To[int32](2), New: 2, Action: ActionReady},
				},
			},
			{
				Namespace: "default", Name: "api-deployment", Outcome: OutcomeUnchanged, Message: "no replicas unschedulable past the threshold",
				Rows: []ClusterRow{{Cluster: "m1", Spec: 3, Counted: true, New: 3, Action: ActionNone}},
			},
			{
				Namespace: "default", Name: "db-deployment", Outcome: OutcomeFailed, Err: errors.New("conflict"),
				Rows: []ClusterRow{{Cluster: "m3", Spec: 1, Counted: true, Unschedulable: 1, New: 0, Action: ActionEvict}},
			},
		},
		Descheduled: 1, EvictedReplicas: 2, Failed: 1,
	}
}

func TestPrintPass(t *testing.T) {
	tests := []struct {
		name string
		opts PrintOptions
		want string
	}{
		{
			name: "default",
			want: "" +
				"BINDING          CLUSTER   SPEC   READY       UNSCHEDULABLE   NEW   ACTION\n" +
				"web-deployment   m1        4      2           2               2     evict\n" +
				"web-deployment   m2        2      2           <none>          2     ready\n" +
				"api-deployment   m1        3      <unknown>   0               3     none\n" +
				"db-deployment    m3        1      <unknown>   1               0     evict\n",
		},
		{
			name: "changes only, wide, with namespace",
			opts: PrintOptions{ChangesOnly: true, Wide: true, WithNamespace: true, NoHeaders: true},
			want: "" +
				"default   web-deployment   m1    4     2           2        2     evict   descheduled   Binding has been descheduled, 2 replica(s) in cluster(m1), 2 total descheduled replica(s)\n" +
				"default   web-deployment   m2    2     2           <none>   2     ready   descheduled   Binding has been descheduled, 2 replica(s) in cluster(m1), 2 total descheduled replica(s)\n" +
				"default   db-deployment    m3    1     <unknown>   1        0     evict   failed        conflict\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, PrintPass(&buf, samplePass(), tt.opts))
			assert.Equal(t, tt.want, buf.String())
		})
	}
}

func TestPrintPassEmpty(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, PrintPass(&buf, &PassResult{}, PrintOptions{}))
	assert.Empty(t, buf.String())
}

func TestPrintSummary(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, PrintSummary(&buf, samplePass()))
	assert.Equal(t, "5 binding(s) listed, 3 candidate(s), descheduled 1 binding(s) moving 2 replica(s), 1 failed\n", buf.String())

	result := samplePass()
	result.Bindings[0].EventErr = errors.New(`events is forbidden: User "bob" cannot create resource "events"`)
	buf.Reset()
	require.NoError(t, PrintSummary(&buf, result))
	assert.Contains(t, buf.String(), "warning: the events of binding "+result.Bindings[0].Namespace+"/"+result.Bindings[0].Name+
		` were not recorded: events is forbidden: User "bob" cannot create resource "events"`+"\n")
}

func TestPrintPassHideReadyAndSkipped(t *testing.T) {
	result := samplePass()
	result.Bindings = append(result.Bindings, BindingResult{
		Namespace: "default", Name: "ok-deployment", Outcome: OutcomeUnchanged,
		Rows: []ClusterRow{{Cluster: "m1", Spec: 2, Ready: ptr.To[int32](2), New: 2, Action: ActionReady}},
	})
	result.Skipped = []SkippedBinding{{Namespace: "team-a", Name: "cfg-configmap", Reason: "resource is v1 ConfigMap, only apps/v1 Deployment is descheduled"}}

	var buf bytes.Buffer
	require.NoError(t, PrintPass(&buf, result, PrintOptions{HideReady: true}))
	assert.NotContains(t, buf.String(), "ok-deployment", "a binding whose clusters are all ready is left out")
	assert.Contains(t, buf.String(), "web-deployment")
	assert.NotContains(t, buf.String(), "cfg-configmap")

	buf.Reset()
	require.NoError(t, PrintPass(&buf, result, PrintOptions{Wide: true, ShowSkipped: true}))
	assert.Contains(t, buf.String(), "ok-deployment")
	assert.Contains(t, buf.String(), "NAMESPACE", "skipped rows of another namespace bring the namespace column")
	assert.Regexp(t, `team-a\s+cfg-configmap\s+<none>\s+<none>\s+<none>\s+<none>\s+<none>\s+skipped\s+skipped\s+resource is v1 ConfigMap`, buf.String())
}
