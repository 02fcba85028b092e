package cmd

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// stopAwareLimiter throttles a client as its --qps and --burst say while the
// command runs. Once the run has been asked to stop (Ctrl-C, SIGTERM), the
// few requests that still go out on purpose - the write in flight, a
// record's last status, the last events, the Lease's release - are no
// longer held behind it: the shutdown budget bounds them, and at --qps 1 two
// of them would wait out the whole budget in the limiter and be cut before
// they were sent. Requests of the run itself end with it anyway (the
// guard), so nothing else escapes the limit.
//
// The token bucket is made at the first request, from the QPS and burst of
// the config the limiter was put in: cli-runtime's discovery client sets its
// own QPS and burst on that config after our wrapper has run, and keeps
// them.
type stopAwareLimiter struct {
	guard  *requestGuard
	config *rest.Config

	once   sync.Once
	bucket flowcontrol.RateLimiter
}

// limitConfig puts a stopAwareLimiter in config unless it has a limiter of
// its own or asks for none (a negative QPS).
func (g *requestGuard) limitConfig(config *rest.Config) {
	if config.RateLimiter != nil || config.QPS < 0 {
		return
	}
	config.RateLimiter = &stopAwareLimiter{guard: g, config: config}
}

func (l *stopAwareLimiter) limiter() flowcontrol.RateLimiter {
	l.once.Do(func() {
		qps, burst := l.config.QPS, l.config.Burst
		if qps == 0 {
			qps = rest.DefaultQPS
		}
		if burst == 0 {
			burst = rest.DefaultBurst
		}
		l.bucket = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	})
	return l.bucket
}

// stopping returns the run's context once it has ended, nil before or
// without a run.
func (l *stopAwareLimiter) stopping() context.Context {
	l.guard.mu.Lock()
	defer l.guard.mu.Unlock()
	return l.guard.run
}

// Wait holds a request until the bucket lets it go, or lets it go at once
// when the run has been asked to stop, meanwhile too.
func (l *stopAwareLimiter) Wait(ctx context.Context) error {
	run := l.stopping()
	if run == nil {
		return l.limiter().Wait(ctx)
	}
	if run.Err() != nil {
		return nil
	}
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(run, cancel)()
	err := l.limiter().Wait(waitCtx)
	if err != nil && ctx.Err() == nil && run.Err() != nil {
		return nil
	}
	return err
}

func (l *stopAwareLimiter) TryAccept() bool {
	if run := l.stopping(); run != nil && run.Err() != nil {
		return true
	}
	return l.limiter().TryAccept()
}

func (l *stopAwareLimiter) Accept() {
	if run := l.stopping(); run != nil && run.Err() != nil {
		return
	}
	l.limiter().Accept()
}

func (l *stopAwareLimiter) Stop() { l.limiter().Stop() }

func (l *stopAwareLimiter) QPS() float32 { return l.limiter().QPS() }
