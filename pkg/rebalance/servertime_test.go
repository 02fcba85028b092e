package rebalance

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeLocal is a client clock that moves only when told, or when the
// ServerClock sleeps.
type fakeLocal struct{ now time.Time }

func newTestClock(local *fakeLocal) *ServerClock {
	c := NewServerClock()
	c.local = func() time.Time { return local.now }
	c.sleep = func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		local.now = local.now.Add(d)
		return nil
	}
	return c
}

func TestServerClockNow(t *testing.T) {
	server := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	// The client clock is an hour behind: it must not matter.
	base := server.Add(-time.Hour).Add(300 * time.Millisecond)

	tests := []struct {
		name string
		// observe lists, in order, how far into the test each response
		// arrived and the Date it carried.
		observe []struct {
			at   time.Duration
			date time.Time
		}
		now    time.Duration
		want   time.Time
		wantOK bool
	}{
		{name: "nothing observed"},
		{
			name: "elapsed whole seconds are added",
			observe: []struct {
				at   time.Duration
				date time.Time
			}{{0, server}},
			now: 2500 * time.Millisecond, want: server.Add(2 * time.Second), wantOK: true,
		},
		{
			name: "less than a second adds nothing",
			observe: []struct {
				at   time.Duration
				date time.Time
			}{{0, server}},
			now: 999 * time.Millisecond, want: server, wantOK: true,
		},
		{
			name: "a later response proves a later time",
			observe: []struct {
				at   time.Duration
				date time.Time
			}{{0, server}, {100 * time.Millisecond, server.Add(time.Second)}},
			now: 200 * time.Millisecond, want: server.Add(time.Second), wantOK: true,
		},
		{
			name: "an older response, say a cached one, changes nothing",
			observe: []struct {
				at   time.Duration
				date time.Time
			}{{0, server}, {3 * time.Second, server.Add(-time.Minute)}},
			now: 3 * time.Second, want: server.Add(3 * time.Second), wantOK: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := &fakeLocal{now: base}
			c := newTestClock(local)
			for _, o := range tt.observe {
				local.now = base.Add(o.at)
				c.Observe(o.date)
			}
			local.now = base.Add(tt.now)
			got, ok := c.Now()
			assert.Equal(t, tt.wantOK, ok)
			assert.True(t, tt.want.Equal(got), "got %s, want %s", got, tt.want)
		})
	}
}

func TestServerClockWaitUntilAfter(t *testing.T) {
	server := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		after     time.Time
		max       time.Duration
		want      time.Time
		wantSlept time.Duration
		wantErr   error
	}{
		{name: "already past", after: server.Add(-time.Second), max: time.Second, want: server},
		{name: "same second waits for the next", after: server.Add(400 * time.Millisecond), max: 5 * time.Second, want: server.Add(time.Second), wantSlept: 750 * time.Millisecond},
		{name: "ahead by two seconds", after: server.Add(2 * time.Second), max: 5 * time.Second, want: server.Add(3 * time.Second), wantSlept: 2750 * time.Millisecond},
		{name: "too far ahead", after: server.Add(time.Minute), max: 5 * time.Second, wantErr: errWaitTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := &fakeLocal{now: time.Unix(0, 0)}
			c := newTestClock(local)
			c.Observe(server)
			local.now = local.now.Add(250 * time.Millisecond)
			start := local.now

			got, err := c.WaitUntilAfter(context.Background(), tt.after, tt.max)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.True(t, tt.want.Equal(got), "got %s, want %s", got, tt.want)
			assert.Equal(t, tt.wantSlept, local.now.Sub(start))
		})
	}
}

func TestServerClockWaitNeedsAResponse(t *testing.T) {
	c := newTestClock(&fakeLocal{now: time.Unix(0, 0)})
	_, err := c.WaitUntilAfter(context.Background(), time.Unix(0, 0), time.Second)
	require.ErrorIs(t, err, errNoServerTime)
}

func TestServerClockWrapReadsDateHeaders(t *testing.T) {
	date := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", date.Format(http.TimeFormat))
		w.WriteHeader(http.StatusNotFound) // error answers carry a Date too
	}))
	defer server.Close()

	c := NewServerClock()
	client := &http.Client{Transport: c.Wrap(http.DefaultTransport)}
	resp, err := client.Get(server.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	got, ok := c.Now()
	require.True(t, ok)
	// Real time passes during the test; allow a second or two.
	assert.False(t, got.Before(date))
	assert.True(t, got.Before(date.Add(3*time.Second)), "got %s", got)
}
