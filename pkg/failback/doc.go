// Package failback brings workloads back to a member cluster that has
// recovered, without a person: it owns the decision of when a recovery is
// real and when to act on it, and the bookkeeping that makes every recovery
// act once.
//
// The pieces:
//   - Observe reads a Cluster object into a Health (Ready and free of the
//     NoSchedule and NoExecute taints the workloads to fail back do not
//     tolerate, or why not);
//   - Displacements remembers, from the ResourceBindings, the workloads
//     each cluster's failure displaced (graceful eviction tasks naming it,
//     replicas lost while it was down): a failback moves only those, unless
//     told to move every workload that would gain;
//   - Step is the pure recovery state machine: from a cluster's State and a
//     new Health at a time, the next State and what happened (a recovery
//     seen, a window reset by a flap, the window over so that a failback
//     fires, a failback aborted because the cluster failed again);
//   - RecordName names the WorkloadRebalancer that records one recovery's
//     failback, the ledger that lets a restarted or newly elected daemon
//     resume it instead of starting it again;
//   - Controller feeds Step from a Cluster informer, runs failbacks through
//     a Runner while it leads, and reports them as metrics and events.
//
// What a failback does (select, among the workloads it is given, those a
// fresh reschedule would give replicas on the cluster, and rebalance them in waves) is the Runner's
// job; the command's Runner resolves and selects them as kubectl rebalance
// does and runs them with the same engine, package run.
package failback
