package record

import (
	"strings"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestRebalancer(t *testing.T) {
	finish := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 3, 0, time.UTC))
	tests := []struct {
		name       string
		rows       []rebalance.Row
		generation int64
		finish     *metav1.Time
		wantYAML   string
	}{
		{
			name: "finished rebalance",
			rows: []rebalance.Row{
				{Workload: deployB, Result: appsv1alpha1.RebalanceSuccessful},
				{Workload: roleX, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound},
				{Workload: deployA, Result: appsv1alpha1.RebalanceSuccessful},
			},
			generation: 1,
			finish:     &finish,
			wantYAML: `apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata:
  generation: 1
  name: demo
spec:
  workloads:
  - apiVersion: apps/v1
    kind: Deployment
    name: b
    namespace: ns
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRole
    name: x
  - apiVersion: apps/v1
    kind: Deployment
    name: a
    namespace: ns
status:
  finishTime: "2024-05-01T10:00:03Z"
  observedGeneration: 1
  observedWorkloads:
  - result: Successful
    workload:
      apiVersion: apps/v1
      kind: Deployment
      name: a
      namespace: ns
  - result: Successful
    workload:
      apiVersion: apps/v1
      kind: Deployment
      name: b
      namespace: ns
  - reason: ReferencedBindingNotFound
    result: Failed
    workload:
      apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRole
      name: x
`,
		},
		{
			name:       "pending and not finished",
			rows:       []rebalance.Row{{Workload: deployA}},
			generation: 2,
			wantYAML: `apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata:
  generation: 2
  name: demo
spec:
  workloads:
  - apiVersion: apps/v1
    kind: Deployment
    name: a
    namespace: ns
status:
  observedGeneration: 2
  observedWorkloads:
  - workload:
      apiVersion: apps/v1
      kind: Deployment
      name: a
      namespace: ns
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb := Rebalancer("demo", tt.rows, tt.generation, tt.finish)
			// creationTimestamp: null is what every typed object prints; drop it
			// to keep the golden text about what this package decides.
			out, err := yaml.Marshal(rb)
			assert.NoError(t, err)
			assert.Equal(t, tt.wantYAML, strings.Replace(string(out), "  creationTimestamp: null\n", "", 1))
			if tt.finish != nil {
				assert.NotSame(t, tt.finish, rb.Status.FinishTime, "the caller's time is copied")
			}
		})
	}
}
