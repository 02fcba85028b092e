package cmd

import (
	"fmt"
	"io"
	"sync"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
)

// rebalancerGeneration is the generation of a freshly created rebalancer;
// the printed object describes one pass over its spec.
const rebalancerGeneration = 1

// print writes the result in the chosen format to stdout and the one-line
// summary to stderr, so that stdout stays fit for scripts and kubectl apply.
func (o *RebalanceOptions) print(result *run.Result, resolved *rebalance.Resolved) error {
	switch o.OutputFormat {
	case rbprinters.OutputReportJSON, rbprinters.OutputReportYAML:
		if err := o.printReport(result); err != nil {
			return err
		}
	case "", "wide":
		opts := rbprinters.RowPrintOptions{
			Wide:          o.OutputFormat == "wide",
			NoHeaders:     o.NoHeaders,
			WithNamespace: o.AllNamespaces,
			DryRun:        o.DryRun != rebalance.DryRunNone,
		}
		if err := rbprinters.PrintRows(o.Out, result.Rows, opts); err != nil {
			return err
		}
	case "name":
		for _, row := range result.Rows {
			obj := &metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{APIVersion: row.Workload.APIVersion, Kind: row.Workload.Kind},
				ObjectMeta: metav1.ObjectMeta{Namespace: row.Workload.Namespace, Name: row.Workload.Name},
			}
			if err := o.printer.PrintObj(obj, o.Out); err != nil {
				return fmt.Errorf("printing %s failed: %w", rbprinters.WorkloadName(row.Workload), err)
			}
		}
	default:
		if err := o.printer.PrintObj(o.rebalancer(result, resolved), o.Out); err != nil {
			return fmt.Errorf("printing the workloadrebalancer failed: %w", err)
		}
	}

	fmt.Fprintln(o.ErrOut, rowsSummary(result.Rows, o.DryRun))
	warnUnchangeable(o.ErrOut, result.Rows)
	return nil
}

// rowsSummary is the one-line summary of rows, saying when they are those
// of a dry run.
func rowsSummary(rows []rebalance.Row, dryRun rebalance.DryRun) string {
	summary := rbprinters.Summarize(rows).String()
	switch dryRun {
	case rebalance.DryRunClient:
		summary += " (dry run)"
	case rebalance.DryRunServer:
		summary += " (server dry run)"
	}
	return summary
}

// rebalancer builds the WorkloadRebalancer that stands for this run. A run
// driven by a single WorkloadRebalancer manifest keeps its name and TTL, so
// that applying the output recreates that object; otherwise the name comes
// from the trigger time.
func (o *RebalanceOptions) rebalancer(result *run.Result, resolved *rebalance.Resolved) *appsv1alpha1.WorkloadRebalancer {
	name := "rebalance"
	if !result.TriggerTime.IsZero() {
		name += "-" + result.TriggerTime.UTC().Format("20060102-150405")
	}
	var ttl *int32
	if len(resolved.Rebalancers) == 1 && len(resolved.Rebalancers[0].Spec.Workloads) == len(resolved.Targets) {
		name = resolved.Rebalancers[0].Name
		ttl = resolved.Rebalancers[0].Spec.TTLSecondsAfterFinished
	}
	rb := record.Rebalancer(name, result.Rows, rebalancerGeneration, result.FinishTime)
	rb.Spec.TTLSecondsAfterFinished = ttl
	return rb
}

// runOutput is what a run shows as it goes: progress on stderr while it
// lasts, notices, and the rows once they are known.
type runOutput struct {
	o        *RebalanceOptions
	resolved *rebalance.Resolved
	progress *progressLine
	waves    *waveProgress // nil unless the run goes in waves
}

func (o *RebalanceOptions) newRunOutput(resolved *rebalance.Resolved) *runOutput {
	out := &runOutput{o: o, resolved: resolved, progress: newProgressLine(o.ErrOut)}
	if o.waved() {
		out.waves = newWaveProgress(o.ErrOut, o.quiet())
	}
	return out
}

// hooks are the run's hooks writing to the command's streams.
func (r *runOutput) hooks() run.Hooks {
	h := run.Hooks{Progress: r.progress.Update, Notice: r.notice, Rows: r.rows}
	if r.waves != nil {
		h.Waves = r.waves.Update
	}
	return h
}

func (r *runOutput) notice(line string) {
	r.progress.Clear()
	if r.waves != nil {
		// Above the live display, which is drawn again below.
		r.waves.Notice(line)
		return
	}
	fmt.Fprintln(r.o.ErrOut, line)
}

// rows ends the progress output and prints the rows.
func (r *runOutput) rows(res *run.Result) error {
	r.close()
	if res.Record != nil {
		return r.o.printRecorded(res.Record, res.Rows)
	}
	return r.o.print(res, r.resolved)
}

// close ends the progress output; it may be called more than once.
func (r *runOutput) close() {
	r.progress.Clear()
	if r.waves != nil {
		r.waves.Close()
	}
}

// progressLine shows how far a long run got on one terminal line. It stays
// silent unless it writes to a terminal, so logs and pipes get only results.
type progressLine struct {
	mu      sync.Mutex
	w       io.Writer
	enabled bool
	shown   bool
	last    time.Time
}

// progressInterval limits redraws; a terminal need not show every step.
const progressInterval = 100 * time.Millisecond

func newProgressLine(w io.Writer) *progressLine {
	return &progressLine{w: w, enabled: printers.IsTerminal(w)}
}

// Update redraws the line with p, at most every progressInterval except for
// the last step of a phase.
func (p *progressLine) Update(pr rebalance.Progress) {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if pr.Done < pr.Total && now.Sub(p.last) < progressInterval {
		return
	}
	p.last = now
	p.shown = true
	fmt.Fprintf(p.w, "\r\033[K%s: %d/%d %s", pr.Phase, pr.Done, pr.Total, plural(pr.Total, "workload", "workloads"))
}

// Clear removes the line before results are printed.
func (p *progressLine) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
