// Package printers renders results for people and scripts: the
// kubectl-style table of a rebalance's rows and its one-line summary, the
// plan's table, cluster lines and counts, and the report documents
// (-o report-json, report-yaml) of both. It only formats what packages
// rebalance, run and predict computed, for the commands' streams and the
// failback daemon's log alike, and never talks to an API server.
package printers
