package rebalance

import (
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
)

// Reasons a fresh reschedule cannot change a placement although the
// scheduler honours the trigger: the division does not follow the clusters'
// free capacity, so the trigger only forces one ordinary scheduling pass.
const (
	// ReasonDuplicated: every selected cluster gets all replicas.
	ReasonDuplicated = "Duplicated"
	// ReasonStaticWeight: replicas are divided by fixed cluster weights.
	ReasonStaticWeight = "StaticWeight"
	// ReasonNonWorkload: the template has no replicas (a ConfigMap, a
	// Service...), so it is propagated whole, like Duplicated.
	ReasonNonWorkload = "NonWorkload"
)

// UnchangeableReason returns why a fresh reschedule cannot change the
// placement of a binding with this spec (ReasonDuplicated, ReasonStaticWeight,
// ReasonNonWorkload), or "" when it can: Divided with Aggregated, or Weighted
// with a dynamic weight. Karmada's assignment only starts afresh for those.
func UnchangeableReason(spec *workv1alpha2.ResourceBindingSpec) string {
	if spec == nil || spec.Placement == nil {
		return ""
	}
	if !spec.IsWorkload() {
		return ReasonNonWorkload
	}
	placement := spec.Placement
	if placement.ReplicaSchedulingType() == policyv1alpha1.ReplicaSchedulingTypeDuplicated {
		return ReasonDuplicated
	}
	rs := placement.ReplicaScheduling
	switch {
	case rs.ReplicaDivisionPreference == policyv1alpha1.ReplicaDivisionPreferenceAggregated:
		return ""
	case rs.WeightPreference != nil && rs.WeightPreference.DynamicWeight != "":
		return ""
	}
	return ReasonStaticWeight
}
