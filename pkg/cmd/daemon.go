package cmd

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
)

// serveDaemonEndpoints serves a daemon's /metrics on metricsAddr and its
// probes on probeAddr (all three on one server when the addresses are the
// same), and Go's profiles on profilingAddr; an empty address serves
// nothing. They are served until ctx ends. The function it
// returns waits for the servers to shut down once ctx has ended.
func serveDaemonEndpoints(ctx context.Context, log *slog.Logger, metricsAddr, probeAddr, profilingAddr string, reg prometheus.Gatherer, health *daemon.Health) (func(), error) {
	var served []<-chan error
	wait := func() {
		for _, done := range served {
			if err := <-done; err != nil {
				log.Error("metrics or probe server failed", "err", err)
			}
		}
	}
	serve := func(addr, flag, what string, handler http.Handler) error {
		bound, done, err := daemon.Serve(ctx, addr, flag, handler, log)
		if err != nil {
			return err
		}
		served = append(served, done)
		log.Info("serving "+what, "address", bound.String())
		return nil
	}
	var err error
	switch {
	case metricsAddr != "" && metricsAddr == probeAddr:
		err = serve(metricsAddr, "metrics-bind-address", "metrics and probes", health.Handler(reg))
	default:
		if metricsAddr != "" {
			err = serve(metricsAddr, "metrics-bind-address", "metrics", daemon.MetricsHandler(reg))
		}
		if err == nil && probeAddr != "" {
			err = serve(probeAddr, "health-probe-bind-address", "probes", health.ProbeHandler())
		}
	}
	if err == nil && profilingAddr != "" {
		err = serve(profilingAddr, "profiling-bind-address", "profiles", daemon.ProfilingHandler())
	}
	return wait, err
}
