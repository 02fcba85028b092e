package harness

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// MeasureLockEnv names a file that benchmarks sharing a machine lock around
// what they time. Two benchmarks can then set up their fleets side by side
// (slower, but nothing is timed there) and measure one at a time.
const MeasureLockEnv = "REBALANCE_BENCH_LOCK"

// MeasureLock holds the file named by $REBALANCE_BENCH_LOCK locked until the
// returned function is called; without the variable it does nothing.
func MeasureLock(tb testing.TB) (unlock func()) {
	tb.Helper()
	path := os.Getenv(MeasureLockEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatalf("open %s (%s): %v", path, MeasureLockEnv, err)
	}
	start := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		tb.Fatalf("lock %s (%s): %v", path, MeasureLockEnv, err)
	}
	if waited := time.Since(start); waited > time.Second {
		fmt.Fprintf(os.Stderr, "waited %s for %s before measuring\n", waited.Round(time.Second), path)
	}
	return func() { _ = f.Close() }
}
