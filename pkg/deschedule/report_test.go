package deschedule

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestReport(t *testing.T) {
	result := samplePass()
	result.Start = testNow
	result.End = testNow.Add(1500 * time.Millisecond)
	result.UnschedulableThreshold = DefaultUnschedulableThreshold
	result.Skipped = []SkippedBinding{{Namespace: "default", Name: "cfg-configmap", Reason: "resource is v1 ConfigMap"}}
	result.ClusterErrors = map[string]error{"m9": errors.New("connection refused")}
	result.Bindings[1].Rows[0].Counted = false
	result.Bindings[1].Rows[0].Err = errors.New("forbidden")
	result.Bindings[1].Rows[0].Action = ActionCountFailed

	report := result.Report()
	assert.Equal(t, "deschedule.kubectl-rebalance.io/v1alpha1", report.APIVersion)
	assert.Equal(t, "DeschedulePass", report.Kind)
	assert.Equal(t, ReportSummary{
		Listed: 5, Candidates: 3, Descheduled: 1, EvictedReplicas: 2, Failed: 1,
		Text: result.Summary(),
	}, report.Summary)

	raw, err := json.Marshal(report)
	require.NoError(t, err)
	var generic map[string]any
	require.NoError(t, json.Unmarshal(raw, &generic))
	assert.Equal(t, "5m0s", generic["unschedulableThreshold"])
	assert.Equal(t, "2025-06-01T12:00:00Z", generic["startTime"])
	assert.Equal(t, []any{map[string]any{"cluster": "m9", "error": "connection refused"}}, generic["clusterErrors"])

	bindings := generic["bindings"].([]any)
	web := bindings[0].(map[string]any)
	assert.Equal(t, "descheduled", web["outcome"])
	assert.Equal(t, map[string]any{"apiVersion": "", "kind": "", "namespace": "", "name": ""}, web["resource"])
	clusters := web["clusters"].([]any)
	assert.Equal(t, map[string]any{
		"cluster": "m1", "spec": 4.0, "ready": 2.0, "unschedulable": 2.0, "new": 2.0, "evicted": 2.0, "action": "evict",
	}, clusters[0])
	assert.Equal(t, map[string]any{
		"cluster": "m2", "spec": 2.0, "ready": 2.0, "unschedulable": nil, "new": 2.0, "evicted": 0.0, "action": "ready",
	}, clusters[1], "an uncounted cluster has a null unschedulable count")

	api := bindings[1].(map[string]any)
	assert.Equal(t, map[string]any{
		"cluster": "m1", "spec": 3.0, "ready": nil, "unschedulable": nil, "new": 3.0, "evicted": 0.0, "action": "count-failed", "error": "forbidden",
	}, api["clusters"].([]any)[0], "an unknown ready count is null")
	assert.Equal(t, "conflict", bindings[2].(map[string]any)["error"])

	// The copy is deep and equal, as printers expect of runtime objects.
	cp := report.DeepCopyObject().(*PassReport)
	assert.Equal(t, report.Bindings, cp.Bindings)
	*cp.Bindings[0].Clusters[0].Ready = 99
	assert.Equal(t, int32(2), *report.Bindings[0].Clusters[0].Ready)

	_, err = yaml.Marshal(report)
	require.NoError(t, err)
}

func TestReportEmptyPass(t *testing.T) {
	raw, err := json.Marshal((&PassResult{}).Report())
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"bindings":[]`)
	assert.Contains(t, string(raw), `"skipped":[]`)
	assert.Contains(t, string(raw), `"dryRun":"none"`)
	assert.NotContains(t, string(raw), "clusterErrors")
}
