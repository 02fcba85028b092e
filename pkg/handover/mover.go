package handover

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// Prediction is what a Predictor knows of a workload's fresh reschedule.
type Prediction struct {
	// Placements are the placements the scheduler may write, the likeliest
	// first; empty when it cannot be told.
	Placements [][]workv1alpha2.TargetCluster
	// Why says why Placements is empty.
	Why string
	// ReleaseDependent says that Placements are what the different
	// releases the control plane may run would write, not what one
	// scheduler chooses: the move releases onto all of them staged instead
	// of settling on the first (settle.go).
	ReleaseDependent bool
	// Unsettled, when set, says why the read behind the prediction may not
	// be what karmada-scheduler sees a moment later (a member's estimator
	// still counting pods being deleted, its resource summary pods that
	// stopped): the settle check reads again.
	Unsettled string
}

// Predictor tells where a fresh reschedule would put a workload's replicas
// now (package predict, fed with the live clusters and estimators). b is
// the workload's binding as the move just read it (a binding held by
// Mover.Hold as it was before the hold), so the predictor need not read it.
type Predictor func(ctx context.Context, t rebalance.Target, b *workv1alpha2.ResourceBinding) (Prediction, error)

// OneWriteMover moves a workload with a single trigger write, as a
// rebalance did before this package (waves.BindingMover has this shape).
type OneWriteMover interface {
	Move(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row)) (rebalance.Row, error)
}

// Mover moves workloads make-before-break (see the package comment). It has
// the shape of waves.Mover, so that a run all at once and a waved one both
// use it.
type Mover struct {
	// Karmada reaches the bindings; Clock is fed by its answers, so that
	// the release's trigger time is the API server's.
	Karmada karmadaclient.Interface
	Clock   *rebalance.ServerClock
	// Predict gives the placement to stage.
	Predict Predictor
	// Budget bounds the extra and the missing replicas during a move.
	Budget Budget
	// OneWrite moves a workload the budget lets go unavailable, or one the
	// handover cannot help (nothing to start elsewhere, no prediction, a
	// binding the scheduler would ignore anyway).
	OneWrite OneWriteMover
	// WaitReady, after the release, follows the binding until the replicas
	// of the scheduler's placement are ready.
	WaitReady bool
	// UndoTimeout bounds the undo of an interrupted move; zero means 10s.
	UndoTimeout time.Duration
	// Owner names this process in the ledgers it writes (see Ledger.Owner);
	// empty means DefaultOwner().
	Owner string
	// MoveTimeout bounds one move, from its first write to its release,
	// whatever bounds the run: it is the deadline the ledger carries, past
	// which any process of the plugin recovers the binding. Zero means
	// DefaultMoveTimeout.
	MoveTimeout time.Duration
	// Recheck predicts again from a read of its own, taken when it is
	// called: before the release the move settles the binding on the
	// placement the scheduler will choose and asks it whether that still
	// holds (settle.go). Nil releases onto the staged placement as first
	// predicted.
	Recheck Predictor
	// SettleTimeout bounds each wait of the settle step (for the members to
	// stop the surplus replicas, for a read that agrees); zero means 30s.
	SettleTimeout time.Duration
	// Serial, a channel of capacity 1 shared by the moves of a run in
	// waves, makes one move at a time go from its settle write to the
	// scheduler's answer, keeping its turn while it stages again, and keeps
	// the other moves' writes out of that section: in waves each move
	// predicts from a read that saw the earlier ones, and settled one after
	// another their answers stay (a waved batch of 50, 10 in flight, was
	// settled as predicted for all). A run all at once has none: its moves
	// release from their staged placements (StagedRelease). Nil: no order.
	Serial chan struct{}
	// Gate, shared by the moves of a run, keeps their writes (which start
	// and stop replicas on the members) out of the windows in which moves
	// recheck, release and wait for the scheduler's answer; writes go
	// together and releases go together (see gate.go). Nil: no order.
	Gate *Gate
	// StagedRelease makes a move whose whole staged placement runs release
	// from it, without settling, while other moves of the run are under
	// way. A run all at once predicts every move from one read taken
	// before any of them staged: the predictions cannot count each other's
	// replicas, and settling one after another makes the scheduler's
	// answers swing (settle.go). In waves each move predicts from a read
	// that saw the earlier moves, and settles.
	StagedRelease bool
	// Observe, when set, is shown every binding a move starts from, as
	// read: a run notes there what it warns about afterwards (a binding
	// placed by a later clusterAffinities group), as it does for the
	// bindings its one-write moves read.
	Observe func(*workv1alpha2.ResourceBinding)
	// Shared, when set, returns t's binding from a read the run's moves
	// share (the one Predict predicts from, a few seconds old at most), or
	// false. A move judges the workload from it first: one whose binding is
	// settled there and that the one-write move serves anyway (nothing to
	// start first, see firstLook) goes to OneWrite without a read of its
	// own, so that a batch of such workloads costs what it costs without
	// make-before-break; any other workload is read afresh.
	Shared func(ctx context.Context, t rebalance.Target) (*workv1alpha2.ResourceBinding, bool)
	// wrote, when set, is told every binding an undo wrote: the one-write
	// mover that follows the run's bindings (waves.WatchedBindings) would
	// otherwise judge a workload handed over right after its hold was
	// lifted from its watch's older, suspended copy, and report the trigger
	// it would then not write as ignored.
	wrote func(*workv1alpha2.ResourceBinding)
}

var _ waves.MakeBeforeBreak = (*Mover)(nil)

