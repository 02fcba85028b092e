package handover

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entered reports whether enter(mode) gets through within a short wait.
func entered(g *Gate, mode gateMode) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	return g.enter(ctx, mode) == nil
}

func TestGate(t *testing.T) {
	tests := []struct {
		name string
		// held are the modes already through the gate, in order; then
		// waiting enter and give up (their ctx ends) before try.
		held    []gateMode
		try     gateMode
		through bool
	}{
		{name: "an open gate lets a write through", try: gateWrite, through: true},
		{name: "an open gate lets a release through", try: gateRelease, through: true},
		{name: "writes go together", held: []gateMode{gateWrite, gateWrite}, try: gateWrite, through: true},
		{name: "releases go together", held: []gateMode{gateRelease, gateRelease}, try: gateRelease, through: true},
		{name: "no write during a release", held: []gateMode{gateRelease}, try: gateWrite},
		{name: "no release during a write", held: []gateMode{gateWrite}, try: gateRelease},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGate()
			for _, m := range tt.held {
				require.True(t, entered(g, m))
			}
			assert.Equal(t, tt.through, entered(g, tt.try))
		})
	}
}

// A release waiting for the writes to end keeps new writes out, and is let
// through when the last write leaves; the writes waiting then go after it.
func TestGateTakesTurns(t *testing.T) {
	g := NewGate()
	require.True(t, entered(g, gateWrite))
	release := make(chan error, 1)
	go func() { release <- g.enter(context.Background(), gateRelease) }()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.waiting[gateRelease] == 1
	}, time.Second, time.Millisecond)
	assert.False(t, entered(g, gateWrite), "a write waits while a release waits for its turn")

	write := make(chan error, 1)
	go func() { write <- g.enter(context.Background(), gateWrite) }()
	g.leave()
	require.NoError(t, <-release, "the last write out lets the release in")
	select {
	case <-write:
		t.Fatal("a write went through during the release")
	case <-time.After(50 * time.Millisecond):
	}
	g.leave()
	require.NoError(t, <-write, "the release out lets the waiting write in")
	g.leave()
	assert.True(t, entered(g, gateRelease), "idle again")
}

// In waves one move of a run at a time goes from its settle write to the
// scheduler's answer; another move's lock (and so its writes) waits for
// it, or ends with its context.
func TestSerialKeepsOneMoveInItsSettle(t *testing.T) {
	m := &Mover{Serial: make(chan struct{}, 1)}
	a, b := &handover{m: m}, &handover{m: m}
	require.NoError(t, a.lock(context.Background()))
	require.NoError(t, a.lock(context.Background()), "taking it again while held is a no-op")
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, b.lock(short), context.DeadlineExceeded)
	a.unlock()
	a.unlock()
	require.NoError(t, b.lock(context.Background()))
	b.unlock()
}
