package record

import (
	"reflect"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncStatus returns the status the WorkloadRebalancer controller derives from
// the previous status and the current spec, before it triggers anything:
//
//   - an observed workload still listed in spec keeps its entry unchanged;
//   - one no longer listed survives only when its result is Successful;
//   - a listed workload not yet observed gets a new entry with no result;
//   - entries are compared on all four fields, so an edited entry counts as a
//     removal plus an addition and repeated spec entries collapse into one;
//   - observedWorkloads is sorted by SortKey and observedGeneration is set to
//     generation.
//
// FinishTime is left unset; SetFinishTime decides it once results are known.
// ObservedWorkloads is never nil, matching what the controller compares.
func SyncStatus(old appsv1alpha1.WorkloadRebalancerStatus, spec appsv1alpha1.WorkloadRebalancerSpec, generation int64) appsv1alpha1.WorkloadRebalancerStatus {
	unobserved := make(map[rebalance.Workload]bool, len(spec.Workloads))
	for _, w := range spec.Workloads {
		unobserved[w] = true
	}

	observed := make([]appsv1alpha1.ObservedWorkload, 0, len(old.ObservedWorkloads)+len(spec.Workloads))
	for _, entry := range old.ObservedWorkloads {
		switch {
		case unobserved[entry.Workload]:
			observed = append(observed, entry)
			// Only the first matching entry counts as the observation of a spec
			// entry; a repeated one is treated like a removed workload.
			delete(unobserved, entry.Workload)
		case entry.Result == appsv1alpha1.RebalanceSuccessful:
			observed = append(observed, entry)
		}
	}
	// Walking the spec rather than the map keeps the output deterministic
	// before sorting, which matters only for entries with equal sort keys.
	for _, w := range spec.Workloads {
		if unobserved[w] {
			observed = append(observed, appsv1alpha1.ObservedWorkload{Workload: w})
			delete(unobserved, w)
		}
	}
	rebalance.SortObservedWorkloads(observed)

	return appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: observed, ObservedGeneration: generation}
}

// SetResult records the outcome of triggering w on every status entry for w
// and reports whether there was one. A Successful result should come with an
// empty reason; Failed with RebalanceObjectNotFound is the only failure the
// controller records (any other error leaves the entry pending).
func SetResult(status *appsv1alpha1.WorkloadRebalancerStatus, w rebalance.Workload, result appsv1alpha1.RebalanceResult, reason appsv1alpha1.RebalanceFailedReason) bool {
	if !Recordable(result, reason) {
		// Anything else the controller leaves pending and retries.
		result, reason = "", ""
	}
	found := false
	for i := range status.ObservedWorkloads {
		if status.ObservedWorkloads[i].Workload == w {
			status.ObservedWorkloads[i].Result = result
			status.ObservedWorkloads[i].Reason = reason
			found = true
		}
	}
	return found
}

// Recordable reports whether Karmada's controller could write result and
// reason into a status: Successful, or Failed with ReferencedBindingNotFound.
// The empty (pending) result is recordable too.
func Recordable(result appsv1alpha1.RebalanceResult, reason appsv1alpha1.RebalanceFailedReason) bool {
	switch result {
	case "":
		return reason == ""
	case appsv1alpha1.RebalanceSuccessful:
		return reason == ""
	case appsv1alpha1.RebalanceFailed:
		return reason == appsv1alpha1.RebalanceObjectNotFound
	}
	return false
}

// IsPending reports whether the controller would still try to trigger an
// entry: anything but Successful or Failed, including unknown values.
func IsPending(entry appsv1alpha1.ObservedWorkload) bool {
	return entry.Result != appsv1alpha1.RebalanceSuccessful && entry.Result != appsv1alpha1.RebalanceFailed
}

// HasPending reports whether any observed workload is still pending.
func HasPending(status appsv1alpha1.WorkloadRebalancerStatus) bool {
	for _, entry := range status.ObservedWorkloads {
		if IsPending(entry) {
			return true
		}
	}
	return false
}

// PendingWorkloads lists the pending workloads in status order.
func PendingWorkloads(status appsv1alpha1.WorkloadRebalancerStatus) []rebalance.Workload {
	var pending []rebalance.Workload
	for _, entry := range status.ObservedWorkloads {
		if IsPending(entry) {
			pending = append(pending, entry.Workload)
		}
	}
	return pending
}

// SetFinishTime applies the controller's finishTime rule to updated, the
// status computed from old by SyncStatus and SetResult, and reports whether
// updated differs from old (the controller writes the status only then).
//
// updated first inherits old's finishTime. If anything else differs, and no
// entry is pending, finishTime becomes now; with entries still pending the
// inherited value stays. When nothing differs, nothing changes. Because every
// spec edit changes observedGeneration, each edit that finishes refreshes
// finishTime and so restarts the TTL.
//
// The comparison is reflect.DeepEqual, as in the controller: a nil and an
// empty observedWorkloads differ.
func SetFinishTime(old, updated *appsv1alpha1.WorkloadRebalancerStatus, now metav1.Time) bool {
	updated.FinishTime = old.FinishTime
	if reflect.DeepEqual(*old, *updated) {
		return false
	}
	if !HasPending(*updated) {
		finished := now
		updated.FinishTime = &finished
	}
	return true
}

// ExpiresAt returns when a finished WorkloadRebalancer becomes due for
// deletion: finishTime plus ttlSecondsAfterFinished. It reports false when the
// TTL is unset (never deleted) or the rebalancer has no finishTime yet.
// A zero TTL expires at the finish time itself.
func ExpiresAt(rb *appsv1alpha1.WorkloadRebalancer) (time.Time, bool) {
	if rb == nil || rb.Spec.TTLSecondsAfterFinished == nil || rb.Status.FinishTime == nil {
		return time.Time{}, false
	}
	ttl := time.Duration(*rb.Spec.TTLSecondsAfterFinished) * time.Second
	return rb.Status.FinishTime.Add(ttl), true
}

// Expired reports whether the controller would delete rb at now: its TTL is
// set, it has finished, and no time remains before ExpiresAt.
func Expired(rb *appsv1alpha1.WorkloadRebalancer, now time.Time) bool {
	expiresAt, ok := ExpiresAt(rb)
	return ok && !expiresAt.After(now)
}
