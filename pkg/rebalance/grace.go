package rebalance

import (
	"context"
	"time"
)

// WriteGrace is how long a write already on its way may still take once the
// run's context has ended (Ctrl-C, --timeout). A PATCH cut off in flight may
// land on the server all the same, and the run would then stop without
// knowing whether the binding holds its trigger: its row and the record's
// status would leave out a trigger the scheduler acts on. A write answered
// within the grace is known; only a server that hangs makes the run wait for
// it, and no longer than this.
const WriteGrace = time.Second

// WriteContext returns the context for one write that starts under ctx: it
// carries the values of ctx and ends WriteGrace after ctx does. Callers start
// no new write once ctx has ended.
func WriteContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return outliving(ctx, WriteGrace)
}

// outliving returns a context that carries the values of ctx and ends grace
// after ctx does.
func outliving(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// The timer may fire after the caller is done; cancelling twice is harmless.
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	return out, func() {
		stop()
		cancel()
	}
}
