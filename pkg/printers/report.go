package printers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Output formats of the machine-readable report (docs/plan.md describes
// its fields). -o yaml and -o json keep printing a WorkloadRebalancer.
const (
	OutputReportJSON = "report-json"
	OutputReportYAML = "report-yaml"
)

// ReportAPIVersion and ReportKind identify the report document.
const (
	ReportAPIVersion = "kubectl-rebalance.io/v1alpha1"
	ReportKind       = "RebalanceReport"
)

// Report is the machine-readable form of a plan or of a rebalance. Its field
// names are stable: scripts and jq filters rely on them.
type Report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Command is "plan" or "rebalance".
	Command string `json:"command"`
	// DryRun is "client" or "server" for a dry run of rebalance.
	DryRun string `json:"dryRun,omitempty"`
	// Selection repeats -C/--clusters and --changed-only.
	Selection *ReportSelection `json:"selection,omitempty"`
	// Workloads has one entry per workload, in the order of the run.
	Workloads []ReportWorkload `json:"workloads"`
	// Clusters sums the replicas per cluster over the workloads.
	Clusters []ReportCluster `json:"clusters"`
	// Summary counts the workloads.
	Summary ReportSummary `json:"summary"`
}

// ReportSelection is the selection a report was made with.
type ReportSelection struct {
	// Clusters repeats -C/--clusters.
	Clusters []string `json:"clusters,omitempty"`
	// ToCluster is the one cluster of -C/--clusters (the field scripts
	// read from when the flag was --to-cluster); empty with several.
	ToCluster   string `json:"toCluster,omitempty"`
	ChangedOnly bool   `json:"changedOnly,omitempty"`
}

// ReportWorkload is one workload of a report.
type ReportWorkload struct {
	Workload rebalance.Workload `json:"workload"`
	Binding  string             `json:"binding"`
	// Division is how the placement divides replicas (Duplicated,
	// Aggregated, DynamicWeight(...), StaticWeight); empty when unknown.
	Division string `json:"division,omitempty"`
	// Verdict is the prediction's: WouldMove, Unchanged, CannotFit,
	// CannotPredict, CannotChange; empty when nothing was predicted.
	Verdict string `json:"verdict,omitempty"`
	// Result is the WorkloadRebalancer result (Successful, Failed) of a
	// rebalance, "Pending" while unknown; empty in a plan.
	Result string `json:"result,omitempty"`
	// Outcome is what the scheduler did (Scheduled, SchedulingFailed,
	// Ignored, Waiting); empty in a plan.
	Outcome string `json:"outcome,omitempty"`
	// Reason and Message explain the outcome of a rebalance, or the verdict
	// of a plan.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Moves counts the replicas the prediction starts on another cluster.
	Moves int32 `json:"moves"`
	// Placements maps cluster names to replicas.
	Placements ReportPlacements `json:"placements"`
	// PredictionMatched, in a rebalance that predicted, tells whether the
	// scheduler's placement equals the predicted one.
	PredictionMatched *bool `json:"predictionMatched,omitempty"`
}

// ReportPlacements are a workload's placements as cluster -> replicas.
type ReportPlacements struct {
	Before map[string]int32 `json:"before"`
	// Predicted is absent when nothing was predicted.
	Predicted map[string]int32 `json:"predicted,omitempty"`
	// Alternative is the placement of a second fresh pass, when it differs.
	Alternative map[string]int32 `json:"alternative,omitempty"`
	// Possible, for a verdict with reason BatchTiming, lists every placement
	// the scheduler may write depending on when the members report the
	// batch's other moves; the first is the one with no report landed (the
	// prediction, unless the verdict is CannotPredict). For ReleaseDependent
	// it lists the divisions of the releases the detection cannot tell
	// apart, the newest release's first.
	Possible []map[string]int32 `json:"possible,omitempty"`
	// After is absent in a plan and in a dry run.
	After map[string]int32 `json:"after,omitempty"`
}

// ReportCluster sums one cluster's replicas over the workloads.
type ReportCluster struct {
	Name      string `json:"name"`
	Before    int32  `json:"before"`
	Predicted *int32 `json:"predicted,omitempty"`
	After     *int32 `json:"after,omitempty"`
}

// ReportSummary counts the workloads by verdict, result and outcome.
type ReportSummary struct {
	Workloads int            `json:"workloads"`
	Verdicts  map[string]int `json:"verdicts,omitempty"`
	Results   map[string]int `json:"results,omitempty"`
	Outcomes  map[string]int `json:"outcomes,omitempty"`
}

