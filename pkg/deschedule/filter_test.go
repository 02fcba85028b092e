package deschedule

import (
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestIsCandidate(t *testing.T) {
	weighted := func(dynamic policyv1alpha1.DynamicWeightFactor) string {
		return placementJSON(policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: dynamic},
		}})
	}
	tests := []struct {
		name       string
		mutate     func(rb *workv1alpha2.ResourceBinding)
		want       bool
		wantReason string
	}{
		{name: "divided aggregated deployment", mutate: func(*workv1alpha2.ResourceBinding) {}, want: true},
		{
			name: "divided weighted with dynamic weight",
			mutate: func(rb *workv1alpha2.ResourceBinding) {
				rb.Annotations[AppliedPlacementAnnotation] = weighted(policyv1alpha1.DynamicWeightByAvailableReplicas)
			},
			want: true,
		},
		{
			name:       "divided weighted with static weights only",
			mutate:     func(rb *workv1alpha2.ResourceBinding) { rb.Annotations[AppliedPlacementAnnotation] = weighted("") },
			wantReason: "static weights",
		},
		{
			name: "duplicated",
			mutate: func(rb *workv1alpha2.ResourceBinding) {
				rb.Annotations[AppliedPlacementAnnotation] = placementJSON(policyv1alpha1.Placement{
					ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated},
				})
			},
			wantReason: "replica scheduling is Duplicated",
		},
		{
			name:       "no replica scheduling means duplicated",
			mutate:     func(rb *workv1alpha2.ResourceBinding) { rb.Annotations[AppliedPlacementAnnotation] = `{}` },
			wantReason: "replica scheduling is Duplicated",
		},
		{
			name: "divided without preference",
			mutate: func(rb *workv1alpha2.ResourceBinding) {
				rb.Annotations[AppliedPlacementAnnotation] = placementJSON(policyv1alpha1.Placement{
					ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided},
				})
			},
			wantReason: "neither Aggregated nor Weighted",
		},
		{
			name: "spec.placement is ignored, only the annotation counts",
			mutate: func(rb *workv1alpha2.ResourceBinding) {
				rb.Spec.Placement = aggregatedPlacement.DeepCopy()
				delete(rb.Annotations, AppliedPlacementAnnotation)
			},
			wantReason: "no policy.karmada.io/applied-placement annotation",
		},
		{
			name:       "annotation is not JSON",
			mutate:     func(rb *workv1alpha2.ResourceBinding) { rb.Annotations[AppliedPlacementAnnotation] = "{not json" },
			wantReason: "is not a valid placement",
		},
		{
			name:   "statefulset",
			mutate: func(rb *workv1alpha2.ResourceBinding) { rb.Spec.Resource.Kind = "StatefulSet" },
			want:   true,
		},
		{
			name: "custom resource",
			mutate: func(rb *workv1alpha2.ResourceBinding) {
				rb.Spec.Resource.APIVersion, rb.Spec.Resource.Kind = "flink.apache.org/v1beta1", "FlinkDeployment"
			},
			want: true,
		},
		{
			name:       "no resource template",
			mutate:     func(rb *workv1alpha2.ResourceBinding) { rb.Spec.Resource = workv1alpha2.ObjectReference{} },
			wantReason: "names no resource template",
		},
		{
			name: "being deleted",
			mutate: func(rb *workv1alpha2.ResourceBinding) {
				now := metav1.NewTime(testNow)
				rb.DeletionTimestamp = &now
			},
			wantReason: "being deleted",
		},
		{
			name:       "not scheduled yet",
			mutate:     func(rb *workv1alpha2.ResourceBinding) { rb.Spec.Clusters = nil },
			wantReason: "not scheduled yet",
		},
		{
			name: "scheduling suspended",
			mutate: func(rb *workv1alpha2.ResourceBinding) {
				rb.Spec.Suspension = &workv1alpha2.Suspension{Scheduling: ptr.To(true)}
			},
			wantReason: "scheduling is suspended",
		},
		{
			name: "scheduling explicitly not suspended",
			mutate: func(rb *workv1alpha2.ResourceBinding) {
				rb.Spec.Suspension = &workv1alpha2.Suspension{Scheduling: ptr.To(false)}
			},
			want: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb := newBinding("default", "web", cluster{"member1", 2, 1})
			tt.mutate(rb)
			got, reason := IsCandidate(rb)
			assert.Equal(t, tt.want, got)
			if tt.want {
				assert.Empty(t, reason)
			} else {
				assert.Contains(t, reason, tt.wantReason)
			}
		})
	}
}

func TestIsCandidateNil(t *testing.T) {
	ok, reason := IsCandidate(nil)
	assert.False(t, ok)
	assert.NotEmpty(t, reason)
}
