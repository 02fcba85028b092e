package deschedule

import (
	"fmt"
	"io"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
)

// PrintOptions selects how PrintPass lays out the table.
type PrintOptions struct {
	// Wide adds the OUTCOME and MESSAGE columns.
	Wide bool
	// NoHeaders leaves out the header line.
	NoHeaders bool
	// WithNamespace always prints the NAMESPACE column; without it the column
	// appears only when the bindings span more than one namespace.
	WithNamespace bool
	// ChangesOnly leaves out bindings the pass had nothing to do with
	// (OutcomeUnchanged), which are most of them in a healthy fleet.
	ChangesOnly bool
	// HideReady leaves out bindings whose every cluster has all its replicas
	// ready: the pass did not need to look at them.
	HideReady bool
	// ShowSkipped adds one row per listed binding that is not a candidate,
	// with the reason in the MESSAGE column (shown with Wide).
	ShowSkipped bool
}

// Placeholders kubectl prints for absent values.
const (
	cellNone    = "<none>"
	cellUnknown = "<unknown>"
)

var passColumns = []metav1.TableColumnDefinition{
	{Name: "Binding", Type: "string", Description: "The ResourceBinding."},
	{Name: "Cluster", Type: "string", Description: "A target cluster of the binding."},
	{Name: "Spec", Type: "integer", Description: "Replicas the binding assigned to the cluster before the pass."},
	{Name: "Ready", Type: "string", Description: "Ready replicas reported by the cluster."},
	{Name: "Unschedulable", Type: "string", Description: "Pods unschedulable for longer than the threshold; <none> when not counted."},
	{Name: "New", Type: "integer", Description: "Replicas assigned to the cluster after the pass."},
	{Name: "Action", Type: "string", Description: "What the pass did with the cluster."},
	{Name: "Outcome", Type: "string", Priority: 1, Description: "What the pass did with the binding."},
	{Name: "Message", Type: "string", Priority: 1, Description: "The event message, or why nothing was written."},
}

var passNamespaceColumn = metav1.TableColumnDefinition{Name: "Namespace", Type: "string", Description: "The binding's namespace."}

// PrintPass writes one table row per target cluster of every candidate
// binding in result, in result order. It writes nothing when no binding is
// left to print, as kubectl does.
func PrintPass(w io.Writer, result *PassResult, opts PrintOptions) error {
	bindings := make([]BindingResult, 0, len(result.Bindings))
	for _, br := range result.Bindings {
		if opts.ChangesOnly && br.Outcome == OutcomeUnchanged {
			continue
		}
		if opts.HideReady && allReady(br.Rows) {
			continue
		}
		bindings = append(bindings, br)
	}
	var skipped []SkippedBinding
	if opts.ShowSkipped {
		skipped = result.Skipped
	}
	withNamespace := opts.WithNamespace || bindingsSpanNamespaces(bindings, skipped)

	table := rbprinters.NewTable(passColumns, passNamespaceColumn, withNamespace)
	for _, br := range bindings {
		message := br.Message
		if br.Err != nil {
			message = br.Err.Error()
		}
		for _, row := range br.Rows {
			table.AddRow(br.Namespace,
				br.Name, row.Cluster, int64(row.Spec), readyCell(row), unschedulableCell(row), int64(row.New), string(row.Action),
				string(br.Outcome), orNoneCell(message))
		}
	}
	for _, sb := range skipped {
		table.AddRow(sb.Namespace, sb.Name, cellNone, cellNone, cellNone, cellNone, cellNone, string(OutcomeSkipped), string(OutcomeSkipped), sb.Reason)
	}
	if table.Len() == 0 {
		return nil
	}
	if err := table.Print(w, opts.Wide, opts.NoHeaders); err != nil {
		return fmt.Errorf("printing the deschedule table failed: %w", err)
	}
	return nil
}

// PrintSummary writes result's one-line summary.
func PrintSummary(w io.Writer, result *PassResult) error {
	if _, err := fmt.Fprintln(w, result.Summary()); err != nil {
		return err
	}
	// Events are how others learn of a write (or a failed one): say when
	// they could not be recorded.
	for _, br := range result.Bindings {
		if br.EventErr != nil {
			if _, err := fmt.Fprintf(w, "warning: the events of binding %s/%s were not recorded: %v\n", br.Namespace, br.Name, br.EventErr); err != nil {
				return err
			}
		}
	}
	return nil
}

func bindingsSpanNamespaces(bindings []BindingResult, skipped []SkippedBinding) bool {
	namespace := ""
	seen := func(ns string) bool {
		if namespace == "" {
			namespace = ns
		}
		return ns != namespace
	}
	for _, br := range bindings {
		if seen(br.Namespace) {
			return true
		}
	}
	for _, sb := range skipped {
		if seen(sb.Namespace) {
			return true
		}
	}
	return false
}

// allReady reports whether every cluster of a binding has all its replicas ready.
func allReady(rows []ClusterRow) bool {
	for _, r := range rows {
		if r.Action != ActionReady {
			return false
		}
	}
	return true
}

func readyCell(row ClusterRow) string {
	if row.Ready == nil {
		return cellUnknown
	}
	return strconv.Itoa(int(*row.Ready))
}

func unschedulableCell(row ClusterRow) string {
	if !row.Counted {
		return cellNone
	}
	return strconv.Itoa(int(row.Unschedulable))
}

func orNoneCell(s string) string {
	if s == "" {
		return cellNone
	}
	return s
}
