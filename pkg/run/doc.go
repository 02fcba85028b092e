// Package run owns one rebalance run, from resolved targets to the rows of
// the result: triggering them all at once or in waves, recording the run as
// a WorkloadRebalancer (reconciled by the client or, server-side, by
// Karmada's controller) and following its TTL.
//
// It is the engine the front ends share: kubectl rebalance turns its flags
// into a Request and prints the Result, and the failback daemon builds a
// Request for each recovery and logs what it hears. Neither runs the other's
// command. What happens during a run reaches the caller through the
// Request's Hooks (progress, notices for a person, the rows once known);
// the Result says how it ended and why it stopped.
//
// Resolving arguments into targets and predicting placements stay with the
// caller (cli-runtime's builder, package predict); writing a trigger and
// reading the scheduler's answer is package rebalance's job, pacing waves
// package waves', moving a workload make-before-break package handover's
// (the caller builds that move and gives it to the Request, typed as
// waves.MakeBeforeBreak), and the WorkloadRebalancer's status rules package
// record's.
package run
