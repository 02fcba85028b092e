// Package record keeps a rebalance as a real WorkloadRebalancer, the record
// of a run: it creates or updates the object, derives its status with the
// WorkloadRebalancer controller's rules (spec to status sync, results,
// finishTime), writes that status conditionally so that several writers end
// in one status, and deletes the object when its TTL runs out. The status is
// the ledger of a recorded run: an entry is Successful only once its trigger
// is written, so a later run continues with the entries still pending. A
// waved run's record grows instead: each workload is appended to the spec
// only once its trigger is written, so that Karmada's workloadRebalancer
// controller never triggers one out of turn (grow.go). Every write is a
// patch of the fields the record owns.
//
// Triggering the bindings and reading the scheduler's answer is the job of
// package rebalance, which this package drives and never the other way round.
package record