// Config is what a command gives the Mover of a run: its flags and
// clients. New derives the rest.
type Config struct {
	// Karmada and Clock are Mover's.
	Karmada karmadaclient.Interface
	Clock   *rebalance.ServerClock
	// Reads is where the moves' predictions read from; Targets are the
	// run's workloads, whose namespaces the shared read lists.
	Reads   Reads
	Targets []rebalance.Target
	// Budget, MoveTimeout, OneWrite and WaitReady are Mover's.
	Budget      Budget
	MoveTimeout time.Duration
	OneWrite    OneWriteMover
	WaitReady   bool
	// AllAtOnce: the run starts every move together (not in waves); its
	// moves release from their staged placements (Mover.StagedRelease).
	AllAtOnce bool
}

// New builds the Mover of a run over c.Targets: its moves predict from
// one read they share, at most moveReadsMaxAge old (Predict, Shared), and
// recheck from reads of their own (Recheck); their writes and their
// releases take turns (Gate).
func New(c Config) *Mover {
	source := moveSource{reads: c.Reads, targets: c.Targets}
	predictor, shared := source.predictor()
	return &Mover{
		Karmada:       c.Karmada,
		Clock:         c.Clock,
		Predict:       predictor,
		Shared:        shared,
		Recheck:       source.recheckPredictor(),
		Gate:          NewGate(),
		Budget:        c.Budget,
		MoveTimeout:   c.MoveTimeout,
		OneWrite:      c.OneWrite,
		WaitReady:     c.WaitReady,
		StagedRelease: c.AllAtOnce,
		Serial:        serialUnless(c.AllAtOnce),
	}
}

// serialUnless returns a Mover.Serial for a run in waves, nil for one all
// at once.
func serialUnless(allAtOnce bool) chan struct{} {
	if allAtOnce {
		return nil
	}
	return make(chan struct{}, 1)
}

// WithObserver implements waves.MakeBeforeBreak: a copy of m whose moves
// show observe the binding each starts from (see Observe).
func (m *Mover) WithObserver(observe func(*workv1alpha2.ResourceBinding)) waves.MakeBeforeBreak {
	c := *m
	c.Observe = observe
	return &c
}

// WithOneWrite returns a copy of m whose one-write moves go to oneWrite: a
// recorded run hands it a mover that triggers as its record does.
func (m *Mover) WithOneWrite(oneWrite OneWriteMover) *Mover {
	c := *m
	c.OneWrite = oneWrite
	return &c
}

// WithOneWriteMover implements waves.MakeBeforeBreak. The bindings a
// one-write mover follows (watched, in a batch above the fleet threshold)
// become the copy's Shared: its list and watch per namespace are current
// and cost the run nothing more, where the shared read would list every
// namespace of the run again every few seconds. It is also told what the
// copy's undos write (Mover.wrote).
func (m *Mover) WithOneWriteMover(oneWrite waves.Mover, watched waves.WatchedBindings) waves.MakeBeforeBreak {
	c := m.WithOneWrite(oneWrite)
	if watched == nil {
		return c
	}
	c.wrote = func(b *workv1alpha2.ResourceBinding) { watched.Wrote(rebalance.BindingFromObject(b)) }
	if m.Shared != nil {
		c.Shared = func(ctx context.Context, t rebalance.Target) (*workv1alpha2.ResourceBinding, bool) {
			b, ok := watched.Watched(ctx, t)
			if !ok || b.Namespace == "" {
				return nil, false
			}
			return fromWatched(b), true
		}
	}
	return c
}

// Move implements waves.Mover.
func (m *Mover) Move(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row)) (rebalance.Row, error) {
	if row, done, err := m.firstLook(ctx, t, triggered); done {
		return row, err
	}
	return m.move(ctx, t, triggered, 0)
}

// move reads t's binding, recovers what an earlier move left on it, plans
// and runs the move; replans counts the plans made before.
func (m *Mover) move(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row), replans int) (rebalance.Row, error) {
	api := bindings{client: m.Karmada}
	name := rebalance.BindingNameFor(t.Workload)
	ns := t.Workload.Namespace
	b, err := api.get(ctx, ns, name)
	switch {
	case apierrors.IsNotFound(err):
		return m.oneWrite(ctx, t, triggered, "") // which reports the missing binding
	case err != nil:
		return m.oneWrite(ctx, t, triggered, fmt.Sprintf("reading %s failed: %v", rebalance.BindingRef(t.Workload), err))
	}
	if m.Observe != nil {
		m.Observe(b)
	}
	var held *Ledger
	if l, lerr := readLedger(b); lerr == nil && l != nil && m.ownHold(b, l) {
		// Suspended ahead of this move by this process (Hold): carry on
		// from there.
		held = l
	} else if lerr != nil || l != nil {
		// A move that never ended (a killed process, an earlier run), or
		// one another process is making: wait for a live one, recover the
		// others by Decide's rules, then start afresh from what the
		// scheduler sees now.
		var d Decision
		if b, d, err = m.waitOrRecover(ctx, api, b); err != nil || d.Action == ActionWait {
			row := m.row(t, b)
			switch {
			case d.Action == ActionWait:
				row.Message = fmt.Sprintf("%s is being moved by another process (%s); not moved, run the command again once it ended", rebalance.BindingRef(t.Workload), d.Message)
			default:
				row.Message = fmt.Sprintf("%s was left suspended by an interrupted move and could not be recovered: %v; run `kubectl rebalance recover`", rebalance.BindingRef(t.Workload), err)
			}
			triggered(row)
			return row, nil
		}
	}
	h := &handover{m: m, api: api, t: t, ns: ns, name: name, b: b, held: held}
	if move, why := h.plan(ctx); !move {
		if held != nil {
			// Lift the hold first: the one-write move writes the trigger.
			undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.undoTimeout())
			_, _, err := m.recoverBinding(undoCtx, api, b)
			cancel()
			if err != nil {
				row := m.row(t, b)
				row.Message = fmt.Sprintf("%s was suspended ahead of its move and could not be released: %v; run the command again", rebalance.BindingRef(t.Workload), err)
				triggered(row)
				return row, nil
			}
		}
		if why != "" {
			return m.oneWrite(ctx, t, triggered, why)
		}
		return h.plainOneWrite(ctx, triggered)
	}
	row, err := h.run(ctx, triggered)
	if errors.Is(err, errReplan) {
		if replans >= maxReplans {
			row.Message = fmt.Sprintf("%s kept changing (replicas or placement) while its move was planned; not moved, run the command again", rebalance.BindingRef(t.Workload))
			triggered(row)
			return row, nil
		}
		return m.move(ctx, t, triggered, replans+1)
	}
	return row, err
}

