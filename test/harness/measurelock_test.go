package harness

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Without $REBALANCE_BENCH_LOCK nothing is locked; with it, a second holder
// waits until the first lets go.
func TestMeasureLock(t *testing.T) {
	t.Run("unset", func(t *testing.T) {
		t.Setenv(MeasureLockEnv, "")
		MeasureLock(t)()
	})
	t.Run("set", func(t *testing.T) {
		t.Setenv(MeasureLockEnv, filepath.Join(t.TempDir(), "measure.lock"))
		unlock := MeasureLock(t)
		second := make(chan struct{})
		go func() {
			MeasureLock(t)()
			close(second)
		}()
		select {
		case <-second:
			t.Fatal("the second holder did not wait for the first")
		case <-time.After(200 * time.Millisecond):
		}
		unlock()
		select {
		case <-second:
		case <-time.After(5 * time.Second):
			assert.Fail(t, "the second holder did not get the lock after the first let go")
		}
	})
}
