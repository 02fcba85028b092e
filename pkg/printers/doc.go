// Package printers renders rebalance results for people: a kubectl-style
// table of rows and a one-line summary. It only formats what package
// rebalance computed and never talks to an API server.
package printers
