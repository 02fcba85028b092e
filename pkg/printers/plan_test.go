package printers

import (
	"bytes"
	"encoding/json"
	"testing"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

func planFixture() []predict.Prediction {
	w := func(name string) rebalance.Workload {
		return rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: name}
	}
	return []predict.Prediction{
		{Workload: w("a"), Binding: "a-deployment", Division: "DynamicWeight(AvailableReplicas)",
			Before:    []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 3}},
			Predicted: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 1}},
			Moves:     2, Verdict: predict.WouldMove, Reason: predict.ReasonFreshReschedule},
		{Workload: w("b"), Binding: "b-deployment", Division: "Duplicated",
			Before:    []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 1}},
			Predicted: []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 1}},
			Verdict:   predict.CannotChange, Reason: rebalance.ReasonDuplicated},
	}
}

func TestPrintPlan(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, PrintPlan(&out, planFixture(), PlanPrintOptions{}))
	assert.Equal(t, `WORKLOAD            VERDICT        BEFORE        PREDICTED                MOVES
deployment.apps/a   WouldMove      {member2:3}   {member1:2, member2:1}   2
deployment.apps/b   CannotChange   {member2:1}   {member2:1}              0
`, out.String())

	out.Reset()
	require.NoError(t, PrintPlan(&out, planFixture()[:1], PlanPrintOptions{Wide: true, NoHeaders: true}))
	assert.Contains(t, out.String(), "DynamicWeight(AvailableReplicas)   FreshReschedule")

	assert.Equal(t, []string{"member1: 0 -> 2 (+2)", "member2: 4 -> 2 (-2)"}, ClusterLines(predict.ByCluster(planFixture())))
	assert.Equal(t, "2 workloads: 1 would move, 0 unchanged, 0 cannot fit, 0 cannot predict, 1 cannot change (Duplicated: 1)", CountsLine(planFixture()))
}

func TestPlanReportFields(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, PrintReport(&out, PlanReport(planFixture(), predict.Selection{Clusters: []string{"member1"}}), OutputReportJSON))
	var doc map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	assert.Equal(t, "RebalanceReport", doc["kind"])
	assert.Equal(t, "plan", doc["command"])
	assert.Equal(t, map[string]any{"clusters": []any{"member1"}, "toCluster": "member1"}, doc["selection"])
	first := doc["workloads"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "a"}, first["workload"])
	assert.Equal(t, "WouldMove", first["verdict"])
	assert.Equal(t, map[string]any{"before": map[string]any{"member2": 3.0}, "predicted": map[string]any{"member1": 2.0, "member2": 1.0}}, first["placements"])
	assert.Equal(t, []any{
		map[string]any{"name": "member1", "before": 0.0, "predicted": 2.0},
		map[string]any{"name": "member2", "before": 4.0, "predicted": 2.0},
	}, doc["clusters"])
	assert.Equal(t, 1.0, doc["summary"].(map[string]any)["verdicts"].(map[string]any)["WouldMove"])
}

// The report is written a workload at a time, byte for byte as the whole
// document indented at once.
func TestReportJSONIsTheIndentedDocument(t *testing.T) {
	for name, r := range map[string]*Report{
		"plan":  PlanReport(planFixture(), predict.Selection{Clusters: []string{"member1"}, ChangedOnly: true}),
		"empty": PlanReport(nil, predict.Selection{}),
		"nil":   {APIVersion: ReportAPIVersion, Kind: ReportKind, Command: "plan"},
		"one":   PlanReport(planFixture()[:1], predict.Selection{}),
	} {
		var out bytes.Buffer
		require.NoError(t, PrintReport(&out, r, OutputReportJSON), name)
		want, err := json.MarshalIndent(r, "", "    ")
		require.NoError(t, err)
		assert.Equal(t, string(want)+"\n", out.String(), name)
	}
}

