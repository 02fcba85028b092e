// Package estimate owns one job: answering, for a member cluster, what its
// karmada-scheduler-estimator answers karmada-scheduler - how many replicas
// of a workload its nodes can still take. The answer is computed by
// Karmada's own estimator framework (the in-tree plugins of
// pkg/estimator/server, imported from the pinned Karmada module) over a
// snapshot of the member's nodes and of the pods bound to them, read once
// through the Karmada cluster proxy or a kubeconfig context of the member.
// The estimator counts a pod being deleted until it is gone; a Member also
// answers as it will once those pods are gone (Departed), so that a caller
// can tell whether they change a decision.
//
// karmada-scheduler takes, per cluster, the lower of this answer and its
// general estimator's; package predict feeds these answers to Karmada's
// scheduler beside the general estimator, as the scheduler does with
// --enable-scheduler-estimator. Nothing here writes to any API.
package estimate
