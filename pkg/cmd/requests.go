package cmd

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
)

// requestGuard sits in the transport of every client a command builds. It
// ties the requests whose context the command did not make - client-go's
// discovery, the resource builder's reads, which carry only a timeout of
// their own (32s for discovery) - to the command's run, so that Ctrl-C ends
// them wherever they are (dialing, in the TLS handshake, waiting for
// headers, reading the body). A request made with a context derived from
// the run keeps to that context: it ends with the run, or, when it was
// detached on purpose (a write let finish after Ctrl-C, the election's
// renewals), within its own deadline and the run's shutdown budget. It also ties the requests of the
// start-up to the context it is bound to, so that --timeout ends them, and
// it remembers the last request that went wrong, so that an error can name
// what was asked and of whom.
type requestGuard struct {
	mu sync.Mutex
	// run ends when the command is interrupted; nil until runs is called.
	run context.Context
	// shutdown ends daemon.ShutdownBudget after run: no request, not even
	// one that outlives the run on purpose, goes on past it.
	shutdown context.Context
	bound    context.Context
	last     *failedRequest
	seen     *failedRequest
}

// runKey marks the contexts derived from a run's context, detached ones
// included: their values are their parent's.
type runKey struct{}

// runs makes ctx, the command's whole run, end the requests made from now
// on with a context that does not derive from it: when ctx ends (Ctrl-C,
// SIGTERM), they end at once. The command makes its own requests with the
// context it returns.
//
// The requests that outlive the run on purpose (a write let finish, a
// record's last status, the last events, the Lease's release) share one
// shutdown budget: daemon.ShutdownBudget after ctx ends, they are cut too,
// so that the command ends within about a second of the signal even when
// the server hangs.
func (g *requestGuard) runs(ctx context.Context) context.Context {
	ctx = daemon.WithShutdown(context.WithValue(ctx, runKey{}, g))
	g.mu.Lock()
	defer g.mu.Unlock()
	g.run = ctx
	g.shutdown = daemon.Shutdown(ctx)
	return ctx
}

// outlivesStartupKey marks the context of a read that the start-up starts
// and that goes on after it (plan's read-ahead).
type outlivesStartupKey struct{}

// outlivingStartup returns ctx marked so that the end of the start-up does
// not end the requests made with it; Ctrl-C and ctx itself still do.
func outlivingStartup(ctx context.Context) context.Context {
	return context.WithValue(ctx, outlivesStartupKey{}, true)
}

// failedRequest is a request that got an error, an HTTP error code or an
// answer that is not from a Kubernetes API.
type failedRequest struct {
	Method, Path string
	// Code is the HTTP status, 0 when no answer came.
	Code int
	// ContentType is the answer's media type, without parameters.
	ContentType string
}

// bind ties the requests made from now on to ctx; nil unbinds them. It
// returns the context bound before, to restore it with a deferred bind.
func (g *requestGuard) bind(ctx context.Context) context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	previous := g.bound
	g.bound = ctx
	return previous
}

// lastFailed returns the last request that went wrong, or nil.
func (g *requestGuard) lastFailed() *failedRequest {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last
}

// lastSeen returns the last request that was answered, or nil.
func (g *requestGuard) lastSeen() *failedRequest {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seen
}

// wrapConfig adds the guard to config's transport and its rate limiter
// (stopAwareLimiter).
func (g *requestGuard) wrapConfig(config *rest.Config) *rest.Config {
	g.limitConfig(config)
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &guardedTransport{guard: g, next: rt} })
	return config
}

// wrapConfigOutlivingRun adds the guard to the transport of a client whose
// requests are made after the run has ended, on purpose, each within a
// bound of its own: a daemon's Lease release and its last events. The
// guard still notes what went wrong; the run's end does not cut them, the
// end of its shutdown budget does.
func (g *requestGuard) wrapConfigOutlivingRun(config *rest.Config) *rest.Config {
	g.limitConfig(config)
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &guardedTransport{guard: g, next: rt, outlivesRun: true}
	})
	return config
}

