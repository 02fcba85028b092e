package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/wait"
)

func TestRetryStartup(t *testing.T) {
	fast := StartupBackoff
	StartupBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30, Cap: time.Millisecond}
	t.Cleanup(func() { StartupBackoff = fast })

	passing, refused := errors.New("an error on the server"), errors.New("forbidden")
	retriable := func(err error) bool { return errors.Is(err, passing) }
	tests := []struct {
		name      string
		answers   []error
		retriable func(error) bool
		want      error
		calls     int
		logged    string
	}{
		{name: "first attempt", answers: []error{nil}, retriable: retriable, calls: 1},
		{name: "passing faults are retried", answers: []error{passing, passing, passing, nil}, retriable: retriable, calls: 4,
			logged: "reading the lease failed, retrying"},
		{name: "a refusal ends it", answers: []error{passing, refused, nil}, retriable: retriable, want: refused, calls: 2},
		{name: "nothing retried without a predicate", answers: []error{passing, nil}, want: passing, calls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			calls := 0
			err := RetryStartup(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), "reading the lease", tt.retriable, func() error {
				calls++
				return tt.answers[calls-1]
			})
			assert.Equal(t, tt.want, err)
			assert.Equal(t, tt.calls, calls)
			assert.Contains(t, logs.String(), tt.logged)
		})
	}
}

func TestRetryStartupEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := RetryStartup(ctx, nil, "listing bindings", func(error) bool { return true }, func() error {
		if calls++; calls == 2 {
			cancel()
		}
		return errors.New("service unavailable")
	})
	assert.NoError(t, err, "a stop during the retries is no start-up failure")
	assert.Equal(t, 2, calls)
}
