// Package memlimit gives the plugin's process a soft memory limit, so that a
// run over a large fleet holds less memory at its peak, at no cost to the
// runs that stay well below it.
//
// Go's collector lets the heap grow to twice what is live (GOGC=100) before
// it collects again. A plan over 10,000 workloads has about 45 MiB live at
// its end, so the heap reaches about 90 MiB. A soft limit
// (runtime/debug.SetMemoryLimit) makes the collector run earlier only while
// the process nears the limit; below it nothing changes, unlike a lower
// GOGC, which collects twice as often for the whole run (GOGC=50 made plan
// 1.4-1.8 times slower on a 2,000-workload fleet). Should the live heap
// itself come close to the limit (a much larger fleet), the collector would
// run over and over to stay under it; the limit is then lifted, and the
// process runs as it would without one.
package memlimit

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Default is the soft limit: a little under twice the live heap of a plan
// over 10,000 workloads (docs/performance.md), far above what a run over a
// few hundred workloads uses.
const Default = 80 << 20

// liftFraction is how full of live objects the limit may be before it is
// lifted: at 3/4 the collector has a quarter of the limit to work with, and
// runs up to about three times as often as GOGC=100 would near the peak.
const liftFraction = 0.75

// Apply sets the soft limit unless the user tuned the collector with GOGC or
// GOMEMLIMIT (theirs to set; then nothing changes), and watches the live heap
// after every collection to lift the limit when the live heap reaches
// liftFraction of it. It returns whether the limit was set. getenv is
// os.Getenv outside tests.
func Apply(getenv func(string) string, limit int64) bool {
	if !wanted(getenv) {
		return false
	}
	debug.SetMemoryLimit(limit)
	watch(int64(float64(limit) * liftFraction))
	return true
}

// ApplyDefault is Apply with the environment and the Default limit.
func ApplyDefault() bool { return Apply(os.Getenv, Default) }

// wanted reports whether the collector is left to the plugin.
func wanted(getenv func(string) string) bool {
	return getenv("GOGC") == "" && getenv("GOMEMLIMIT") == ""
}

// lifted is set once the limit has been lifted.
var lifted atomic.Bool

// Lifted reports whether a limit set by Apply was lifted because the live
// heap grew close to it.
func Lifted() bool { return lifted.Load() }

// watch checks the live heap after each collection: a finalizer on an
// unreachable sentinel runs once the collector has found it garbage, and
// arms a new sentinel for the next cycle. No goroutine polls.
func watch(threshold int64) {
	// It holds a pointer, so that it is never packed with other small
	// objects by the tiny allocator (whose finalizers may never run).
	type sentinel struct {
		_ *int
		_ [8]byte
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var arm func()
	arm = func() {
		s := &sentinel{}
		runtime.SetFinalizer(s, func(*sentinel) {
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 && int64(sample[0].Value.Uint64()) >= threshold {
				debug.SetMemoryLimit(math.MaxInt64)
				lifted.Store(true)
				return
			}
			arm()
		})
	}
	arm()
}