// maxReplans bounds how often a move plans again because its workload
// changed between the plan and the first write.
const maxReplans = 3

// plainOneWrite moves h's workload in one write because the plan found
// nothing to start first, and says on the row why (h.plain) in place of the
// one-write move's generic reason.
func (h *handover) plainOneWrite(ctx context.Context, triggered func(rebalance.Row)) (rebalance.Row, error) {
	row, err := h.m.oneWrite(ctx, h.t, triggered, "")
	if row.OneWrite != "" && h.plain != "" {
		row.OneWrite = h.plain
	}
	return row, err
}

// firstLook moves t in one write when the run's shared read (Mover.Shared)
// already shows that the one-write move is the same move: the binding is
// settled there (scheduled, its spec observed by the scheduler, neither
// suspended nor carrying a ledger) and no cluster would gain a replica, or
// there are no replicas to keep, or the budget keeps none. Anything else,
// including a prediction that fails or a reason to explain on the row, is
// left to the move proper, which reads the binding itself. done reports
// whether t was moved here.
func (m *Mover) firstLook(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row)) (row rebalance.Row, done bool, err error) {
	if m.Shared == nil {
		return row, false, nil
	}
	b, ok := m.Shared(ctx, t)
	if !ok || !settled(b) {
		return row, false, nil
	}
	b = b.DeepCopy() // the read is the run's, shared by moves side by side
	if (&handover{m: m}).staleForStaying(b) {
		// Other moves change the room b's placement depends on: the move
		// proper predicts it from a read of its own before it calls it
		// settled (plan).
		return row, false, nil
	}
	// A prediction from summaries that have not caught up (right after a
	// failover) is the move proper's to settle, from reads of its own: here
	// it ends the first look.
	look := *m
	look.Recheck = func(context.Context, rebalance.Target, *workv1alpha2.ResourceBinding) (Prediction, error) {
		return Prediction{}, errUnsettled
	}
	h := &handover{m: &look, api: bindings{client: m.Karmada}, t: t, ns: t.Workload.Namespace, name: b.Name, b: b}
	if move, why := h.plan(ctx); move || why != "" {
		return row, false, nil
	}
	if m.Observe != nil {
		m.Observe(b)
	}
	row, err = h.plainOneWrite(ctx, triggered)
	return row, true, err
}

// errUnsettled ends a first look whose prediction is not settled.
var errUnsettled = errors.New("the prediction from the shared read is not settled")

// settled reports whether b, as a shared read saw it, is a binding a move
// may be judged from: scheduled, its spec observed by the scheduler, not
// suspended and carrying no ledger of a hold or move.
func settled(b *workv1alpha2.ResourceBinding) bool {
	if b == nil || b.DeletionTimestamp != nil || b.Spec.SchedulingSuspended() || b.Status.SchedulerObservedGeneration != b.Generation {
		return false
	}
	if _, ok := b.Annotations[LedgerAnnotation]; ok {
		return false
	}
	return meta.IsStatusConditionTrue(b.Status.Conditions, workv1alpha2.Scheduled)
}

// Hold suspends the scheduling of t's binding ahead of its move, placement
// unchanged, so that a trigger someone else writes before the move starts
// (Karmada's workloadRebalancer controller, which triggers what a record
// lists at its creationTimestamp) does not move the replicas in one write:
// the scheduler leaves a suspended binding alone, and the move that comes
// for it carries on from the hold and releases it with its own, later
// trigger. It holds nothing (and says so) when the binding is missing,
// already suspended, or would not move make-before-break anyway; Unhold
// lifts a hold no move took over.
func (m *Mover) Hold(ctx context.Context, t rebalance.Target) (bool, error) {
	api := bindings{client: m.Karmada}
	b, err := api.get(ctx, t.Workload.Namespace, rebalance.BindingNameFor(t.Workload))
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	if err := m.waitObserved(ctx, api, b); err != nil {
		return false, err
	}
	held := false
	written, err := writeGuarded(ctx, api, b, func(b *workv1alpha2.ResourceBinding) ([]byte, error) {
		if held = m.holds(b); !held {
			return nil, nil
		}
		return ledgerWrite(b, m.newLedger(b, PhaseHeld))
	})
	if err != nil || !held {
		return false, err
	}
	return written.Spec.SchedulingSuspended(), nil
}

// newLedger is the ledger of a move of b that starts now in phase: owned
// by this mover, its deadline MoveTimeout from now (server time), the
// binding's placement, replicas, trigger and last schedule as read.
func (m *Mover) newLedger(b *workv1alpha2.ResourceBinding, phase Phase) Ledger {
	l := Ledger{Phase: phase, Owner: m.owner(), Replicas: b.Spec.Replicas, Original: b.Spec.Clusters, Staged: b.Spec.Clusters,
		HadSuspension: b.Spec.Suspension != nil, Trigger: b.Spec.RescheduleTriggeredAt, TriggerSaved: true,
		LastScheduled: b.Status.LastScheduledTime}
	now := m.now()
	l.Started = metav1.NewTime(now)
	deadline := metav1.NewTime(now.Add(m.moveTimeout()))
	l.Deadline = &deadline
	return l
}

