package daemon

import (
	"context"
	"fmt"
	"time"
)

// ShutdownBudget is all the time a command or a daemon gives itself, once
// ctx has ended (Ctrl-C, SIGTERM), for what it still does on the way out:
// the write in flight, a record's last status, the events of the last pass
// and the Lease's release share it. Past it they are given up and said to
// be so: the command ends within about a second of the signal even when the
// API server hangs, at the price of a Lease that a standby must wait out.
const ShutdownBudget = time.Second

// ErrShutdownBudget is the cause of a shutdown context that ran out.
var ErrShutdownBudget = fmt.Errorf("the shutdown budget of %s after the stop request ran out", ShutdownBudget)

// shutdownKey carries the shutdown context of a run.
type shutdownKey struct{}

// WithShutdown returns ctx carrying the one shutdown context of its run:
// it does not end with ctx, but ShutdownBudget after ctx ends. Everything
// that outlives the run on purpose derives from it (Shutdown), so that the
// budget is shared, not given again to each step.
func WithShutdown(ctx context.Context) context.Context {
	if _, ok := ctx.Value(shutdownKey{}).(context.Context); ok {
		return ctx
	}
	return context.WithValue(ctx, shutdownKey{}, endsAfter(ctx, ShutdownBudget))
}

// Shutdown returns the shutdown context that ctx, or a context it derives
// from, carries; without one, a context ending ShutdownBudget after ctx.
// Its values are ctx's.
func Shutdown(ctx context.Context) context.Context {
	if shutdown, ok := ctx.Value(shutdownKey{}).(context.Context); ok {
		return shutdown
	}
	return endsAfter(ctx, ShutdownBudget)
}

// endsAfter returns a context with ctx's values that ends budget after ctx
// ends.
func endsAfter(ctx context.Context, budget time.Duration) context.Context {
	shutdown, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	context.AfterFunc(ctx, func() {
		time.AfterFunc(budget, func() { cancel(ErrShutdownBudget) })
	})
	return shutdown
}
