package failback

import (
	"fmt"
	"testing"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

func TestPlannedRoundTrip(t *testing.T) {
	ws := []rebalance.Workload{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
		{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "shop", Name: "db"},
	}
	annotations, err := PlannedAnnotations(ws)
	require.NoError(t, err)
	got, ok := Planned(&appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}})
	require.True(t, ok)
	assert.Equal(t, ws, got)
}

func TestPlannedAbsentOrUnreadable(t *testing.T) {
	for name, annotations := range map[string]map[string]string{
		"none":       nil,
		"not json":   {PlannedAnnotation: "web"},
		"empty list": {PlannedAnnotation: "[]"},
	} {
		_, ok := Planned(&appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}})
		assert.False(t, ok, name)
	}
}

// A failback too large for one annotation is recorded without the list.
func TestPlannedTooLarge(t *testing.T) {
	var ws []rebalance.Workload
	for i := range 5000 {
		ws = append(ws, rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "a-rather-long-namespace-name", Name: fmt.Sprintf("workload-%05d", i)})
	}
	annotations, err := PlannedAnnotations(ws)
	assert.Nil(t, annotations)
	assert.ErrorContains(t, err, "5000 workloads take")
}
