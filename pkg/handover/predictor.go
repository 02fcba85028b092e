package handover

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Reads is what the predictions of a run's moves need from the command
// that builds the Mover: where the clusters, the estimators and the
// members' nodes and pods are read from (its kubeconfig and --estimator),
// and the Karmada release behind them. The package reads, shares and
// predicts from them itself (moveReads).
type Reads interface {
	// Source returns where to read; an error fails the read that asked.
	Source() (Source, error)
	// Release returns the control plane's Karmada release; an error
	// predicts without it.
	Release() (karmadaversion.Info, error)
}

// Source reads the clusters and estimators of a scope, and the members'
// nodes and pods (predict.Source).
type Source interface {
	ReadScope(ctx context.Context, scope predict.Scope) (predict.Input, error)
	ReadMembers(ctx context.Context, in *predict.Input)
}

// moveReadsMaxAge is how long the clusters, estimators and members read for
// the moves of a run serve further moves: every move that starts within
// it predicts from the same read (a run all at once reads once), a later
// one reads again (a wave that starts after the earlier moves released).
const moveReadsMaxAge = 10 * time.Second

// moveReads is what the make-before-break moves of one run predict from,
// read at most once every moveReadsMaxAge however many workloads move:
// the clusters and the estimators, the bindings of the run's namespaces once
// a move looks for its binding there (shared: a run above the fleet
// threshold follows its bindings with the waves' own list and watch, and
// never asks), and the members' nodes and pods once a move's placement
// depends on free capacity. Each move brings its own fresh read of its
// binding, which is all a prediction needs of bindings.
type moveReads struct {
	read func(ctx context.Context, need readNeeds) (predict.Input, error)
	// members reads the members into a read taken without them.
	members func(ctx context.Context, in *predict.Input)
	now     func() time.Time

	// wantBindings turns on at the first look for a binding in the read.
	wantBindings atomic.Bool

	mu sync.Mutex // held across a read, so moves that start together wait for one
	// last is the latest read: input renews it under mu, and readers that
	// must not wait (shared) load it without mu.
	last atomic.Pointer[takenRead]
}

// readNeeds says what a read of moveReads lists beyond the clusters and
// the estimators.
type readNeeds struct {
	// bindings lists the bindings of the run's namespaces (and the members,
	// if one of them depends on free capacity).
	bindings bool
	// members reads the members' nodes and pods whatever the bindings.
	members bool
}

// takenRead is one read of moveReads and when it was taken.
type takenRead struct {
	in predict.Input
	at time.Time
	// members is true once the read holds the members it may need: read,
	// or not needed since no estimator is consulted.
	members bool
}

// input returns the shared read, reading again once it is older than
// moveReadsMaxAge; with members, a read that holds the members' nodes and
// pods. The caller holds mu.
func (r *moveReads) input(ctx context.Context, members bool) (predict.Input, error) {
	last := r.fresh()
	switch {
	case last != nil && (!members || last.members):
		return last.in, nil
	case last != nil:
		// The read is young but was taken without the members: add them,
		// keeping its age.
		in := last.in
		r.members(ctx, &in)
		if err := ctx.Err(); err != nil {
			return in, err
		}
		r.last.Store(&takenRead{in: in, at: last.at, members: true})
		return in, nil
	}
	in, err := r.read(ctx, readNeeds{bindings: r.wantBindings.Load(), members: members})
	if err != nil {
		return in, err
	}
	r.last.Store(&takenRead{in: in, at: r.now(), members: members || in.Accurate != nil || len(in.Estimated) == 0})
	return in, nil
}

// fresh is the latest read while it is younger than moveReadsMaxAge, or nil.
func (r *moveReads) fresh() *takenRead {
	last := r.last.Load()
	if last == nil || r.now().Sub(last.at) >= moveReadsMaxAge {
		return nil
	}
	return last
}

// predictor is the Predictor of a run's moves over s's targets: one
// shared read (moveReads), one prediction per move from it and the binding
// the move just read. shared hands out the bindings of that read
// (Mover.Shared).
func (s moveSource) predictor() (predictor Predictor, shared func(context.Context, rebalance.Target) (*workv1alpha2.ResourceBinding, bool)) {
	reads := &moveReads{now: time.Now, read: s.read, members: s.members}
	predictor = func(ctx context.Context, t rebalance.Target, b *workv1alpha2.ResourceBinding) (Prediction, error) {
		reads.mu.Lock()
		defer reads.mu.Unlock()
		in, err := reads.input(ctx, predict.CapacityDependent(b))
		if err != nil {
			return Prediction{}, err
		}
		return s.predictOne(ctx, in, t, b)
	}
	shared = func(_ context.Context, t rebalance.Target) (*workv1alpha2.ResourceBinding, bool) {
		// The reads list the run's bindings from now on. Only a read
		// already taken and still fresh, without waiting: a move that
		// finds none (the run's first moves, a read in progress or
		// failing, one taken before any move asked) reads its binding
		// itself, as it would without this.
		reads.wantBindings.Store(true)
		last := reads.fresh()
		if last == nil {
			return nil, false
		}
		b, ok := last.in.Bindings[predict.Key(t.Workload.Namespace, rebalance.BindingNameFor(t.Workload))]
		return b, ok && b != nil
	}
	return predictor, shared
}

// moveSource reads what the predictions of a run's moves over targets need.
type moveSource struct {
	reads   Reads
	targets []rebalance.Target
}

