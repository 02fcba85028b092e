package handover

import (
	"context"
	"sync"
)

// Why the moves of a run share a Gate.
//
// A fresh reschedule of a workload whose policy weighs clusters by their
// room (dynamic weights, Aggregated) depends on what the members' estimators
// answer when karmada-scheduler asks. The moves of a run change that room:
// a staging write starts replicas on the gaining clusters, a settle write
// stops them on the losing ones. A move released while another move's write
// lands may be rescheduled onto a room its recheck never saw, and its
// replicas then move in one write after all (seen in a waved batch of 50
// before the moves were ordered).
//
// What does not change the room is a release: a settled binding's
// spec.clusters already is what the scheduler will choose, so its answer
// starts and stops nothing. So the Gate lets any number of writes through
// together, and any number of releases (from the last recheck to the
// scheduler's answer) together, but never a write during a release: the
// moves of a batch stage, wait for their replicas and settle side by side,
// and release in rounds, instead of one after another.

// Gate orders the writes that change the members' room against the
// release windows of a run's moves; the zero value is open. Nil means no
// order.
type Gate struct {
	mu sync.Mutex
	// changed is closed, and replaced, whenever the gate opens to someone
	// new.
	changed chan struct{}
	// mode is who holds the gate (gateIdle when nobody does), holders how
	// many, waiting how many wait in each mode.
	mode    gateMode
	holders int
	waiting [gateModes]int
	// turn is the mode the gate opens to next when both wait, so that
	// neither a stream of writes nor of releases keeps the other out.
	turn gateMode
	// moves counts the moves of the run between their first write and
	// their end (begin, end).
	moves int
}

// begin and end count a move of the run in and out (moving).
func (g *Gate) begin() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.moves++
	g.mu.Unlock()
}

func (g *Gate) end() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.moves--
	g.mu.Unlock()
}

// moving is how many moves of the run are under way; 0 without a Gate.
func (g *Gate) moving() int {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.moves
}

// NewGate returns an open Gate for the moves of one run.
func NewGate() *Gate { return &Gate{} }

type gateMode int

const (
	gateWrite gateMode = iota
	gateRelease
	gateModes
	gateIdle gateMode = -1
)

func (m gateMode) other() gateMode { return 1 - m }

// enter waits until the gate lets mode through, or ctx ends.
func (g *Gate) enter(ctx context.Context, mode gateMode) error {
	g.mu.Lock()
	if g.changed == nil {
		g.changed, g.mode = make(chan struct{}), gateIdle
	}
	g.waiting[mode]++
	for !g.admits(mode) {
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			g.mu.Lock()
			g.waiting[mode]--
			g.signal()
			g.mu.Unlock()
			return ctx.Err()
		}
		g.mu.Lock()
	}
	g.waiting[mode]--
	g.mode = mode
	g.holders++
	g.mu.Unlock()
	return nil
}

// admits says whether mode may go through now: the gate is held in that
// mode and nobody waits in the other, or it is idle and it is mode's turn
// or nobody waits for the turn.
func (g *Gate) admits(mode gateMode) bool {
	switch g.mode {
	case mode:
		return g.waiting[mode.other()] == 0
	case gateIdle:
		return g.turn == mode || g.waiting[g.turn] == 0
	}
	return false
}

// leave lets the gate go; the last holder opens it to the other mode.
func (g *Gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holders--
	if g.holders > 0 {
		return
	}
	g.turn = g.mode.other()
	g.mode = gateIdle
	g.signal()
}

// signal wakes everyone waiting to look again.
func (g *Gate) signal() {
	close(g.changed)
	g.changed = make(chan struct{})
}