func (g *requestGuard) observe(req *http.Request, resp *http.Response, err error) {
	failed := &failedRequest{Method: req.Method, Path: req.URL.Path}
	if req.URL.Query().Get("watch") == "true" {
		failed.Method = "WATCH"
	}
	if resp != nil {
		failed.Code, failed.ContentType = resp.StatusCode, mediaType(resp)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen = failed
	switch {
	case err != nil:
		failed.Code = 0
	case resp.StatusCode >= 400, !isAPIMediaType(failed.ContentType):
	default:
		return
	}
	g.last = failed
}

func mediaType(resp *http.Response) string {
	media, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return resp.Header.Get("Content-Type")
	}
	return media
}

// isAPIMediaType tells the answers of a Kubernetes API from web pages.
func isAPIMediaType(media string) bool {
	return media == "" || strings.HasSuffix(media, "json") || strings.HasSuffix(media, "yaml") ||
		strings.HasPrefix(media, "application/vnd.kubernetes.protobuf")
}

type guardedTransport struct {
	guard *requestGuard
	next  http.RoundTripper
	// outlivesRun leaves the requests to the run's end alone.
	outlivesRun bool
}

func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.guard.mu.Lock()
	var ends []context.Context
	if !t.outlivesRun && req.Context().Value(runKey{}) != t.guard {
		ends = append(ends, t.guard.run)
	}
	if req.Context().Value(outlivesStartupKey{}) == nil {
		ends = append(ends, t.guard.bound)
	}
	ends = append(ends, t.guard.shutdown)
	t.guard.mu.Unlock()
	req, release := endWith(req, ends)
	resp, err := t.next.RoundTrip(req)
	t.guard.observe(req, resp, err)
	if err != nil {
		release()
		return resp, err
	}
	// The request's context must live until its body has been read.
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// endWith gives req a context that ends when any of ends (nil ones left
// out) ends, as well as when its own does. The transport then cancels the
// dial, the TLS handshake, the wait for an answer and the read of its body.
// release frees what watches ends, once the body is closed.
func endWith(req *http.Request, ends []context.Context) (*http.Request, func()) {
	var stops []func() bool
	ctx, cancel := context.WithCancelCause(req.Context())
	for _, end := range ends {
		if end == nil {
			continue
		}
		stops = append(stops, context.AfterFunc(end, func() { cancel(context.Cause(end)) }))
	}
	if len(stops) == 0 {
		cancel(nil)
		return req, func() {}
	}
	return req.WithContext(ctx), func() {
		for _, stop := range stops {
			stop()
		}
		cancel(nil)
	}
}

// WrappedRoundTripper lets client-go's transport helpers see what is underneath.
func (t *guardedTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// deadlineContext derives the context that --timeout bounds. The error
// catalogue replaces it to end a run when the fake server has seen the
// request a case is about, instead of after a wall-clock time that a loaded
// machine can spend before the run gets there.
var deadlineContext = context.WithDeadline

// startupBackoff paces the retries of the requests a command makes before it
// does anything: discovery and reading the workload templates.
var startupBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 6, Cap: 4 * time.Second}

// retryTransient calls fn until it succeeds, fails with an error no retry
// can fix, ctx ends, or the backoff's steps are spent. It returns fn's last
// error. An answer asking the client to wait (429, Retry-After) is obeyed.
func retryTransient(ctx context.Context, backoff wait.Backoff, fn func() error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		last = fn()
		if last == nil || !isTransient(last) {
			return true, nil
		}
		if seconds, ok := apierrors.SuggestsClientDelay(last); ok && seconds > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(seconds) * time.Second):
			}
		}
		return false, nil
	})
	if last == nil && err != nil {
		return err
	}
	return last
}

// isTransient reports errors that a later attempt may not meet: the server
// overloaded, restarting or throttling, or a connection lost on the way.
// A refused connection is not among them: the server is not there, and the
// user should hear it at once.
func isTransient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, one := range flattenErrors(err) {
		if isTransientOne(one) {
			return true
		}
	}
	return false
}

func isTransientOne(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || isGatewayError(err) ||
		utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// isGatewayError recognises 502 and 504 from a load balancer in front of
// the API server.
func isGatewayError(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	code := status.Status().Code
	return code == http.StatusBadGateway || code == http.StatusGatewayTimeout
}
