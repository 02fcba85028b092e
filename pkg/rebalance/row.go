package rebalance

import (
	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Row is the result for one workload of a rebalance: what the
// WorkloadRebalancer controller would have recorded, and what the scheduler
// actually did.
type Row struct {
	// Workload is the resource template that was rebalanced.
	Workload Workload
	// Binding is the binding's name; its namespace is the workload's.
	Binding string
	// Result is the CRD result; empty while pending.
	Result appsv1alpha1.RebalanceResult
	// Reason is the CRD reason for a Failed result.
	Reason appsv1alpha1.RebalanceFailedReason
	// TriggeredAt is the trigger time written to (or already held by) the
	// binding; nil when nothing was triggered.
	TriggeredAt *metav1.Time
	// Observation is the scheduler's reaction to the trigger.
	Observation Observation
	// Before is the binding's spec.clusters before the trigger.
	Before []workv1alpha2.TargetCluster
	// After is the binding's spec.clusters when the outcome was observed.
	After []workv1alpha2.TargetCluster
	// Message holds extra detail, such as an error or a verification mismatch.
	Message string
}

// SortRows sorts rows in place into the order of a WorkloadRebalancer's
// status.observedWorkloads (see SortKey).
func SortRows(rows []Row) {
	sortByKey(rows, func(r Row) Workload { return r.Workload })
}

// Rebalancer builds the WorkloadRebalancer the controller would hold after
// processing rows: spec.workloads in row order, status.observedWorkloads with
// the rows' results in controller order, observedGeneration (and
// metadata.generation) set to generation, and finishTime. The object has its
// TypeMeta set, so printing it as YAML gives a manifest that can be applied
// as is (the server ignores the status and server-owned fields on create).
func Rebalancer(name string, rows []Row, generation int64, finish *metav1.Time) *appsv1alpha1.WorkloadRebalancer {
	spec := appsv1alpha1.WorkloadRebalancerSpec{Workloads: make([]Workload, 0, len(rows))}
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
