// Package watch tells where a recorded run stands, workload by workload,
// from what the control plane holds: the WorkloadRebalancer (its spec,
// status and annotations) and the bindings of its workloads, whose
// make-before-break ledger (package handover) records the phase each move
// is in. It is what `kubectl rebalance get NAME -w` shows, so the view
// reads the same phases the moves act on, for a run started by anyone.
//
// Classify and Summarize are pure: the same objects always give the same
// rows. Follower feeds them from informers (watches, never polling) and
// reports the rows that changed.
package watch
