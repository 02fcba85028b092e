// Package rebalance resolves workloads to their Karmada bindings, writes the
// reschedule trigger, keeps a WorkloadRebalancer status with the controller's
// rules, and classifies what the scheduler did with each trigger.
package rebalance

import (
	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
)

// Workload identifies one resource template, exactly as a WorkloadRebalancer
// spec lists it (an empty namespace means cluster-scoped).
type Workload = appsv1alpha1.ObjectReference
