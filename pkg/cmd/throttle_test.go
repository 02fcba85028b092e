package cmd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

func TestStopAwareLimiter(t *testing.T) {
	t.Run("throttles while the run goes on", func(t *testing.T) {
		g := &requestGuard{}
		config := &rest.Config{QPS: 0.1, Burst: 1}
		g.limitConfig(config)
		run, stop := context.WithCancel(context.Background())
		defer stop()
		g.runs(run)
		limiter := config.RateLimiter
		require.NoError(t, limiter.Wait(context.Background()), "the burst lets the first request go")
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		assert.Error(t, limiter.Wait(ctx), "the second waits ten seconds for its token")
	})
	t.Run("lets the requests after the stop go at once", func(t *testing.T) {
		g := &requestGuard{}
		config := &rest.Config{QPS: 0.1, Burst: 1}
		g.limitConfig(config)
		run, stop := context.WithCancel(context.Background())
		g.runs(run)
		limiter := config.RateLimiter
		require.NoError(t, limiter.Wait(context.Background()))
		waited := make(chan error, 1)
		go func() { waited <- limiter.Wait(context.Background()) }()
		time.Sleep(50 * time.Millisecond)
		stop()
		select {
		case err := <-waited:
			assert.NoError(t, err, "a request held when the stop came goes")
		case <-time.After(2 * time.Second):
			t.Fatal("a request held when the stop came still waits for its token")
		}
		assert.NoError(t, limiter.Wait(context.Background()), "a request after the stop goes")
		assert.True(t, limiter.TryAccept())
	})
	t.Run("discovery keeps the QPS it sets after the wrapper", func(t *testing.T) {
		g := &requestGuard{}
		config := &rest.Config{QPS: 1, Burst: 1}
		g.limitConfig(config)
		config.QPS, config.Burst = 50, 300
		assert.Equal(t, float32(50), config.RateLimiter.QPS())
	})
	t.Run("a negative QPS asks for no limiter", func(t *testing.T) {
		config := &rest.Config{QPS: -1}
		(&requestGuard{}).limitConfig(config)
		assert.Nil(t, config.RateLimiter)
	})
}
