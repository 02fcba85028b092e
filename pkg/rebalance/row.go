package rebalance

import (
	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Row is the result for one workload of a rebalance: what the
// WorkloadRebalancer controller would have recorded, and what the scheduler
// actually did.
type Row struct {
	// Workload is the resource template that was rebalanced.
	Workload Workload
	// Binding is the binding's name; its namespace is the workload's.
	Binding string
	// Result is the CRD result; empty while pending.
	Result appsv1alpha1.RebalanceResult
	// Reason is the CRD reason for a Failed result.
	Reason appsv1alpha1.RebalanceFailedReason
	// TriggeredAt is the trigger time written to (or already held by) the
	// binding; nil when nothing was triggered.
	TriggeredAt *metav1.Time
	// Observation is the scheduler's reaction to the trigger.
	Observation Observation
	// Before is the binding's spec.clusters before the trigger.
	Before []workv1alpha2.TargetCluster
	// After is the binding's spec.clusters when the outcome was observed.
	After []workv1alpha2.TargetCluster
	// Message holds extra detail, such as an error or a verification mismatch.
	Message string
	// Unchangeable, when set, is why a fresh reschedule cannot change the
	// binding's placement (see UnchangeableReason).
	Unchangeable string
	// Readiness, when set, is what the binding's aggregatedStatus last said
	// of the replicas of the new placement (CheckReady); nil when nobody
	// waited for them.
	Readiness *Readiness
	// ClientReason is a reason of the plugin's own, for a Failed result
	// Karmada's controller would never record: ReasonBindingMismatch or
	// ReasonTriggerRejected. A recorded status leaves such a workload pending.
	ClientReason string
	// Staged, set by a make-before-break move that released the binding
	// (package handover), is the placement it staged first: the replicas
	// the move gained ran before any other was removed.
	Staged []workv1alpha2.TargetCluster
	// OneWrite, set by a make-before-break mover that triggered the
	// workload in one write instead, says why.
	OneWrite string
}

// Reasons of the plugin's own for a Failed result without a CRD reason.
const (
	// ReasonBindingMismatch: the binding that carries the workload's binding
	// name belongs to another workload or to an older template (uid).
	ReasonBindingMismatch = "BindingMismatch"
	// ReasonTriggerRejected: the API server rejected the trigger write as invalid.
	ReasonTriggerRejected = "TriggerRejected"
)

// SortRows sorts rows in place into the order of a WorkloadRebalancer's
// status.observedWorkloads (see SortKey).
func SortRows(rows []Row) {
	sortByKey(rows, func(r Row) Workload { return r.Workload })
}

// CountRows counts rows the way the command's exit code sees them: failed
// (Failed result, failed or ignored scheduling) and pending (no result yet,
// or a scheduler answer still awaited).
func CountRows(rows []Row) (failed, pending int) {
	for _, row := range rows {
		switch {
		case failedRow(row):
			failed++
		case row.Result == "", row.Observation.Outcome == OutcomeWaiting:
			pending++
		}
	}
	return failed, pending
}

// failedRow reports a row that failed or will not be rebalanced: a Failed
// result, a scheduling failure, an ignored trigger, or a progress deadline
// a waved run gave up at.
func failedRow(row Row) bool {
	switch {
	case row.Result == appsv1alpha1.RebalanceFailed,
		row.Observation.Outcome == OutcomeSchedulingFailed,
		row.Observation.Outcome == OutcomeIgnored,
		row.Observation.Outcome == OutcomeDeadlineExceeded:
		return true
	}
	return false
}

// DistinctWorkloads returns the distinct workloads of targets in input order.
func DistinctWorkloads(targets []Target) []Workload {
	seen := make(map[Workload]bool, len(targets))
	out := make([]Workload, 0, len(targets))
	for _, t := range targets {
		if !seen[t.Workload] {
			seen[t.Workload] = true
			out = append(out, t.Workload)
		}
	}
	return out
}
