// Package printers renders results for people and scripts: the
// kubectl-style table of a rebalance's rows and its one-line summary, the
// plan's table, cluster lines and counts, and the report documents
// (-o report-json, report-yaml) of both; and the table builder every
// command's kubectl-style table is made with (Table). It only formats what
// other packages computed, for the commands' streams and the daemons' logs
// alike, and never talks to an API server.
package printers