// PlanReport builds the report of a plan.
func PlanReport(predictions []predict.Prediction, sel predict.Selection) *Report {
	r := planShell(predictions, sel)
	for _, p := range predictions {
		r.Workloads = append(r.Workloads, predictionEntry(p))
	}
	return r
}

// planShell is the report of a plan without its workloads: the summary and
// the sums per cluster.
func planShell(predictions []predict.Prediction, sel predict.Selection) *Report {
	r := newReport("plan", sel)
	r.Summary.Verdicts = map[string]int{}
	for _, v := range predict.Verdicts {
		r.Summary.Verdicts[string(v)] = 0
	}
	for _, p := range predictions {
		r.Summary.Verdicts[string(p.Verdict)]++
	}
	r.Summary.Workloads = len(predictions)
	r.Clusters = reportClusters(len(predictions), func(i int) ReportWorkload { return predictionEntry(predictions[i]) })
	return r
}

// PrintPlanReport writes the report of a plan. As JSON, each workload's
// entry is made as it is written: at 10,000 workloads the entries, held
// whole, were a fifth of plan's live heap.
func PrintPlanReport(w io.Writer, predictions []predict.Prediction, sel predict.Selection, format string) error {
	if format != OutputReportJSON {
		return PrintReport(w, PlanReport(predictions, sel), format)
	}
	return writeReportEntries(w, planShell(predictions, sel), len(predictions), func(i int) ReportWorkload { return predictionEntry(predictions[i]) })
}

// RebalanceReport builds the report of a rebalance. predictions, when not
// nil, are the predictions made before the run, by workload.
func RebalanceReport(rows []rebalance.Row, predictions map[rebalance.Workload]predict.Prediction, sel predict.Selection, dryRun bool, dryRunMode string) *Report {
	r := newReport("rebalance", sel)
	if dryRun {
		r.DryRun = dryRunMode
	}
	r.Summary.Results, r.Summary.Outcomes = map[string]int{}, map[string]int{}
	if predictions != nil {
		r.Summary.Verdicts = map[string]int{}
	}
	for _, row := range rows {
		e := ReportWorkload{
			Workload: row.Workload,
			Binding:  row.Binding,
			Result:   resultText(row, dryRun),
			Outcome:  string(row.Observation.Outcome),
			Reason:   joinDistinct(string(row.Reason), row.Observation.Reason),
			Message:  joinDistinct(row.Message, row.Observation.Message),
			Placements: ReportPlacements{
				Before: placementMap(row.Before),
			},
		}
		if !dryRun {
			e.Placements.After = placementMap(row.After)
		}
		if p, ok := predictions[row.Workload]; ok {
			e.Division = string(p.Division)
			e.Verdict = string(p.Verdict)
			e.Moves = p.Moves
			e.Placements.Predicted = placementMap(p.Predicted)
			e.Placements.Alternative = alternativeMap(p.Alternative)
			e.Placements.Possible = possibleMaps(p.Possible)
			r.Summary.Verdicts[e.Verdict]++
			// Nothing predicted, nothing to match.
			if !dryRun && row.Observation.Outcome == rebalance.OutcomeScheduled && p.Verdict != predict.CannotPredict {
				matched := predict.SamePlacement(p.Predicted, row.After) ||
					(p.Alternative != nil && predict.SamePlacement(p.Alternative, row.After))
				e.PredictionMatched = &matched
			}
		}
		r.Summary.Results[e.Result]++
		if e.Outcome != "" {
			r.Summary.Outcomes[e.Outcome]++
		}
		r.Workloads = append(r.Workloads, e)
	}
	r.Summary.Workloads = len(r.Workloads)
	r.Clusters = reportClusters(len(r.Workloads), func(i int) ReportWorkload { return r.Workloads[i] })
	return r
}

func newReport(command string, sel predict.Selection) *Report {
	r := &Report{APIVersion: ReportAPIVersion, Kind: ReportKind, Command: command, Workloads: []ReportWorkload{}}
	if !sel.IsZero() {
		r.Selection = &ReportSelection{Clusters: sel.Clusters, ChangedOnly: sel.ChangedOnly}
		if len(sel.Clusters) == 1 {
			r.Selection.ToCluster = sel.Clusters[0]
		}
	}
	return r
}

func predictionEntry(p predict.Prediction) ReportWorkload {
	return ReportWorkload{
		Workload: p.Workload,
		Binding:  p.Binding,
		Division: string(p.Division),
		Verdict:  string(p.Verdict),
		Reason:   p.Reason,
		Message:  p.Message,
		Moves:    p.Moves,
		Placements: ReportPlacements{
			Before:      placementMap(p.Before),
			Predicted:   placementMap(p.Predicted),
			Alternative: alternativeMap(p.Alternative),
			Possible:    possibleMaps(p.Possible),
		},
	}
}

