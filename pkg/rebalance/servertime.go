package rebalance

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// ServerClock tells the API server's time from the Date headers of its
// responses. The trigger must be compared with times the scheduler and the
// API server wrote, so the client's own clock, which may lag or lead, is
// never used as a time; it only measures how long ago a Date was received.
//
// A Date header has one-second precision and is written before the response
// leaves the server, so when a response dated D arrives at local instant r,
// the server's clock reads at least D + (now - r) at any later instant. Now
// returns the best such lower bound over all responses seen, truncated to the
// second: a time the server has certainly reached.
type ServerClock struct {
	mu sync.Mutex
	// date is the Date of the observation that gives the best lower bound;
	// received is the local instant (with its monotonic reading) it arrived.
	date, received time.Time
	// local reads the client's clock; tests replace it.
	local func() time.Time
	// sleep waits for d or until ctx ends; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// NewServerClock returns a clock that has seen no response yet.
func NewServerClock() *ServerClock {
	return &ServerClock{local: time.Now, sleep: sleepContext}
}

// Wrap returns a round tripper that records the Date header of every
// response passing through rt. It suits rest.Config.Wrap.
func (c *ServerClock) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			if date, parseErr := http.ParseTime(resp.Header.Get("Date")); parseErr == nil {
				c.Observe(date)
			}
		}
		return resp, err
	})
}

// Observe records that a response dated date has just arrived.
func (c *ServerClock) Observe(date time.Time) {
	received := c.local()
	c.mu.Lock()
	defer c.mu.Unlock()
	// Keep the observation that proves the later server time now.
	if c.date.IsZero() || !date.Before(c.boundLocked(received)) {
		c.date, c.received = date.UTC(), received
	}
}

// Now returns the latest second the server's clock has certainly reached,
// and false when no response has been seen yet.
func (c *ServerClock) Now() (time.Time, bool) {
	now := c.local()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.date.IsZero() {
		return time.Time{}, false
	}
	return c.boundLocked(now), true
}

// WaitUntilAfter blocks until the server's clock has certainly passed the
// second of t, and returns that server time (strictly after t at one-second
// precision). It gives up when ctx ends or when that takes longer than max.
func (c *ServerClock) WaitUntilAfter(ctx context.Context, t time.Time, max time.Duration) (time.Time, error) {
	target := t.Truncate(time.Second).Add(time.Second)
	c.mu.Lock()
	if c.date.IsZero() {
		c.mu.Unlock()
		return time.Time{}, errNoServerTime
	}
	// Server time advances with the local monotonic clock between
	// observations, so the remaining wait is known without asking the server.
	wait := target.Sub(c.date.Add(c.local().Sub(c.received)))
	c.mu.Unlock()
	if wait <= 0 {
		now, _ := c.Now()
		return now, nil
	}
	if wait > max {
		return time.Time{}, errWaitTooLong
	}
	if err := c.sleep(ctx, wait); err != nil {
		return time.Time{}, err
	}
	now, _ := c.Now()
	return now, nil
}

// boundLocked returns the server time proven at local instant at.
func (c *ServerClock) boundLocked(at time.Time) time.Time {
	elapsed := at.Sub(c.received)
	if elapsed < 0 {
		elapsed = 0
	}
	return c.date.Add(elapsed).Truncate(time.Second)
}

type clockError string

func (e clockError) Error() string { return string(e) }

const (
	// errNoServerTime: nothing has been read from the server yet.
	errNoServerTime = clockError("no response from the API server has carried a Date header yet")
	// errWaitTooLong: the server's clock is too far behind the time to pass.
	errWaitTooLong = clockError("the API server's clock would take too long to pass that time")
)

// roundTripperFunc adapts a function to http.RoundTripper.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// sleepContext sleeps for d unless ctx ends first.
func sleepContext(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