// ownHold reports whether l is a hold this mover took (or an older
// release's hold, which names no owner) that a move may carry on from:
// nobody changed the binding since.
func (m *Mover) ownHold(b *workv1alpha2.ResourceBinding, l *Ledger) bool {
	if l.CurrentPhase() != PhaseHeld || (l.Owner != "" && l.Owner != m.owner()) {
		return false
	}
	return decide(b, time.Now(), m.owner()).Action == ActionUndo
}

// waitOrRecover follows b while another live process moves it (ActionWait),
// then recovers it by Decide's rules. It returns the binding as written or
// read, and the last decision: ActionWait when ctx ended first.
func (m *Mover) waitOrRecover(ctx context.Context, api bindings, b *workv1alpha2.ResourceBinding) (*workv1alpha2.ResourceBinding, Decision, error) {
	d := decide(b, m.now(), m.owner())
	if d.Action == ActionWait {
		got, err := api.follow(ctx, b.Namespace, b.Name, func(b *workv1alpha2.ResourceBinding) bool {
			d = decide(b, m.now(), m.owner())
			return d.Action != ActionWait
		})
		if err != nil {
			if ctx.Err() != nil {
				return b, d, nil
			}
			return b, d, err
		}
		b = got
	}
	return m.recoverBinding(ctx, api, b)
}

// now is the server's time, or the local time before the server told it.
func (m *Mover) now() time.Time {
	if m.Clock != nil {
		if now, ok := m.Clock.Now(); ok {
			return now
		}
	}
	return time.Now()
}

// observedWait bounds how long a move waits for the scheduler to observe
// its binding's generation before its first write.
const observedWait = 30 * time.Second