// A plan's report made entry by entry as it is written is the report
// built whole, in both formats.
func TestPrintPlanReportIsThePlanReport(t *testing.T) {
	for name, ps := range map[string][]predict.Prediction{"plan": planFixture(), "one": planFixture()[:1], "empty": nil} {
		for _, format := range []string{OutputReportJSON, OutputReportYAML} {
			var streamed, whole bytes.Buffer
			sel := predict.Selection{Clusters: []string{"member1"}}
			require.NoError(t, PrintPlanReport(&streamed, ps, sel, format), name)
			require.NoError(t, PrintReport(&whole, PlanReport(ps, sel), format), name)
			assert.Equal(t, whole.String(), streamed.String(), name+" "+format)
		}
	}
}

func TestRebalanceReportMatchesPrediction(t *testing.T) {
	ps := planFixture()
	rows := []rebalance.Row{{Workload: ps[0].Workload, Binding: ps[0].Binding, Result: "Successful",
		Observation: rebalance.Observation{Outcome: rebalance.OutcomeScheduled, Reason: "Success"},
		Before:      ps[0].Before, After: []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 1}, {Name: "member1", Replicas: 2}}}}
	r := RebalanceReport(rows, map[rebalance.Workload]predict.Prediction{ps[0].Workload: ps[0]}, predict.Selection{}, false, "")
	require.Len(t, r.Workloads, 1)
	require.NotNil(t, r.Workloads[0].PredictionMatched)
	assert.True(t, *r.Workloads[0].PredictionMatched)
	assert.Equal(t, "Scheduled", r.Workloads[0].Outcome)
	assert.Equal(t, map[string]int32{"member1": 2, "member2": 1}, r.Workloads[0].Placements.After)
}

// A prediction that depends on the batch's timing shows the likely placement
// first, then the others it may get; a declined one is never matched.
func TestBatchTimingRows(t *testing.T) {
	m1m2 := []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 1}}
	m2 := []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 3}}
	w := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "a"}
	likely := predict.Prediction{Workload: w, Binding: "a-deployment", Before: m2, Predicted: m1m2, Moves: 2,
		Possible: [][]workv1alpha2.TargetCluster{m1m2, m2}, Verdict: predict.WouldMove, Reason: predict.ReasonBatchTiming}
	declined := likely
	declined.Predicted, declined.Moves, declined.Verdict = m2, 0, predict.CannotPredict

	var out bytes.Buffer
	require.NoError(t, PrintPlan(&out, []predict.Prediction{likely}, PlanPrintOptions{NoHeaders: true}))
	assert.Equal(t, "deployment.apps/a   WouldMove   {member2:3}   {member1:2, member2:1} or {member2:3}   2\n", out.String())
	out.Reset()
	require.NoError(t, PrintPlan(&out, []predict.Prediction{declined}, PlanPrintOptions{NoHeaders: true}))
	assert.Equal(t, "deployment.apps/a   CannotPredict   {member2:3}   {member2:3}   0\n", out.String())

	entry := PlanReport([]predict.Prediction{likely}, predict.Selection{}).Workloads[0]
	assert.Equal(t, []map[string]int32{{"member1": 2, "member2": 1}, {"member2": 3}}, entry.Placements.Possible)

	rows := []rebalance.Row{{Workload: w, Binding: "a-deployment", Result: "Successful",
		Observation: rebalance.Observation{Outcome: rebalance.OutcomeScheduled, Reason: "Success"}, Before: m2, After: m2}}
	r := RebalanceReport(rows, map[rebalance.Workload]predict.Prediction{w: likely}, predict.Selection{}, false, "")
	require.NotNil(t, r.Workloads[0].PredictionMatched)
	assert.False(t, *r.Workloads[0].PredictionMatched, "the likely placement is the prediction")
	r = RebalanceReport(rows, map[rebalance.Workload]predict.Prediction{w: declined}, predict.Selection{}, false, "")
	assert.Nil(t, r.Workloads[0].PredictionMatched, "nothing was predicted")
}
