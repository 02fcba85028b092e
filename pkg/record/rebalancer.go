package record

import (
	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Rebalancer builds the WorkloadRebalancer the controller would hold after
// processing rows: spec.workloads in row order, status.observedWorkloads with
// the rows' results in controller order, observedGeneration (and
// metadata.generation) set to generation, and finishTime. The object has its
// TypeMeta set, so printing it as YAML gives a manifest that can be applied
// as is (the server ignores the status and server-owned fields on create).
func Rebalancer(name string, rows []rebalance.Row, generation int64, finish *metav1.Time) *appsv1alpha1.WorkloadRebalancer {
	spec := appsv1alpha1.WorkloadRebalancerSpec{Workloads: make([]rebalance.Workload, 0, len(rows))}
	for _, row := range rows {
		spec.Workloads = append(spec.Workloads, row.Workload)
	}

	status := SyncStatus(appsv1alpha1.WorkloadRebalancerStatus{}, spec, generation)
	for _, row := range rows {
		SetResult(&status, row.Workload, row.Result, row.Reason)
	}
	if finish != nil {
		finishTime := *finish
		status.FinishTime = &finishTime
	}

	return &appsv1alpha1.WorkloadRebalancer{
		TypeMeta: metav1.TypeMeta{
			APIVersion: appsv1alpha1.SchemeGroupVersion.String(),
			Kind:       appsv1alpha1.ResourceKindWorkloadRebalancer,
		},
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: generation},
		Spec:       spec,
		Status:     status,
	}
}
