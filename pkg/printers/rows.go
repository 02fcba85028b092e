package printers

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// none is what kubectl prints for a value that is absent.
const none = "<none>"

// Values of the RESULT column besides the CRD results Successful and Failed.
const (
	// ResultPending is printed for a row whose trigger is not recorded yet.
	ResultPending = "Pending"
	// ResultDryRun is printed instead of ResultPending in a dry run, where
	// nothing is ever written.
	ResultDryRun = "DryRun"
)

// RowPrintOptions selects how PrintRows lays out the table.
type RowPrintOptions struct {
	// Wide adds the BINDING, TRIGGERED-AT and MESSAGE columns.
	Wide bool
	// NoHeaders leaves out the header line.
	NoHeaders bool
	// WithNamespace always prints the NAMESPACE column; without it the column
	// appears only when the rows span more than one namespace.
	WithNamespace bool
	// DryRun marks the rows as not written: pending results print as DryRun.
	DryRun bool
}

// rowColumns are the table's columns; Priority 1 marks the wide-only ones.
var rowColumns = []metav1.TableColumnDefinition{
	{Name: "Workload", Type: "string", Description: "The resource template, as kind.group/name."},
	{Name: "Result", Type: "string", Description: "The WorkloadRebalancer result: Successful, Failed or Pending."},
	{Name: "Outcome", Type: "string", Description: "What the scheduler did with the trigger."},
	{Name: "Before", Type: "string", Description: "The binding's clusters before the trigger."},
	{Name: "After", Type: "string", Description: "The binding's clusters when the outcome was observed."},
	{Name: "Binding", Type: "string", Priority: 1, Description: "The name of the workload's binding."},
	{Name: "Triggered-At", Type: "string", Priority: 1, Description: "The trigger time held by the binding."},
	// Reason is in the default table too: a failed or pending row must say why.
	{Name: "Reason", Type: "string", Description: "Why the result or outcome is what it is."},
	{Name: "Message", Type: "string", Priority: 1, Description: "Details for a human."},
}

// PrintRows writes rows as a kubectl-style table, in the order given. It
// writes nothing when there are no rows, as kubectl does.
func PrintRows(w io.Writer, rows []rebalance.Row, opts RowPrintOptions) error {
	withNamespace := opts.WithNamespace || SpansNamespaces(rows, func(r rebalance.Row) string { return r.Workload.Namespace })
	table := NewTable(rowColumns, WorkloadNamespaceColumn, withNamespace)
	for _, row := range rows {
		table.AddRow(row.Workload.Namespace,
			WorkloadName(row.Workload),
			resultText(row, opts.DryRun),
			outcomeText(row.Observation.Outcome),
			placementText(row.Before),
			placementText(row.After),
			orNone(row.Binding),
			timeText(row.TriggeredAt),
			orNone(joinDistinct(string(row.Reason), row.ClientReason, row.Observation.Reason)),
			orNone(joinDistinct(row.Message, row.Observation.Message)),
		)
	}
	if err := table.Print(w, opts.Wide, opts.NoHeaders); err != nil {
		return fmt.Errorf("printing the rebalance table failed: %w", err)
	}
	return nil
}

// WorkloadName names a workload the way `kubectl get -o name` does:
// lower-case kind, then ".group" unless it is in the core group, then
// "/name" (e.g. deployment.apps/nginx, configmap/settings).
func WorkloadName(w rebalance.Workload) string {
	kind := strings.ToLower(w.Kind)
	// An unparsable apiVersion still gets a readable name from its kind.
	if gv, err := schema.ParseGroupVersion(w.APIVersion); err == nil && gv.Group != "" {
		kind += "." + gv.Group
	}
	return kind + "/" + w.Name
}

// resultText prints the CRD result, naming the empty one.
func resultText(row rebalance.Row, dryRun bool) string {
	if row.Result != "" {
		return string(row.Result)
	}
	if dryRun {
		return ResultDryRun
	}
	return ResultPending
}

// outcomeText prints an outcome, "<none>" when nothing was observed.
func outcomeText(outcome rebalance.Outcome) string {
	return orNone(string(outcome))
}

// placementText prints a placement, "<none>" when it holds no cluster.
func placementText(clusters []workv1alpha2.TargetCluster) string {
	if len(clusters) == 0 {
		return none
	}
	return rebalance.FormatPlacement(clusters)
}

// timeText prints a time in RFC 3339 UTC, "<none>" when unset.
func timeText(t *metav1.Time) string {
	if t == nil {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}

// orNone replaces an empty value with "<none>".
func orNone(value string) string {
	if value == "" {
		return none
	}
	return value
}

// joinDistinct joins the non-empty values with "; ", leaving out repeats.
func joinDistinct(values ...string) string {
	var kept []string
	for _, value := range values {
		if value != "" && !slices.Contains(kept, value) {
			kept = append(kept, value)
		}
	}
	return strings.Join(kept, "; ")
}
