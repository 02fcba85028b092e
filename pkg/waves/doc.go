// Package waves rebalances a batch of workloads progressively: at most
// MaxInFlight workloads are between "trigger written" and "done" at a time,
// and the next one starts as an earlier one finishes. It owns the pacing of
// a run and nothing else: which workload starts when (order, window, pause
// between waves), when a workload counts as done (scheduled and, by default,
// its replicas ready as the binding's aggregatedStatus reports them) or as
// failed (a failure, or no progress within the progress deadline; readiness
// is the row's Readiness, read by rebalance.CheckReady), and when
// the run stops starting new workloads (the failure budget, the context
// ending). Writing each trigger and reading the scheduler's answer is
// package rebalance's job; recording the run is package record's. A
// workload moved make-before-break is package handover's job, called
// through MakeBeforeBreak (Engine.Handover), the one interface that
// declares what runs and waves ask of such a move.
package waves
