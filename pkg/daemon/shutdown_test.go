package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShutdownIsOneBudgetSharedByTheRun: the shutdown context outlives its
// run by ShutdownBudget, once, however many steps ask for it.
func TestShutdownIsOneBudgetSharedByTheRun(t *testing.T) {
	run, stop := context.WithCancel(context.Background())
	ctx := WithShutdown(run)
	shutdown := Shutdown(ctx)
	assert.Same(t, shutdown, Shutdown(WithShutdown(ctx)), "a run has one shutdown context")
	assert.Same(t, shutdown, Shutdown(context.WithoutCancel(ctx)), "a detached context shares its run's budget")
	require.NoError(t, shutdown.Err(), "the budget starts with the stop request")

	stopped := time.Now()
	stop()
	assert.NoError(t, shutdown.Err(), "the budget is not spent at once")
	select {
	case <-shutdown.Done():
	case <-time.After(10 * ShutdownBudget):
		require.FailNow(t, "the shutdown context never ended")
	}
	assert.GreaterOrEqual(t, time.Since(stopped), ShutdownBudget)
	assert.ErrorIs(t, context.Cause(shutdown), ErrShutdownBudget)
}
