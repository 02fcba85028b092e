// Package rebalance resolves workloads to their Karmada bindings, writes the
// reschedule trigger at a time the scheduler honours, and classifies what the
// scheduler did with each trigger, in the CRD's result vocabulary and order.
// It owns what a binding says: its placement, its outcome and whether the
// replicas of its placement are ready (CheckReady, read by the template's
// kind), which a row carries as its Readiness. It reads bindings off the
// wire itself (wire.go): the trigger write's answer, the watch events and the
// fleet's lists are decoded in one pass into what a Binding keeps.
// Keeping a WorkloadRebalancer object and its TTL is package record's job;
// running a whole rebalance (waves, recording) is package run's.
package rebalance

import (
	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
)

// Workload identifies one resource template, exactly as a WorkloadRebalancer
// spec lists it (an empty namespace means cluster-scoped).
type Workload = appsv1alpha1.ObjectReference
