package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"

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

// daemonFlags are the flags the plugin's daemons (deschedule --interval,
// failback) share, under the names Karmada's components give them: leader
// election, metrics and probes, and the log format.
type daemonFlags struct {
	LeaderElect            bool
	LeaderElectNamespace   string
	LeaderElectName        string
	LeaderElectIdentity    string
	LeaseDuration          time.Duration
	RenewDeadline          time.Duration
	RetryPeriod            time.Duration
	MetricsBindAddress     string
	HealthProbeBindAddress string
	LogFormat              string
}

// newDaemonFlags returns the defaults, leader election on, on the Lease
// karmada-system/leaseName.
func newDaemonFlags(leaseName string) daemonFlags {
	return daemonFlags{
		LeaderElect:          true,
		LeaderElectNamespace: "karmada-system",
		LeaderElectName:      leaseName,
		LeaseDuration:        daemon.DefaultLeaseDuration,
		RenewDeadline:        daemon.DefaultRenewDeadline,
		RetryPeriod:          daemon.DefaultRetryPeriod,
		LogFormat:            "text",
	}
}

// addFlags registers the flags; when starts the usage of the flags that only
// a daemon reads (e.g. "With --interval, "), leaderElect and leaseName are
// the usages of --leader-elect and --leader-elect-resource-name.
func (d *daemonFlags) addFlags(cmd *cobra.Command, when, leaderElect, leaseName string) {
	flags := cmd.Flags()
	flags.BoolVar(&d.LeaderElect, "leader-elect", d.LeaderElect, leaderElect)
	flags.StringVar(&d.LeaderElectNamespace, "leader-elect-resource-namespace", d.LeaderElectNamespace, "Namespace of the leader election Lease.")
	flags.StringVar(&d.LeaderElectName, "leader-elect-resource-name", d.LeaderElectName, leaseName)
	flags.StringVar(&d.LeaderElectIdentity, "leader-elect-identity", d.LeaderElectIdentity,
		"This process's name in the Lease, after "+daemon.IdentityPrefix+"; the host name and a random suffix when empty.")
	durationVar(flags, &d.LeaseDuration, "leader-elect-lease-duration", d.LeaseDuration, "How long standbys wait after the last renewal before taking the Lease over.")
	durationVar(flags, &d.RenewDeadline, "leader-elect-renew-deadline", d.RenewDeadline, "How long the leader keeps trying to renew before it stops working.")
	durationVar(flags, &d.RetryPeriod, "leader-elect-retry-period", d.RetryPeriod, "How often candidates try to acquire or renew the Lease.")
	flags.StringVar(&d.MetricsBindAddress, "metrics-bind-address", d.MetricsBindAddress, when+`serve Prometheus /metrics on this address (e.g. :8080); off when empty or "0".`)
	flags.StringVar(&d.HealthProbeBindAddress, "health-probe-bind-address", d.HealthProbeBindAddress,
		when+`serve /healthz and /readyz on this address (e.g. :10358); off when empty or "0". The same address as --metrics-bind-address serves all three.`)
	flags.StringVar(&d.LogFormat, "logging-format", d.LogFormat, `Format of the daemon's logs on stderr: "text" or "json". Set the level with -v.`)
	_ = cmd.RegisterFlagCompletionFunc("logging-format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
}

// complete turns "0" addresses off, as Karmada's components do.
func (d *daemonFlags) complete() {
	for _, addr := range []*string{&d.MetricsBindAddress, &d.HealthProbeBindAddress} {
		if *addr == "0" {
			*addr = ""
		}
	}
}

// validate checks the leader election settings.
func (d *daemonFlags) validate() error {
	switch {
	case d.LeaderElect && (d.LeaderElectNamespace == "" || d.LeaderElectName == ""):
		return errors.New("--leader-elect-resource-namespace and --leader-elect-resource-name must not be empty: name the Lease, e.g. --leader-elect-resource-namespace karmada-system")
	case d.LeaderElect && !(d.LeaseDuration > d.RenewDeadline && d.RenewDeadline > d.RetryPeriod && d.RetryPeriod > 0):
		return fmt.Errorf("leader election needs --leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > --leader-elect-retry-period (%s) > 0",
			d.LeaseDuration, d.RenewDeadline, d.RetryPeriod)
	}
	return nil
}

// identity names this process in the Lease: the host name (the pod name in
// a cluster) and a random suffix, unless --leader-elect-identity is set,
// after the prefix that marks kubectl-rebalance's daemons.
func (d *daemonFlags) identity(host string) string {
	if d.LeaderElectIdentity != "" {
		return daemon.HolderIdentity(d.LeaderElectIdentity)
	}
	return daemon.HolderIdentity(host + "_" + string(uuid.NewUUID()))
}

// leaderElection is the election of these flags on client's Lease.
func (d *daemonFlags) leaderElection(client kubernetes.Interface, host string) *daemon.LeaderElection {
	return &daemon.LeaderElection{
		Client: client, Namespace: d.LeaderElectNamespace, Name: d.LeaderElectName, Identity: d.identity(host),
		LeaseDuration: d.LeaseDuration, RenewDeadline: d.RenewDeadline, RetryPeriod: d.RetryPeriod,
	}
}

// daemonMetrics is a registry with the Go and process collectors, for a
// daemon's own metrics to join.
func daemonMetrics() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
