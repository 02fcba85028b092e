package deschedule

import (
	"encoding/json"
	"fmt"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AppliedPlacementAnnotation holds, on a binding, the JSON placement the
// scheduler last used. Karmada defines it as util.PolicyPlacementAnnotation;
// that package drags controller-runtime in, so the key is repeated here and a
// test pins its value.
const AppliedPlacementAnnotation = "policy.karmada.io/applied-placement"

// supportedWorkload is the only resource kind the original descheduler knows
// how to count unschedulable replicas for.
var supportedWorkload = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

// IsCandidate reports whether the descheduler may act on rb. When it may not,
// the second value says why, in words fit for a verbose listing.
//
// A candidate is a live ResourceBinding for an apps/v1 Deployment whose
// applied placement (the annotation, not spec.placement) divides replicas
// dynamically: Divided with Aggregated, or Divided with Weighted and a
// dynamicWeight. Bindings without a scheduling result yet are skipped too,
// since there is nothing to lower, and so are bindings whose scheduling is
// suspended: the scheduler would not place the evicted replicas anywhere else.
// The last rule is this tool's own; karmada-descheduler has no such check.
func IsCandidate(rb *workv1alpha2.ResourceBinding) (bool, string) {
	if rb == nil {
		return false, "no binding"
	}
	if !rb.DeletionTimestamp.IsZero() {
		return false, "binding is being deleted"
	}
	ref := rb.Spec.Resource
	if schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind) != supportedWorkload {
		return false, fmt.Sprintf("resource is %s %s, only apps/v1 Deployment is descheduled", ref.APIVersion, ref.Kind)
	}
	placement, err := AppliedPlacement(rb)
	if err != nil {
		return false, err.Error()
	}
	if placement == nil {
		return false, "no " + AppliedPlacementAnnotation + " annotation (not scheduled by a policy yet)"
	}
	if ok, why := isDynamicDivided(placement); !ok {
		return false, why
	}
	if len(rb.Spec.Clusters) == 0 {
		return false, "not scheduled yet (spec.clusters is empty)"
	}
	if rb.Spec.SchedulingSuspended() {
		return false, "scheduling is suspended (spec.suspension.scheduling), the scheduler would not place evicted replicas elsewhere"
	}
	return true, ""
}

// AppliedPlacement decodes the placement the scheduler last applied to rb. It
// returns nil, nil when the annotation is absent or empty.
func AppliedPlacement(rb *workv1alpha2.ResourceBinding) (*policyv1alpha1.Placement, error) {
	raw := rb.GetAnnotations()[AppliedPlacementAnnotation]
	if raw == "" {
		return nil, nil
	}
	placement := &policyv1alpha1.Placement{}
	if err := json.Unmarshal([]byte(raw), placement); err != nil {
		return nil, fmt.Errorf("annotation %s of binding %s/%s is not a valid placement, the scheduler rewrites it on its next pass: %w",
			AppliedPlacementAnnotation, rb.Namespace, rb.Name, err)
	}
	return placement, nil
}

// isDynamicDivided mirrors Karmada's notion of a placement whose per-cluster
// split depends on cluster state, the only kind a descheduler can improve.
func isDynamicDivided(p *policyv1alpha1.Placement) (bool, string) {
	if p.ReplicaSchedulingType() != policyv1alpha1.ReplicaSchedulingTypeDivided {
		return false, fmt.Sprintf("replica scheduling is %s, only Divided is descheduled", p.ReplicaSchedulingType())
	}
	strategy := p.ReplicaScheduling
	switch strategy.ReplicaDivisionPreference {
	case policyv1alpha1.ReplicaDivisionPreferenceAggregated:
		return true, ""
	case policyv1alpha1.ReplicaDivisionPreferenceWeighted:
		if strategy.WeightPreference == nil || len(strategy.WeightPreference.DynamicWeight) == 0 {
			return false, "replicas are divided by static weights, only dynamic weights are descheduled"
		}
		return true, ""
	default:
		return false, fmt.Sprintf("replica division preference %q is neither Aggregated nor Weighted", strategy.ReplicaDivisionPreference)
	}
}
