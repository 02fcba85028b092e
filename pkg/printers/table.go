package printers

import (
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
)

// WorkloadNamespaceColumn is the first column of a table of workloads whose
// rows span namespaces (or whose selection did, -A).
var WorkloadNamespaceColumn = metav1.TableColumnDefinition{Name: "Namespace", Type: "string", Description: "The workload's namespace; empty when cluster-scoped."}

// Table is a kubectl-style table being filled, every command's tables
// built the same way: the columns, with a namespace column in front only
// when the rows need one, and printed as kubectl get prints.
type Table struct {
	table         metav1.Table
	withNamespace bool
}

// NewTable starts a table of columns (Priority 1 marks the wide-only ones),
// with namespace as its first column when withNamespace.
func NewTable(columns []metav1.TableColumnDefinition, namespace metav1.TableColumnDefinition, withNamespace bool) *Table {
	t := &Table{withNamespace: withNamespace}
	t.table.ColumnDefinitions = columns
	if withNamespace {
		t.table.ColumnDefinitions = append([]metav1.TableColumnDefinition{namespace}, columns...)
	}
	return t
}

// AddRow adds a row of cells, one per column; namespace is its first cell
// when the table has the namespace column, and is dropped otherwise.
func (t *Table) AddRow(namespace string, cells ...any) {
	if t.withNamespace {
		cells = append([]any{namespace}, cells...)
	}
	t.table.Rows = append(t.table.Rows, metav1.TableRow{Cells: cells})
}

// Len is the number of rows.
func (t *Table) Len() int { return len(t.table.Rows) }

// Print writes the table, with the wide-only columns when wide.
func (t *Table) Print(w io.Writer, wide, noHeaders bool) error {
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide, NoHeaders: noHeaders}).PrintObj(&t.table, w)
}

// SpansNamespaces reports whether items come from more than one namespace,
// counting cluster-scoped ones ("") as a namespace of their own.
func SpansNamespaces[T any](items []T, namespace func(T) string) bool {
	for _, item := range items {
		if namespace(item) != namespace(items[0]) {
			return true
		}
	}
	return false
}
