package cmd

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testDeadlines stands in for deadlineContext in a test: the contexts it
// makes end with context.DeadlineExceeded when the test calls expire, not
// after a wall-clock time, so a case about --timeout running out during one
// phase does not depend on how fast a loaded machine gets through the others.
type testDeadlines struct {
	mu      sync.Mutex
	expired bool
	live    []*testDeadline
}

// install makes the command use d for --timeout until the test ends.
func (d *testDeadlines) install(t *testing.T) {
	saved := deadlineContext
	deadlineContext = d.withDeadline
	t.Cleanup(func() { deadlineContext = saved })
}

func (d *testDeadlines) withDeadline(parent context.Context, _ time.Time) (context.Context, context.CancelFunc) {
	c := &testDeadline{parent: parent, done: make(chan struct{})}
	stop := context.AfterFunc(parent, func() { c.end(parent.Err()) })
	d.mu.Lock()
	expired := d.expired
	if !expired {
		d.live = append(d.live, c)
	}
	d.mu.Unlock()
	if expired {
		c.end(context.DeadlineExceeded)
	}
	return c, func() { stop(); c.end(context.Canceled) }
}

// expire ends every context made so far, and makes later ones end at once.
func (d *testDeadlines) expire() {
	d.mu.Lock()
	d.expired = true
	live := d.live
	d.live = nil
	d.mu.Unlock()
	for _, c := range live {
		c.end(context.DeadlineExceeded)
	}
}

// testDeadline is a context whose deadline passes when its test says so.
type testDeadline struct {
	parent context.Context
	done   chan struct{}
	once   sync.Once
	err    atomic.Value
}

func (c *testDeadline) end(err error) {
	c.once.Do(func() {
		c.err.Store(err)
		close(c.done)
	})
}

// Deadline reports none: the clock has no say (client-go's rate limiter,
// for one, refuses to wait past a deadline it is shown).
func (c *testDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *testDeadline) Done() <-chan struct{}       { return c.done }
func (c *testDeadline) Value(key any) any           { return c.parent.Value(key) }
func (c *testDeadline) Err() error {
	if err, ok := c.err.Load().(error); ok {
		return err
	}
	return nil
}

// expiring ends the run's --timeout when the server gets the request, from
// its nth on, and then answers it with h.
func (s *fakeServer) expiring(nth int32, h http.HandlerFunc) http.HandlerFunc {
	var calls atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) >= nth {
			s.deadlines.expire()
		}
		h(w, r)
	}
}