// waitObserved waits until karmada-scheduler has observed b's generation:
// a binding it has not looked at yet may sit in its queue, and it checks
// a binding's suspension when it queues it, not when it schedules it, so
// a suspension written meanwhile would not stop it. (The ledger's
// LastScheduled catches a schedule that slips through anyway: Decide lets
// such a binding go.) Past observedWait the move goes on.
func (m *Mover) waitObserved(ctx context.Context, api bindings, b *workv1alpha2.ResourceBinding) error {
	if b.Status.SchedulerObservedGeneration >= b.Generation {
		return nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, observedWait)
	defer cancel()
	_, err := api.follow(waitCtx, b.Namespace, b.Name, func(b *workv1alpha2.ResourceBinding) bool {
		return b.Status.SchedulerObservedGeneration >= b.Generation
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && waitCtx.Err() == nil {
		return err
	}
	return nil
}

// holds reports whether Hold suspends b: a binding the scheduler has
// placed, not suspended already, whose move the budget does not leave to
// one write.
func (m *Mover) holds(b *workv1alpha2.ResourceBinding) bool {
	if l, lerr := readLedger(b); lerr != nil || l != nil || b.Spec.SchedulingSuspended() || b.Spec.Replicas == 0 {
		return false
	}
	if limits, err := m.Budget.Resolve(b.Spec.Replicas); err != nil || limits.OneWrite(b.Spec.Replicas) {
		return false
	}
	c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha2.Scheduled)
	return c != nil && c.Status == metav1.ConditionTrue
}

// Unhold lifts a hold of t's binding that no move took over (the binding
// as it was, its trigger too); anything else is left alone.
func (m *Mover) Unhold(ctx context.Context, t rebalance.Target) error {
	api := bindings{client: m.Karmada}
	b, err := api.get(ctx, t.Workload.Namespace, rebalance.BindingNameFor(t.Workload))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if l, lerr := readLedger(b); lerr != nil || l == nil || l.CurrentPhase() != PhaseHeld || (l.Owner != "" && l.Owner != m.owner()) {
		return nil
	}
	_, _, err = m.recoverBinding(ctx, api, b)
	return err
}

// LeftSuspended reports whether t's binding carries the ledger of a hold
// or a move that no process finished: one whose process was killed, or
// lost its Lease, before it released or undid the binding. Move takes such
// a binding over (a hold) or undoes it and moves afresh (a move).
func (m *Mover) LeftSuspended(ctx context.Context, t rebalance.Target) (bool, error) {
	b, err := bindings{client: m.Karmada}.get(ctx, t.Workload.Namespace, rebalance.BindingNameFor(t.Workload))
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	_, has := b.Annotations[LedgerAnnotation]
	return has, nil
}

// oneWrite hands the workload to the one-write move; note, when set, says
// why on the row.
func (m *Mover) oneWrite(ctx context.Context, t rebalance.Target, triggered func(rebalance.Row), note string) (rebalance.Row, error) {
	row, err := m.OneWrite.Move(ctx, t, triggered)
	if note != "" {
		row.Message = joinMessage(row.Message, "not made before break, one trigger write instead: "+note)
	}
	if row.TriggeredAt != nil {
		row.OneWrite = note
		if note == "" {
			row.OneWrite = "moved in one write"
		}
	}
	return row, err
}

func joinMessage(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

func (m *Mover) row(t rebalance.Target, b *workv1alpha2.ResourceBinding) rebalance.Row {
	row := rebalance.Row{Workload: t.Workload, Binding: rebalance.BindingNameFor(t.Workload)}
	if b != nil {
		row.Before = b.Spec.Clusters
	}
	return row
}

// writeGuarded writes the patch build makes of the binding as read, and on
// a conflict reads it again and rebuilds the patch, until it applies or
// fails otherwise. build returns nil when there is nothing to write.
func writeGuarded(ctx context.Context, api bindings, b *workv1alpha2.ResourceBinding, build func(*workv1alpha2.ResourceBinding) ([]byte, error)) (*workv1alpha2.ResourceBinding, error) {
	for attempt := 0; ; attempt++ {
		body, err := build(b)
		if err != nil || body == nil {
			return b, err
		}
		if err := ctx.Err(); err != nil {
			return b, err
		}
		// A write on its way when ctx ends is let finish, so that what the
		// binding holds afterwards is known (see rebalance.WriteGrace).
		writeCtx, cancel := rebalance.WriteContext(ctx)
		written, err := api.patch(writeCtx, b.Namespace, b.Name, body)
		cancel()
		if err == nil {
			return written, nil
		}
		if !apierrors.IsConflict(err) || attempt >= 20 {
			return b, err
		}
		// The status of a binding changes often while its replicas start:
		// read it again and write the same intent against the new version.
		if b, err = api.get(ctx, b.Namespace, b.Name); err != nil {
			return b, err
		}
	}
}

// handover is one move in progress.
type handover struct {
	m        *Mover
	api      bindings
	t        rebalance.Target
	ns, name string
	b        *workv1alpha2.ResourceBinding
	// held is the ledger of a hold the move carries on from (Hold).
	held *Ledger

	replicas int32
	limits   Limits
	original placement
	target   placement // the prediction
	cover    placement // what to stage: every replica any likely placement adds
	keep     placement // what every likely placement keeps: steps shrink toward it
	floor    int32     // the ready replicas the move keeps
	ledger   Ledger
	steps    int
	// staged is the placement the move last wrote; a binding whose
	// spec.clusters differs was changed by someone else (PlacementChanged).
	staged placement
	// releaseDependent: the prediction lists what several releases may
	// write (Prediction.ReleaseDependent); settled: the settle step found
	// the placement the scheduler will choose staged and the members at it.
	releaseDependent, settled bool
	// fromCover: the move releases from its whole staged placement, not a
	// settled one (releaseFromCover).
	fromCover bool
	// settleNote says, on the row, why the move released without settling.
	settleNote string
	// inGate: this move holds Mover.Gate, in gateMode; serialHeld: it
	// holds Mover.Serial.
	inGate     bool
	gateMode   gateMode
	serialHeld bool
	// plain says why the workload moves in one write where plan gives no
	// reason for the row's message (the one-write move is the same move).
	plain string
	// stopErr is what ended the move before its release.
	stopErr error
}

// staleForStaying reports whether a prediction that b stays where it is
// must be checked against a read of the move's own: b's placement depends
// on the clusters' room, and other moves of the run are under way.
func (h *handover) staleForStaying(b *workv1alpha2.ResourceBinding) bool {
	return h.m.Recheck != nil && h.m.Gate.moving() > 0 && predict.CapacityDependent(b)
}

// plan decides whether the binding moves make-before-break, and how; when
// it does not, why says so on the row ("" when the one-write move is simply
// the same: nothing to keep, or nothing to start first).
func (h *handover) plan(ctx context.Context) (move bool, why string) {
	b := h.b
	if h.held != nil {
		// Judge the binding as it was before the hold suspended it.
		b = asBeforeHold(b)
	}
	h.replicas = b.Spec.Replicas
	if h.replicas == 0 {
		h.plain = "no replicas to keep"
		return false, ""
	}
	limits, err := h.m.Budget.Resolve(h.replicas)
	if err != nil {
		return false, err.Error()
	}
	h.limits = limits
	if limits.OneWrite(h.replicas) {
		h.plain = "the budget lets every replica be unavailable (--max-unavailable)"
		return false, ""
	}
	// The one-write move reports why the scheduler would ignore a trigger.
	if pre := rebalance.PreTriggerCheck(b.Labels, b.Spec, b.Status, metav1.NewTime(time.Now().Add(time.Hour))); pre.Outcome != rebalance.OutcomeNone {
		h.plain = "the scheduler ignores a trigger on this binding"
		return false, ""
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha2.Scheduled); c == nil || c.Status != metav1.ConditionTrue {
		return false, "the binding's last scheduling did not succeed, so there is no running placement to keep"
	}
	pred, err := h.m.Predict(ctx, h.t, b)
	if err == nil && pred.Unsettled != "" && h.m.Recheck != nil {
		// Right after a failover or another move a member's summary may
		// still count pods that are gone: predict from reads of its own
		// until the summaries caught up, rather than stage for a placement
		// the scheduler will not choose.
		pred, err = h.settledPrediction(ctx, b)
	}
	switch {
	case err != nil:
		return false, "the new placement could not be predicted: " + err.Error()
	case len(pred.Placements) == 0:
		return false, "the new placement could not be predicted: " + pred.Why
	}
	placements := pred.Placements
	if h.m.Recheck != nil && !pred.ReleaseDependent {
		// The move settles on the scheduler's choice before the release
		// (settle.go), so the second placement a one-write reschedule may
		// end in (a second pass from the first one's write) never comes:
		// start only the first.
		placements = placements[:1]
	}
	h.original = toPlacement(b.Spec.Clusters)
	if toPlacement(Covering(b.Spec.Clusters, placements...)).equal(h.original) && h.staleForStaying(b) {
		// The shared read predates the moves in flight, which change the
		// room this placement depends on: a workload it says stays would
		// move in one write, unprotected, were the scheduler to decide
		// otherwise. Ask a read of its own.
		if again, err := h.m.Recheck(ctx, h.t, b); err == nil && again.Unsettled == "" && len(again.Placements) > 0 && !again.ReleaseDependent {
			placements = again.Placements[:1]
		}
	}
	h.target = toPlacement(placements[0])
	h.cover = toPlacement(Covering(b.Spec.Clusters, placements...))
	h.keep = keeping(placements...)
	h.releaseDependent = pred.ReleaseDependent
	if h.cover.equal(h.original) {
		h.plain = "no cluster gains a replica, so there is nothing to start first"
		return false, ""
	}
	ready := rebalance.ReadyReplicas(b.Spec, b.Status)
	if !reportsReady(ready, h.original) {
		// Nothing would tell when the replicas started elsewhere are
		// ready: a make-before-break move would wait for nothing.
		return false, "the workload's member status reports no ready replica count, so nothing tells when new replicas are ready"
	}
	start := readyWithin(ready, h.original)
	h.floor = max(start-limits.Unavailable, 0)
	h.ledger = h.m.newLedger(b, PhaseStaging)
	h.ledger.Target = pred.Placements[0]
	if h.held != nil {
		// What the binding held before the hold, not what was written since.
		h.ledger.HadSuspension, h.ledger.Trigger, h.ledger.LastScheduled = h.held.HadSuspension, h.held.Trigger, h.held.LastScheduled
	}
	return true, ""
}

// reportsReady reports whether a cluster of original reports a ready
// count in ready.
func reportsReady(ready map[string]int32, original placement) bool {
	for _, name := range original.names {
		if _, ok := ready[name]; ok {
			return true
		}
	}
	return len(original.names) == 0
}

// run carries the move out: stage, wait, settle, release, confirm, within
// the move's own deadline (Mover.MoveTimeout). Whatever ends it early is
// recovered by Decide's rules before it returns: undone while only the
// added replicas run, let go with the new placement kept once they have
// taken over, let go with Karmada's placement kept when someone else
// changed the binding.
func (h *handover) run(ctx context.Context, triggered func(rebalance.Row)) (row rebalance.Row, err error) {
	row = h.m.row(h.t, h.b)
	h.m.Gate.begin()
	defer h.m.Gate.end()
	released := false
	// The move's own bound, a little inside the ledger's deadline so that
	// no other process recovers a move still running here.
	moveDeadline := time.Now().Add(max(h.m.moveTimeout()-moveDeadlineMargin, time.Second))
	moveCtx, cancel := context.WithDeadline(ctx, moveDeadline)
	defer cancel()
	defer func() {
		if !released {
			h.stopped(ctx, moveCtx, &row, triggered)
		}
	}()

	if err := h.stage(moveCtx, &row); err != nil {
		if errors.Is(err, errReplan) && h.steps == 0 {
			// Nothing was written: the caller plans again.
			released = true
			return row, errReplan
		}
		if errors.Is(err, ErrNoSuspension) {
			undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.undoTimeout())
			_, _, uerr := h.m.recoverBinding(undoCtx, h.api, h.b)
			cancel()
			if uerr == nil {
				released = true
				return h.m.oneWrite(ctx, h.t, triggered, err.Error())
			}
		}
		h.stopErr = err
		return row, nil
	}
	defer h.leaveGate()
	defer h.unlock()
	if err := h.lock(moveCtx); err != nil {
		h.stopErr = err
		return row, nil
	}
	if moveCtx.Err() != nil {
		h.stopErr = moveCtx.Err()
		return row, nil
	}
	// From the settle write on, the new replicas take over: the run's
	// deadline (--timeout, a wave's progress deadline) no longer cuts the
	// move, only its own deadline and an interruption do.
	settleCtx, cancelSettle := pastRunDeadline(ctx, moveDeadline)
	defer cancelSettle()
	if err := h.settle(settleCtx, &row); err != nil {
		h.stopErr = err
		return row, nil
	}
	if err := h.enterGate(settleCtx, gateRelease); err != nil {
		h.stopErr = err
		return row, nil
	}
	at, err := h.release(settleCtx)
	if err != nil {
		h.stopErr = err
		return row, nil
	}
	released = true
	row.Staged = h.cover.clusters()
	row.Result = appsv1alpha1.RebalanceSuccessful
	row.TriggeredAt = &at
	row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeWaiting, Reason: rebalance.ReasonAwaitingScheduler}
	triggered(row)
	h.confirm(settleCtx, ctx, &row, at)
	return row, nil
}

