package rebalance

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// What the runner shares with the packages built on it (pkg/record,
// pkg/waves): how an API error is classified, how a retry waits, how a time
// is printed, how a watched binding is read.

// ErrWaitTooLong is returned by ServerClock.WaitUntilAfter when the API
// server's clock is too far behind the time to pass.
var ErrWaitTooLong error = errWaitTooLong

// IsFatal reports an error no retry can fix: the caller lacks the
// credentials or the permission.
func IsFatal(err error) bool { return isFatal(err) }

// IsRejected reports a write the API server refused on its merits.
func IsRejected(err error) bool { return isRejected(err) }

// SleepContext sleeps for d unless ctx ends first, and then returns ctx's
// error.
func SleepContext(ctx context.Context, d time.Duration) error { return sleepContext(ctx, d) }

// FormatTime prints a time as the API server stores it: RFC 3339 in UTC.
func FormatTime(t time.Time) string { return formatTime(t) }

// BindingFromObject converts a watched ResourceBinding or
// ClusterResourceBinding; it returns nil for anything else.
func BindingFromObject(obj runtime.Object) *Binding { return fromObject(obj) }
