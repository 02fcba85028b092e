package rebalance

import (
	"reflect"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A binding read for a run keeps the policy labels and shares its placement
// with every binding that has an equal one.
func TestBindingKeepsWhatARunReads(t *testing.T) {
	placement := func(names ...string) *policyv1alpha1.Placement {
		return &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: names}}
	}
	rb := func(name string, p *policyv1alpha1.Placement) *workv1alpha2.ResourceBinding {
		return &workv1alpha2.ResourceBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, Labels: map[string]string{
				policyv1alpha1.PropagationPolicyPermanentIDLabel: "p1",
				workv1alpha2.ResourceBindingPermanentIDLabel:     "r1",
				"team": "web",
			}},
			Spec: workv1alpha2.ResourceBindingSpec{Placement: p},
		}
	}
	one := BindingFromObject(rb("x-deployment", placement("member1", "member2")))
	two := BindingFromObject(rb("y-deployment", placement("member1", "member2")))
	other := BindingFromObject(rb("z-deployment", placement("member3")))

	assert.Equal(t, map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: "p1"}, one.Labels)
	assert.Equal(t, reflect.ValueOf(one.Labels).Pointer(), reflect.ValueOf(two.Labels).Pointer(), "equal policy labels are one map")
	assert.Same(t, one.Spec.Placement, two.Spec.Placement, "equal placements are one copy")
	assert.NotSame(t, one.Spec.Placement, other.Spec.Placement)
	assert.Equal(t, []string{"member3"}, other.Spec.Placement.ClusterAffinity.ClusterNames)

	crb := BindingFromObject(&workv1alpha2.ClusterResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "r-clusterrole", Labels: map[string]string{policyv1alpha1.ClusterPropagationPolicyPermanentIDLabel: "c1"}},
		Spec:       workv1alpha2.ResourceBindingSpec{Placement: placement("member1", "member2")},
	})
	assert.Equal(t, map[string]string{policyv1alpha1.ClusterPropagationPolicyPermanentIDLabel: "c1"}, crb.Labels)
	assert.NotEqual(t, reflect.ValueOf(one.Labels).Pointer(), reflect.ValueOf(crb.Labels).Pointer())
	assert.Same(t, one.Spec.Placement, crb.Spec.Placement)
	assert.Nil(t, PolicyLabels(map[string]string{"team": "web"}))
	assert.Nil(t, SharedPlacement(nil))
}
