// Package predict owns one job: telling, before anything is written, where a
// fresh reschedule would put each workload's replicas. It feeds Karmada's own
// scheduler code, imported from the pinned Karmada module (the generic
// scheduler of pkg/scheduler/core, the in-tree framework plugins and the
// general estimator of pkg/estimator/client), with the live Cluster objects
// and each binding's placement and replica requirements, and classifies every
// result as a Verdict.
//
// It is shaped like karmada's pkg/scheduler/core: small pure functions
// (Predict, Classify, Summarize) over values, fed by a thin layer (Source)
// that reads the API with one LIST of clusters and one LIST of bindings per
// namespace (or one across all namespaces); ReadAhead runs those reads while
// the caller still resolves its workloads. Nothing here writes to the API.
//
// Its callers: plan prints the predictions; kubectl rebalance and the
// failback daemon select their targets with Select (-C/--clusters,
// --changed-only) before they hand them to package run.
package predict
