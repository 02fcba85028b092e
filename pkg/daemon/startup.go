package daemon

import (
	"context"
	"log/slog"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// StartupBackoff paces RetryStartup: quick at first, then every 10 seconds
// for as long as it takes.
var StartupBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 10 * time.Second}

// RetryStartup runs check, one of a daemon's start-up requests, until it
// succeeds, fails with an error that retriable does not accept, or ctx ends;
// each failure retried is logged with what. A daemon has no deadline and
// nobody at a terminal to tell: a passing fault (an apiserver restarting, a
// 500, a request timing out) must not end a process that the next attempt
// would start, while a refusal (RBAC, a server without Karmada) still ends it
// at once. A nil retriable retries nothing.
//
// It returns check's last error, or nil when ctx ended while it was retrying:
// the caller is stopping anyway.
func RetryStartup(ctx context.Context, log *slog.Logger, what string, retriable func(error) bool, check func() error) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var last error
	attempts := 0
	_ = StartupBackoff.DelayFunc().Until(ctx, true, false, func(ctx context.Context) (bool, error) {
		attempts++
		last = check()
		if last == nil || retriable == nil || !retriable(last) || ctx.Err() != nil {
			return true, nil
		}
		log.Warn(what+" failed, retrying", "attempt", attempts, "err", last)
		return false, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	if last == nil && attempts > 1 {
		log.Info(what+" succeeded", "attempts", attempts)
	}
	return last
}
