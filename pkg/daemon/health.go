// Package daemon holds what kubectl-rebalance's long-running commands
// (deschedule and failback) share: the health and metrics endpoints, the
// leader-election loop on a Lease, and the background event recorder. It
// knows nothing of what the daemons do.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/tools/leaderelection"
)

// leaderElectionHealthTimeout is how long past a missed Lease renewal
// /healthz still answers ok, so that a briefly slow API server does not get
// the leader restarted.
const leaderElectionHealthTimeout = 20 * time.Second

// Health backs the daemon's /healthz and /readyz endpoints. A nil *Health
// accepts every call and reports nothing.
type Health struct {
	ready    atomic.Bool
	leading  atomic.Bool
	adaptor  *leaderelection.HealthzAdaptor
	electing bool
}

// NewHealth returns a Health; electing says whether the daemon uses leader
// election, in which case /healthz also fails when the leader has stopped
// renewing its Lease.
func NewHealth(electing bool) *Health {
	h := &Health{electing: electing}
	if electing {
		h.adaptor = leaderelection.NewLeaderHealthzAdaptor(leaderElectionHealthTimeout)
	}
	return h
}

// SetReady says whether the daemon can serve: /readyz answers ok only
// while it is.
func (h *Health) SetReady(v bool) {
	if h != nil {
		h.ready.Store(v)
	}
}

// IsReady reports what SetReady last said.
func (h *Health) IsReady() bool { return h != nil && h.ready.Load() }

// SetLeading says whether this replica holds the Lease, for /readyz.
func (h *Health) SetLeading(v bool) {
	if h != nil {
		h.leading.Store(v)
	}
}

// Watchdog is the adaptor to give leader election, so that /healthz fails
// when the leader stops renewing its Lease; nil without leader election.
func (h *Health) Watchdog() *leaderelection.HealthzAdaptor {
	if h == nil {
		return nil
	}
	return h.adaptor
}

// healthz is ok while the process runs, unless it leads and has failed to
// renew its Lease for too long.
func (h *Health) healthz(w http.ResponseWriter, r *http.Request) {
	if h.adaptor != nil {
		if err := h.adaptor.Check(r); err != nil {
			http.Error(w, "leader election: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	_, _ = fmt.Fprintln(w, "ok")
}

// readyz is ok once the Karmada apiserver has answered and until the daemon
// stops. A standby replica is ready too: it is ready to take over.
func (h *Health) readyz(w http.ResponseWriter, _ *http.Request) {
	if !h.ready.Load() {
		http.Error(w, "not ready: the Karmada apiserver has not answered yet, or the daemon is stopping", http.StatusServiceUnavailable)
		return
	}
	role := "leader"
	if h.electing && !h.leading.Load() {
		role = "standby"
	}
	_, _ = fmt.Fprintln(w, "ok ("+role+")")
}

// Handler serves /metrics from gatherer, /healthz and /readyz: one server
// for both, when the metrics and probe addresses are the same.
func (h *Health) Handler(gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", MetricsHandler(gatherer))
	mux.HandleFunc("/healthz", h.healthz)
	mux.HandleFunc("/readyz", h.readyz)
	return mux
}

// ProbeHandler serves /healthz and /readyz only, for
// --health-probe-bind-address.
func (h *Health) ProbeHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", h.healthz)
	mux.HandleFunc("/readyz", h.readyz)
	return mux
}

// MetricsHandler serves Prometheus /metrics from gatherer only, for
// --metrics-bind-address.
func MetricsHandler(gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return mux
}

// ProfilingHandler serves Go's runtime profiles under /debug/pprof/, for
// --enable-pprof: net/http/pprof's handlers on a mux of their own, never on
// the metrics or probe servers.
func ProfilingHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Serve listens on addr at once, so that a busy port is reported before the
// daemon starts, and serves handler until ctx ends; flag names the option
// that chose addr, for the error. It returns the bound address and a channel
// that yields the server's error, or nil, once it has shut down.
func Serve(ctx context.Context, addr, flag string, handler http.Handler, logger *slog.Logger) (net.Addr, <-chan error, error) {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot listen on %s, choose another --%s: %w", addr, flag, err)
	}
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() {
		err := server.Serve(listener)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := server.Shutdown(shutdownCtx); err != nil && logger != nil {
			logger.Warn("server did not shut down cleanly", "address", addr, "err", err)
		}
	}()
	return listener.Addr(), done, nil
}
