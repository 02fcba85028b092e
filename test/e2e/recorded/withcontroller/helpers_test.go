package withcontroller

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// lineOf returns the table line holding cell.
func lineOf(t *testing.T, table, cell string) string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		for _, c := range splitCells(line) {
			if c == cell {
				return line
			}
		}
	}
	require.Failf(t, "no such line", "no line with %q in:\n%s", cell, table)
	return ""
}

var cellSeparator = regexp.MustCompile(`\s{3,}`)

func splitCells(line string) []string {
	line = strings.TrimSpace(line)
	if line == "" {
		return nil
	}
	return cellSeparator.Split(line, -1)
}