// pastRunDeadline returns the context of a move from its settle write on:
// it ends with ctx when ctx is interrupted (Ctrl-C, a stopped run), but not
// when ctx only ran out of time, and at the move's own deadline, which a
// run's deadline does not bring forward.
func pastRunDeadline(ctx context.Context, moveDeadline time.Time) (context.Context, context.CancelFunc) {
	bounded, cancel := context.WithDeadline(context.WithoutCancel(ctx), moveDeadline)
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return bounded, func() { stop(); cancel() }
}

// moveDeadlineMargin is how much earlier than the ledger's deadline a move
// gives up by itself: the deadline is server time, the bound local.
const moveDeadlineMargin = 5 * time.Second

// stopped recovers a move that ends before its release (see run) and says
// on the row why it stopped and what was left.
func (h *handover) stopped(ctx, moveCtx context.Context, row *rebalance.Row, triggered func(rebalance.Row)) {
	undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.undoTimeout())
	defer cancel()
	why := h.stopMessage(ctx, moveCtx, h.stopErr)
	cur, err := h.api.get(undoCtx, h.ns, h.name)
	var d Decision
	if err == nil {
		cur, d, err = h.m.recoverBinding(undoCtx, h.api, cur)
	}
	var what string
	switch {
	case err != nil:
		what = fmt.Sprintf("recovering it failed (%v): the binding stays suspended with annotation %s until its deadline; `kubectl rebalance recover` or the next run of this command recovers it", err, LedgerAnnotation)
	case d.Action == ActionUndo:
		what = "the staged replicas were removed and the binding's scheduling resumed; nothing moved"
	case d.Reason == ReasonTookOver:
		what = fmt.Sprintf("the new replicas had taken over, so the placement %s was kept and the binding's scheduling resumed; no trigger was written",
			rebalance.FormatPlacement(cur.Spec.Clusters))
		row.After = cur.Spec.Clusters
		row.Staged = h.cover.clusters()
	case d.Action == ActionLetGo:
		what = "the binding was left as Karmada placed it, its scheduling resumed, and no trigger was written; run the command again once the clusters are healthy"
	case d.Action == ActionWait:
		what = "another process took the move over: " + d.Message
	default:
		what = "nothing of the move was left on the binding"
	}
	row.Message = joinMessage(why, "make-before-break move stopped before the release: "+what)
	triggered(*row)
}

