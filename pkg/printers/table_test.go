package printers

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTable: the namespace column and each row's namespace cell come
// together or not at all, and the wide-only columns show only when wide.
func TestTable(t *testing.T) {
	columns := []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string"},
		{Name: "Detail", Type: "string", Priority: 1},
	}
	tests := []struct {
		name          string
		withNamespace bool
		wide          bool
		want          string
	}{
		{name: "plain", want: "NAME\na\n"},
		{name: "wide", wide: true, want: "NAME   DETAIL\na      x\n"},
		{name: "with namespace", withNamespace: true, want: "NAMESPACE   NAME\nshop        a\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := NewTable(columns, WorkloadNamespaceColumn, tt.withNamespace)
			table.AddRow("shop", "a", "x")
			assert.Equal(t, 1, table.Len())
			var out bytes.Buffer
			require.NoError(t, table.Print(&out, tt.wide, false))
			assert.Equal(t, tt.want, out.String())
		})
	}
}

func TestSpansNamespaces(t *testing.T) {
	ns := func(s string) string { return s }
	assert.False(t, SpansNamespaces([]string{}, ns))
	assert.False(t, SpansNamespaces([]string{"a", "a"}, ns))
	assert.True(t, SpansNamespaces([]string{"a", ""}, ns), "cluster-scoped counts as a namespace of its own")
}
