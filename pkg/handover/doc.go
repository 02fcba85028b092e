// Package handover owns one job: moving one binding's replicas
// make-before-break. Given the binding's placement now and the placement a
// fresh reschedule is predicted to choose, it suspends the binding's
// scheduling, stages the replicas the move gains (spec.clusters holding, per
// cluster, the larger of now and the prediction, within a surge budget),
// waits until the member clusters report them ready in the binding's
// aggregatedStatus, settles the still suspended binding on the prediction
// (the clusters that lose replicas scale down after the new ones run) until
// a new read agrees that the scheduler will choose exactly that, and only
// then releases the binding with a fresh rescheduleTriggeredAt in the same
// write that lifts the suspension: the scheduler makes its own decision,
// which finds spec.clusters as it would write it (settle.go).
//
// It also owns the ledger of a move: an annotation on the binding
// (LedgerAnnotation) written with the suspension and removed with the
// release or the undo. A move that ends early (Ctrl-C, an error, the
// deadline) is undone before Move returns; one whose process died is found
// by the next Move of the same workload and undone before it starts again,
// so no binding stays suspended by this plugin.
//
// It writes only JSON merge patches of the fields it owns (the annotation,
// spec.suspension.scheduling, spec.clusters while suspended and
// spec.rescheduleTriggeredAt), each guarded by the resource version it read.
package handover
