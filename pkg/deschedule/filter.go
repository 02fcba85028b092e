package deschedule

import (
	"encoding/json"
	"fmt"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
)

// AppliedPlacementAnnotation holds, on a binding, the JSON placement the
// scheduler last used. Karmada defines it as util.PolicyPlacementAnnotation;
// that package drags controller-runtime in, so the key is repeated here and a
// test pins its value.
const AppliedPlacementAnnotation = "policy.karmada.io/applied-placement"

// SkipCode classifies why a listed binding is not descheduled; it is the
// reason label of the skipped-bindings metric and the code of a skipped
// entry in a pass report.
type SkipCode string

// Why a binding is skipped.
const (
	SkipDeleting          SkipCode = "deleting"
	SkipNoPlacement       SkipCode = "no-placement"
	SkipInvalidPlacement  SkipCode = "invalid-placement"
	SkipNotDivided        SkipCode = "not-divided"
	SkipStaticWeight      SkipCode = "static-weight"
	SkipNotScheduled      SkipCode = "not-scheduled"
	SkipSuspended         SkipCode = "suspended"
	SkipOptedOut          SkipCode = "opted-out"
	SkipTemplateNotFound  SkipCode = "template-not-found"
	SkipTemplateUnlisted  SkipCode = "template-unreadable"
	SkipUnsupportedTarget SkipCode = "unsupported"
)

// SkipCodes lists every SkipCode, for metrics to start at zero.
var SkipCodes = []SkipCode{SkipDeleting, SkipNoPlacement, SkipInvalidPlacement, SkipNotDivided, SkipStaticWeight,
	SkipNotScheduled, SkipSuspended, SkipOptedOut, SkipTemplateNotFound, SkipTemplateUnlisted, SkipUnsupportedTarget}

// IsCandidate reports whether the descheduler may act on rb. When it may not,
// the second value says why, in words fit for a verbose listing.
//
// A candidate is a live ResourceBinding, of any workload kind, whose applied
// placement (the annotation, not spec.placement) divides replicas
// dynamically: Divided with Aggregated, or Divided with Weighted and a
// dynamicWeight. That is karmada-descheduler's filter, without its limit to
// Deployments. Bindings without a scheduling result yet are skipped too,
// since there is nothing to lower, and so are bindings whose scheduling is
// suspended: the scheduler would not place the evicted replicas anywhere else.
// The last rule is this tool's own; karmada-descheduler has no such check.
// The template's opt-out annotation is checked by the pass, which lists the
// templates.
func IsCandidate(rb *workv1alpha2.ResourceBinding) (bool, string) {
	code, why := CandidateCheck(rb)
	return code == "", why
}

// CandidateCheck is IsCandidate with the reason classified: it returns an
// empty code for a candidate.
func CandidateCheck(rb *workv1alpha2.ResourceBinding) (SkipCode, string) {
	if rb == nil {
		return SkipUnsupportedTarget, "no binding"
	}
	if !rb.DeletionTimestamp.IsZero() {
		return SkipDeleting, "binding is being deleted"
	}
	if rb.Spec.Resource.Kind == "" || rb.Spec.Resource.Name == "" {
		return SkipUnsupportedTarget, "binding names no resource template (spec.resource)"
	}
	placement, err := AppliedPlacement(rb)
	if err != nil {
		return SkipInvalidPlacement, err.Error()
	}
	if placement == nil {
		return SkipNoPlacement, "no " + AppliedPlacementAnnotation + " annotation (not scheduled by a policy yet)"
	}
	if code, why := isDynamicDivided(placement); code != "" {
		return code, why
	}
	if len(rb.Spec.Clusters) == 0 {
		return SkipNotScheduled, "not scheduled yet (spec.clusters is empty)"
	}
	if rb.Spec.SchedulingSuspended() {
		return SkipSuspended, "scheduling is suspended (spec.suspension.scheduling), the scheduler would not place evicted replicas elsewhere"
	}
	return "", ""
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
func isDynamicDivided(p *policyv1alpha1.Placement) (SkipCode, string) {
	if p.ReplicaSchedulingType() != policyv1alpha1.ReplicaSchedulingTypeDivided {
		return SkipNotDivided, fmt.Sprintf("replica scheduling is %s, only Divided is descheduled", p.ReplicaSchedulingType())
	}
	strategy := p.ReplicaScheduling
	switch strategy.ReplicaDivisionPreference {
	case policyv1alpha1.ReplicaDivisionPreferenceAggregated:
		return "", ""
	case policyv1alpha1.ReplicaDivisionPreferenceWeighted:
		if strategy.WeightPreference == nil || len(strategy.WeightPreference.DynamicWeight) == 0 {
			return SkipStaticWeight, "replicas are divided by static weights, only dynamic weights are descheduled"
		}
		return "", ""
	default:
		return SkipNotDivided, fmt.Sprintf("replica division preference %q is neither Aggregated nor Weighted", strategy.ReplicaDivisionPreference)
	}
}
