package cmd

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// TestGuardEndsWhatTheRunDoesNotOwn checks which requests the end of a run
// (Ctrl-C) and the end of the start-up (--timeout) cut short, against a
// server that answers only when the test lets it, after they ended.
func TestGuardEndsWhatTheRunDoesNotOwn(t *testing.T) {
	type ctxOf func(run context.Context) context.Context
	background := func(context.Context) context.Context { return context.Background() }
	detached := func(run context.Context) context.Context { return context.WithoutCancel(run) }
	readAhead := func(run context.Context) context.Context { return outlivingStartup(context.WithoutCancel(run)) }
	tests := []struct {
		name        string
		ctx         ctxOf
		outlivesRun bool
		end         string // "run" or "startup"
		cut         bool
	}{
		{name: "a request without a context of the command's (discovery) ends with the run", ctx: background, end: "run", cut: true},
		{name: "a request detached from the run on purpose finishes", ctx: detached, end: "run", cut: false},
		{name: "a request of a client that outlives the run finishes", ctx: background, outlivesRun: true, end: "run", cut: false},
		{name: "a start-up request ends with --timeout", ctx: detached, end: "startup", cut: true},
		{name: "the read-ahead outlives the start-up", ctx: readAhead, end: "startup", cut: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer := make(chan struct{})
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-answer:
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{}`))
				case <-r.Context().Done():
				}
			}))
			defer server.Close()
			defer close(answer)

			guard := &requestGuard{}
			config := &rest.Config{Host: server.URL}
			if tt.outlivesRun {
				guard.wrapConfigOutlivingRun(config)
			} else {
				guard.wrapConfig(config)
			}
			client, err := rest.HTTPClientFor(config)
			require.NoError(t, err)

			run, interrupt := context.WithCancel(context.Background())
			defer interrupt()
			run = guard.runs(run)
			// The start-up is bound only where its end is the case.
			startup, expire := context.WithCancel(run)
			defer expire()
			if tt.end == "startup" {
				defer guard.bind(guard.bind(startup))
			}

			req, err := http.NewRequestWithContext(tt.ctx(run), http.MethodGet, server.URL+"/api", nil)
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() {
				resp, err := client.Do(req)
				if err == nil {
					_ = resp.Body.Close()
				}
				done <- err
			}()
			time.Sleep(50 * time.Millisecond) // the request is waiting for its answer
			if tt.end == "run" {
				interrupt()
			} else {
				expire()
			}
			select {
			case err := <-done:
				require.True(t, tt.cut, "the request was cut short: %v", err)
				assert.True(t, errors.Is(err, context.Canceled), "%v", err)
			case <-time.After(500 * time.Millisecond):
				require.False(t, tt.cut, "the request still waited for its answer after the %s ended", tt.end)
				answer <- struct{}{}
				require.NoError(t, <-done)
			}
		})
	}
}