func possibleMaps(ps [][]workv1alpha2.TargetCluster) []map[string]int32 {
	if len(ps) == 0 {
		return nil
	}
	out := make([]map[string]int32, 0, len(ps))
	for _, p := range ps {
		out = append(out, placementMap(p))
	}
	return out
}

// placementMap turns a placement into cluster -> replicas; never nil, so
// that an empty placement prints as {}.
func placementMap(p []workv1alpha2.TargetCluster) map[string]int32 {
	m := make(map[string]int32, len(p))
	for _, tc := range p {
		m[tc.Name] += tc.Replicas
	}
	return m
}

func alternativeMap(p []workv1alpha2.TargetCluster) map[string]int32 {
	if p == nil {
		return nil
	}
	return placementMap(p)
}

// reportClusters sums the placements per cluster, in name order.
func reportClusters(n int, entry func(int) ReportWorkload) []ReportCluster {
	type sums struct{ before, predicted, after int32 }
	byName := map[string]*sums{}
	var names []string
	var anyPredicted, anyAfter bool
	get := func(name string) *sums {
		s := byName[name]
		if s == nil {
			s = &sums{}
			byName[name] = s
			names = append(names, name)
		}
		return s
	}
	for i := range n {
		w := entry(i)
		for c, n := range w.Placements.Before {
			get(c).before += n
		}
		if w.Placements.Predicted != nil {
			anyPredicted = true
			for c, n := range w.Placements.Predicted {
				get(c).predicted += n
			}
		}
		if w.Placements.After != nil {
			anyAfter = true
			for c, n := range w.Placements.After {
				get(c).after += n
			}
		}
	}
	slices.Sort(names)
	out := make([]ReportCluster, 0, len(names))
	for _, name := range names {
		s := byName[name]
		c := ReportCluster{Name: name, Before: s.before}
		if anyPredicted {
			c.Predicted = &s.predicted
		}
		if anyAfter {
			c.After = &s.after
		}
		out = append(out, c)
	}
	return out
}

// reportIndent is the indentation of -o report-json.
const reportIndent = "    "

// writeReportJSON writes r as json.MarshalIndent would, plus a newline, but
// one workload at a time through a small buffer: a fleet's report runs to
// megabytes, and encoding it whole held several copies of it at once.
func writeReportJSON(w io.Writer, r *Report) error {
	if len(r.Workloads) == 0 {
		return writeReportEntries(w, r, 0, nil)
	}
	workloads := r.Workloads
	shell := *r
	shell.Workloads = []ReportWorkload{}
	return writeReportEntries(w, &shell, len(workloads), func(i int) ReportWorkload { return workloads[i] })
}

// writeReportEntries writes the report r, whose workloads list is empty,
// with the n entries that entry makes, one at a time.
func writeReportEntries(w io.Writer, r *Report, n int, entry func(int) ReportWorkload) error {
	if n == 0 {
		data, err := json.MarshalIndent(r, "", reportIndent)
		if err != nil {
			return fmt.Errorf("encoding the report failed: %w", err)
		}
		_, err = w.Write(append(data, '\n'))
		return err
	}
	head, err := json.MarshalIndent(r, "", reportIndent)
	if err != nil {
		return fmt.Errorf("encoding the report failed: %w", err)
	}
	// The shell's empty list is where the workloads go.
	before, after, found := bytes.Cut(head, []byte(`"workloads": []`))
	if !found {
		return fmt.Errorf("encoding the report failed: no workloads list in %q", head)
	}
	bw := bufio.NewWriter(w)
	bw.Write(before)
	bw.WriteString(`"workloads": [`)
	itemPrefix := reportIndent + reportIndent
	for i := range n {
		e := entry(i)
		item, err := json.MarshalIndent(&e, itemPrefix, reportIndent)
		if err != nil {
			return fmt.Errorf("encoding the report failed: %w", err)
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n" + itemPrefix)
		bw.Write(item)
	}
	bw.WriteString("\n" + reportIndent + "]")
	bw.Write(after)
	bw.WriteByte('\n')
	return bw.Flush()
}

// PrintReport writes the report as indented JSON or as YAML.
func PrintReport(w io.Writer, r *Report, format string) error {
	var data []byte
	var err error
	switch format {
	case OutputReportJSON:
		return writeReportJSON(w, r)
	case OutputReportYAML:
		data, err = yaml.Marshal(r)
	default:
		return fmt.Errorf("unknown report format %q", format)
	}
	if err != nil {
		return fmt.Errorf("encoding the report failed: %w", err)
	}
	_, err = w.Write(data)
	return err
}
