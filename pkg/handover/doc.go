// Package handover owns one job: moving one binding's replicas
// make-before-break, from the first write to the release, and recovering
// whatever a move leaves behind when it is stopped.
//
// Given the binding's placement now and the placement a fresh reschedule
// is predicted to choose, a move suspends the binding's scheduling, stages
// the replicas it gains (spec.clusters holding, per cluster, the larger of
// now and the prediction, within a surge budget), waits until the member
// clusters report them ready in the binding's aggregatedStatus, settles
// the still suspended binding on the prediction (the clusters that lose
// replicas scale down after the new ones run) until a new read agrees that
// the scheduler will choose exactly that (settle.go), and only then
// releases the binding with a fresh rescheduleTriggeredAt in the same write
// that lifts the suspension.
//
// The moves of a run go side by side and share a Gate (gate.go): their
// writes and their release windows take turns. In a run all at once
// (Mover.StagedRelease) a move releases from its whole staged placement
// instead of settling while others are under way; in waves one move at a
// time settles (Mover.Serial, settle.go). A run's deadline no longer cuts
// a move past its settle write; the move's own deadline does.
//
// It owns what a move predicts from, too (predictor.go): the moves of a
// run share one read of the clusters, estimators and members, at most a
// few seconds old, and recheck from reads of their own before a release.
// The command that builds the Mover (New) gives only where to read and the
// Karmada release (Reads).
//
// # The ledger and its phases
//
// Every write of a move carries, in the annotation LedgerAnnotation, the
// move's Ledger: its Phase, its Owner (host/pid/random, or a daemon's
// name), its Deadline (Mover.MoveTimeout after its start, server time),
// the replicas and placement it started from and the placement it staged
// last. The release removes the ledger in the same write that lifts the
// suspension, so a binding that carries one is always in one of these
// phases:
//
//	phase     the binding                                   the write that leaves it       recovery (Decide)
//	--------  --------------------------------------------  -----------------------------  -------------------------------------
//	Held      scheduling suspended, spec.clusters as        the first staging write        Undo: lift the hold, put back the
//	          before (a recorded run's workload waiting     (-> Staging), or Unhold        trigger written meanwhile; placement
//	          for its turn)                                                                unchanged
//	Staging   suspended; every cluster has at least its     the settle write (-> Settling) Undo while the original is covered:
//	          original replicas, gaining clusters more      or the release                 only the added replicas stop
//	Settling  suspended; spec.clusters is the new           the release (ledger removed)   LetGo: lift the suspension, keep the
//	          placement: the losing clusters stop their                                    new placement (never restored)
//	          surplus
//
// Whatever the phase, a binding someone else changed - Karmada evicting
// from a failing cluster, the replicas scaled, the suspension lifted, the
// scheduler acting on it, the binding deleted, a ledger that does not
// parse - is let go with Karmada's placement kept, so that Karmada
// schedules it at once; and a binding another live process moves (another
// owner, deadline not passed, and not a process of this host that is gone)
// is waited for, never undone. Decide is that table as a pure function of
// the binding, the time and the caller's owner name; a move that stops
// early, a move that finds a leftover on its binding, `kubectl rebalance
// recover` and the deschedule and failback daemons (Recoverer.Sweep) all
// carry out what it says.
//
// # Writes
//
// Every write is a JSON patch of the fields a move owns (the annotation,
// spec.suspension.scheduling, spec.clusters while suspended and
// spec.rescheduleTriggeredAt), guarded by the resource version it was
// built from. spec.clusters changes entry by entry, so fields of an entry
// this plugin's Karmada types do not know stay; only
// spec.suspension.scheduling is lifted, so a dispatching suspension added
// during the move stays.
package handover