func (h *handover) undoTimeout() time.Duration {
	if h.m.UndoTimeout > 0 {
		return h.m.UndoTimeout
	}
	return 10 * time.Second
}

func (h *handover) stopMessage(ctx, moveCtx context.Context, err error) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "the gained replicas were not ready before the deadline (--timeout; in waves --progress-deadline)"
	case ctx.Err() != nil:
		return "interrupted while the gained replicas were starting"
	case moveCtx.Err() != nil:
		return fmt.Sprintf("the move did not end within its own deadline (--move-timeout %s)", h.m.moveTimeout())
	case err != nil:
		return err.Error()
	}
	return ""
}

// stage suspends the binding and stages the gained replicas, in steps when
// the surge budget is smaller than the gain; every step waits until the
// ready replicas that stay are at least the floor.
func (h *handover) stage(ctx context.Context, row *rebalance.Row) error {
	if h.held == nil {
		if err := h.m.waitObserved(ctx, h.api, h.b); err != nil {
			return err
		}
	}
	cur := h.original
	first := true
	for {
		next, done := grow(cur, gaining(h.original, h.cover), h.replicas, h.limits.Surge)
		if first || !next.equal(cur) {
			if err := h.write(ctx, next, first); err != nil {
				return err
			}
			first = false
			h.steps++
			cur = next
		}
		if done {
			return h.waitSafe(ctx, h.target, row)
		}
		after := shrink(cur, h.keep, h.replicas, h.limits.Unavailable)
		if after.equal(cur) {
			return fmt.Errorf("the budget (surge %d, unavailable %d) leaves no room to go on from %s", h.limits.Surge, h.limits.Unavailable, rebalance.FormatPlacement(cur.clusters()))
		}
		if err := h.waitSafe(ctx, after, row); err != nil {
			return err
		}
		if err := h.write(ctx, after, false); err != nil {
			return err
		}
		cur = after
	}
}

// place writes a staged placement: the first write also suspends the
// binding and records the ledger.
func (h *handover) place(ctx context.Context, p placement, first bool) error {
	staged := p.clusters()
	written, err := writeGuarded(ctx, h.api, h.b, func(b *workv1alpha2.ResourceBinding) ([]byte, error) {
		l, _ := readLedger(b)
		if first {
			if b.Spec.SchedulingSuspended() && (h.held == nil || l == nil || l.CurrentPhase() != PhaseHeld || (l.Owner != "" && l.Owner != h.m.owner())) {
				return nil, fmt.Errorf("scheduling of %s was suspended by someone else meanwhile", rebalance.BindingRef(h.t.Workload))
			}
			// The plan was made from an earlier read: a write rebuilt
			// after a conflict or a wait must not stage it over a
			// workload scaled or placed anew meanwhile.
			if b.Spec.Replicas != h.replicas || !toPlacement(b.Spec.Clusters).equal(h.original) {
				return nil, errReplan
			}
			h.ledger.Started = metav1.NewTime(h.m.now())
		} else {
			if l == nil || !b.Spec.SchedulingSuspended() {
				return nil, fmt.Errorf("someone else lifted the suspension of %s during the move", rebalance.BindingRef(h.t.Workload))
			}
			if err := h.unchanged(b); err != nil {
				return nil, err
			}
		}
		next := h.ledger
		next.Staged = staged
		return ledgerWrite(b, next)
	})
	if err != nil {
		return err
	}
	h.b = written
	h.ledger.Staged = staged
	h.staged = toPlacement(written.Spec.Clusters)
	if first && !written.Spec.SchedulingSuspended() {
		return ErrNoSuspension
	}
	return nil
}

// errReplan is a binding whose replicas or placement changed between the
// move's plan and its first write: the move plans again from a new read.
var errReplan = errors.New("the workload changed while its move was planned")

// ErrNoSuspension is a binding whose API has no spec.suspension.scheduling
// (Karmada v1.12): the server dropped it from the first write.
var ErrNoSuspension = errors.New("the API server dropped spec.suspension.scheduling from the binding (Karmada older than v1.13 has no such field)")

// waitSafe follows the binding until, were its placement after, the ready
// replicas left would be at least the floor.
func (h *handover) waitSafe(ctx context.Context, after placement, row *rebalance.Row) error {
	return h.waitReady(ctx, after, h.floor, row)
}

