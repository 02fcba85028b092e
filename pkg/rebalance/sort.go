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
	sortByKey(observed, func(o appsv1alpha1.ObservedWorkload) Workload { return o.Workload })
}

// sortByKey stably sorts items by the SortKey of their workload, building
// each key once instead of twice per comparison.
func sortByKey[T any](items []T, workloadOf func(T) Workload) {
	type keyed struct {
		key  string
		item T
	}
	decorated := make([]keyed, len(items))
	for i, item := range items {
		decorated[i] = keyed{key: SortKey(workloadOf(item)), item: item}
	}
	slices.SortStableFunc(decorated, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	for i := range decorated {
		items[i] = decorated[i].item
	}
}