// read reads the clusters and estimators, and what need asks for.
func (s moveSource) read(ctx context.Context, need readNeeds) (predict.Input, error) {
	source, err := s.reads.Source()
	if err != nil {
		return predict.Input{}, err
	}
	readCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	scope := predict.Scope{}
	if need.bindings {
		scope = predict.ScopeOf(s.targets, false)
	}
	in, err := source.ReadScope(readCtx, scope)
	if err == nil && need.members && in.Accurate == nil {
		source.ReadMembers(readCtx, &in)
		err = readCtx.Err()
	}
	return in, err
}

// members reads the members' nodes and pods into in.
func (s moveSource) members(ctx context.Context, in *predict.Input) {
	source, err := s.reads.Source()
	if err != nil {
		return // in stays without them: the prediction says which are unknown
	}
	readCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	source.ReadMembers(readCtx, in)
}

// recheckPredictor is the Predictor a move asks when the shared
// read was unsettled and just before its release (handover's settle step):
// every call reads the clusters, estimators and members afresh, since it
// must see the replicas that just started or stopped. The move brings its
// binding, so no bindings are listed.
func (s moveSource) recheckPredictor() Predictor {
	return func(ctx context.Context, t rebalance.Target, b *workv1alpha2.ResourceBinding) (Prediction, error) {
		in, err := s.read(ctx, readNeeds{members: predict.CapacityDependent(b)})
		if err != nil {
			return Prediction{}, err
		}
		return s.predictOne(ctx, in, t, b)
	}
}

// predictOne predicts one workload's fresh reschedule from in, with b as
// its binding: what a move stages.
func (s moveSource) predictOne(ctx context.Context, in predict.Input, t rebalance.Target, b *workv1alpha2.ResourceBinding) (Prediction, error) {
	p, err := s.predictFrom(ctx, in, t, b)
	if err != nil {
		return Prediction{}, err
	}
	switch p.Verdict {
	case predict.WouldMove, predict.Unchanged, predict.CannotChange:
		out := Prediction{Placements: [][]workv1alpha2.TargetCluster{p.Predicted}}
		if len(p.Alternative) > 0 {
			out.Placements = append(out.Placements, p.Alternative)
		}
		out.Unsettled = s.unsettled(ctx, in, t, b, out.Placements)
		return out, nil
	case predict.CannotPredict:
		if p.Reason == predict.ReasonReleaseDependent && len(p.Possible) > 0 {
			// The detection could only bound the release to a range whose
			// releases divide differently: stage what any of them starts,
			// release the newest one's division, and let the scheduler
			// decide among what is already running.
			return Prediction{Placements: p.Possible, ReleaseDependent: true}, nil
		}
	}
	return Prediction{Why: fmt.Sprintf("%s (%s): %s", p.Verdict, p.Reason, p.Message)}, nil
}

// predictFrom predicts t's fresh reschedule from in, with b as its only
// binding, on the detected release (none when it cannot be told).
func (s moveSource) predictFrom(ctx context.Context, in predict.Input, t rebalance.Target, b *workv1alpha2.ResourceBinding) (predict.Prediction, error) {
	in.Bindings = map[string]*workv1alpha2.ResourceBinding{predict.Key(b.Namespace, b.Name): b}
	opts := predict.Options{}
	if info, err := s.reads.Release(); err == nil {
		opts.Release = &info
	}
	predictions, err := predict.Predict(ctx, in, []rebalance.Target{t}, opts)
	if err != nil || len(predictions) != 1 {
		return predict.Prediction{}, fmt.Errorf("predicting %s: %v", t.Workload, err)
	}
	return predictions[0], nil
}

// unsettled says why the prediction (placements, from in) may not be
// what karmada-scheduler decides a moment later, or "". Two lags make the
// clusters read roomier a moment later than now: a cluster's estimator
// still counts the pods being deleted (a move's or a failover's stopped
// replicas) until they are gone, and its resource summary, refreshed only
// every status update, may still count replicas its estimator no longer
// sees. Either matters when the prediction from the clusters as they will
// read then differs. Every cluster counts, not only b's and the predicted
// ones: a cluster outside both wins the fresh reschedule once it has the
// most room.
func (s moveSource) unsettled(ctx context.Context, in predict.Input, t rebalance.Target, b *workv1alpha2.ResourceBinding, placements [][]workv1alpha2.TargetCluster) string {
	names := make(map[string]bool, len(in.Clusters))
	for _, c := range in.Clusters {
		names[c.Name] = true
	}
	var whys []string
	later := in
	if departing := predict.Departing(in, names); len(departing) > 0 {
		whys = append(whys, fmt.Sprintf("the estimator of %s still counts pods that are being deleted", strings.Join(departing, ", ")))
		gone, err := predict.Departed(in, departing)
		if err != nil {
			return whys[0]
		}
		later = gone
	}
	if stale := predict.StaleSummaries(ctx, later, b.Spec.ReplicaRequirements, names); len(stale) > 0 {
		whys = append(whys, fmt.Sprintf("the resource summary of %s still counts replicas its estimator no longer sees", strings.Join(stale, ", ")))
		later = predict.CaughtUp(later, stale)
	}
	if len(whys) == 0 {
		return ""
	}
	why := strings.Join(whys, "; ")
	p, err := s.predictFrom(ctx, later, t, b)
	if err != nil {
		return why
	}
	if !predict.SamePlacement(p.Predicted, placements[0]) {
		return why + fmt.Sprintf(" (once they caught up the scheduler would choose %s)", rebalance.FormatPlacement(p.Predicted))
	}
	return ""
}