// waitReady follows the binding until at least want replicas are ready
// within after.
func (h *handover) waitReady(ctx context.Context, after placement, want int32, row *rebalance.Row) error {
	var last int32
	var changed error
	b, err := h.api.follow(ctx, h.ns, h.name, func(b *workv1alpha2.ResourceBinding) bool {
		if changed = h.unchanged(b); changed != nil {
			return true
		}
		last = readyWithin(rebalance.ReadyReplicas(b.Spec, b.Status), after)
		return last >= want
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("following %s: %w", rebalance.BindingRef(h.t.Workload), err)
	}
	if changed != nil {
		return changed
	}
	h.b = b
	row.Message = fmt.Sprintf("%d ready of the %d kept", last, want)
	return nil
}

// release lifts the suspension with a fresh trigger in one write, after
// the server's clock passed the last schedule.
func (h *handover) release(ctx context.Context) (metav1.Time, error) {
	var at metav1.Time
	written, err := writeGuarded(ctx, h.api, h.b, func(b *workv1alpha2.ResourceBinding) ([]byte, error) {
		l, _ := readLedger(b)
		if l == nil || !b.Spec.SchedulingSuspended() {
			return nil, fmt.Errorf("someone else lifted the suspension of %s during the move", rebalance.BindingRef(h.t.Workload))
		}
		if err := h.unchanged(b); err != nil {
			return nil, err
		}
		last := time.Time{}
		if b.Status.LastScheduledTime != nil {
			last = b.Status.LastScheduledTime.Time
		}
		now, err := h.m.Clock.WaitUntilAfter(ctx, last, 10*time.Second)
		if err != nil {
			return nil, fmt.Errorf("no server time after the last schedule (%v)", err)
		}
		at = metav1.NewTime(now)
		return releasePatch(b, at, h.target.clusters())
	})
	if err != nil {
		return at, err
	}
	h.b = written
	return at, nil
}

// confirm follows the binding until the scheduler answered the release's
// trigger (within answerCtx, the move's own bound), then with WaitReady
// until its replicas are ready (within ctx, the run's), and tells on the
// row what the scheduler chose next to the prediction.
func (h *handover) confirm(answerCtx, ctx context.Context, row *rebalance.Row, at metav1.Time) {
	written := h.b.Generation
	var obs rebalance.Observation
	b, err := h.api.follow(answerCtx, h.ns, h.name, func(b *workv1alpha2.ResourceBinding) bool {
		obs = rebalance.ClassifyOutcome(b.Generation, b.Spec, b.Status, written, at)
		return obs.Outcome != rebalance.OutcomeWaiting
	})
	// The scheduler answered: the run's moves may write, and the next one
	// settle, again.
	h.leaveGate()
	h.unlock()
	row.Observation = obs
	if err != nil {
		if errors.Is(err, errDeleted) || apierrors.IsNotFound(err) {
			row.Observation = rebalance.Observation{Outcome: rebalance.OutcomeIgnored, Reason: rebalance.ReasonBindingDeleted,
				Message: "the binding was deleted before the scheduler answered"}
		}
		row.Message = joinMessage(h.summary(), row.Message)
		return
	}
	row.After = b.Spec.Clusters
	note := "as predicted"
	switch got := toPlacement(b.Spec.Clusters); {
	case h.fromCover && covered(got, h.cover):
		note = "among the replicas started first"
	case h.fromCover:
		note = "the scheduler chose replicas that were not started first"
	case !got.equal(h.target):
		note = "predicted " + rebalance.FormatPlacement(h.target.clusters())
		if !covered(got, h.cover) {
			note += "; the scheduler chose replicas that were not started first"
		}
	}
	row.Message = fmt.Sprintf("%s; scheduler chose %s, %s", h.summary(), rebalance.FormatPlacement(b.Spec.Clusters), note)
	if h.settleNote != "" {
		row.Message += "; " + h.settleNote
	}
	if h.m.WaitReady && obs.Outcome == rebalance.OutcomeScheduled {
		if _, err := h.api.follow(ctx, h.ns, h.name, func(b *workv1alpha2.ResourceBinding) bool {
			r := rebalance.CheckReady(b.Spec, b.Status)
			row.Readiness = &r
			return r.Ready
		}); err == nil {
			row.Message += "; replicas ready: " + row.Readiness.Detail
		}
	}
}

// Interrupted is a move stopped by someone else's change of its binding:
// Karmada evicting from a failing cluster, a person or an autoscaler
// changing the replicas, the suspension lifted, another process taking the
// move over, the scheduler acting on the binding. Decision is what
// recovery does with it (a let-go: never the move's own placement over
// theirs).
type Interrupted struct {
	Binding  string
	Decision Decision
}

func (e *Interrupted) Error() string {
	return fmt.Sprintf("%s: %s", e.Binding, e.Decision.Message)
}

// unchanged returns an *Interrupted when b is no longer the binding this
// move left (see Interrupted), nil while it is (Decide then only finds
// the move's own progress).
func (h *handover) unchanged(b *workv1alpha2.ResourceBinding) error {
	if h.staged.replicas == nil {
		return nil
	}
	d := decide(b, h.m.now(), h.m.owner())
	switch d.Reason {
	case ReasonHoldNotTaken, ReasonOnlyStaged, ReasonTookOver:
		return nil
	}
	return &Interrupted{Binding: rebalance.BindingRef(h.t.Workload), Decision: d}
}

func (h *handover) summary() string {
	return fmt.Sprintf("made before break: staged %s in %d step(s), kept %d ready", rebalance.FormatPlacement(h.cover.clusters()), h.steps, h.floor)
}

// covered reports whether every replica of got was in cover.
func covered(got, cover placement) bool {
	for name, n := range got.replicas {
		if n > cover.get(name) {
			return false
		}
	}
	return true
}
