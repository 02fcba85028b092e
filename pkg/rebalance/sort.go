package rebalance

import (
	"slices"
	"strings"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
)

// SortKey returns the string by which the WorkloadRebalancer controller
// orders status.observedWorkloads: apiVersion, kind, namespace and name joined
// by single spaces (so cluster-scoped entries hold two spaces in a row),
// compared byte by byte.
func SortKey(w Workload) string {
	return w.APIVersion + " " + w.Kind + " " + w.Namespace + " " + w.Name
}

// CompareWorkloads orders two workloads by SortKey; it returns a negative
// number, zero or a positive number like strings.Compare.
func CompareWorkloads(a, b Workload) int {
	return strings.Compare(SortKey(a), SortKey(b))
}

// SortObservedWorkloads sorts observed workloads in place into the order the
// controller writes them. Entries with equal keys keep their relative order.
func SortObservedWorkloads(observed []appsv1alpha1.ObservedWorkload) {
	slices.SortStableFunc(observed, func(a, b appsv1alpha1.ObservedWorkload) int {
		return CompareWorkloads(a.Workload, b.Workload)
	})
}
