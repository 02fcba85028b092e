package predict

import (
	"context"
	"time"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// ReadAhead reads the bindings and clusters of a scope in the background,
// while the caller still resolves which workloads it will predict: where
// the scope is known before the workloads are (the namespace a selection
// is in), the LIST of the workloads and the LISTs of the bindings take about
// the longer of the two instead of their sum.
type ReadAhead struct {
	scope  Scope
	done   chan struct{}
	in     Input
	err    error
	cancel context.CancelFunc
}

// StartReadAhead starts reading scope from source, until deadline or the
// end of ctx. The caller stops it with Stop once it has what it needs.
func StartReadAhead(ctx context.Context, deadline time.Time, source Source, scope Scope) *ReadAhead {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	r := &ReadAhead{scope: scope, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(r.done)
		r.in, r.err = source.ReadScope(ctx, scope)
	}()
	return r
}

// Input returns what was read ahead when it covers the scope of targets,
// waiting for the read to end. ok is false when it does not (the read is
// then stopped, and the caller reads for itself) or r is nil.
func (r *ReadAhead) Input(ctx context.Context, targets []rebalance.Target, allNamespaces bool) (in Input, ok bool, err error) {
	if r == nil {
		return Input{}, false, nil
	}
	if !r.scope.Covers(ScopeOf(targets, allNamespaces)) {
		r.Stop()
		return Input{}, false, nil
	}
	select {
	case <-r.done:
		return r.in, true, r.err
	case <-ctx.Done():
		r.Stop()
		return Input{}, true, ctx.Err()
	}
}

// Stop ends the read if it still runs, and waits for it, so that no request
// of it is left behind the caller. It can be called more than once, and on
// a nil ReadAhead.
func (r *ReadAhead) Stop() {
	if r == nil {
		return
	}
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		// A transport that ignores cancellation must not hold the caller.
	}
}
