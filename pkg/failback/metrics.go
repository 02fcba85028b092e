package failback

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
)

// Metric names share this prefix, e.g. kubectl_rebalance_failback_recoveries_total.
const (
	metricsNamespace = "kubectl_rebalance"
	metricsSubsystem = "failback"
)

// Failback results, the values of the result label of the failbacks metric.
const (
	// ResultSucceeded: every selected workload was rebalanced.
	ResultSucceeded = "succeeded"
	// ResultFailed: some workload failed (and maybe the failure budget
	// stopped the waves).
	ResultFailed = "failed"
	// ResultStopped: stopped before the end: the cluster failed again, the
	// Lease was lost, or the daemon stopped; the record says what is left.
	ResultStopped = "stopped"
	// ResultNothing: no workload would gain replicas on the cluster.
	ResultNothing = "nothing"
	// ResultError: the run could not start or its requests failed.
	ResultError = "error"
	// ResultDryRun: a dry run logged what it would do.
	ResultDryRun = "dry-run"
)

// Metrics holds the failback daemon's Prometheus metrics. A nil *Metrics
// records nothing.
type Metrics struct {
	recoveries  *prometheus.CounterVec
	resets      *prometheus.CounterVec
	failbacks   *prometheus.CounterVec
	workloads   *prometheus.CounterVec
	failures    *prometheus.CounterVec
	inFlight    *prometheus.GaugeVec
	stabilizing prometheus.Gauge
	leader      prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help}
	}
	m := &Metrics{
		recoveries: prometheus.NewCounterVec(prometheus.CounterOpts(opts("recoveries_total",
			"Recoveries seen: a member cluster that was not Ready, or tainted NoSchedule/NoExecute, became Ready and untainted.")), []string{"cluster"}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts(opts("window_resets_total",
			"Stabilization windows started over because the cluster failed again (flapped) before the window was over.")), []string{"cluster"}),
		failbacks: prometheus.NewCounterVec(prometheus.CounterOpts(opts("failbacks_total",
			"Failbacks run, by result: succeeded, failed, stopped, nothing (no workload to move), error, dry-run.")), []string{"cluster", "result"}),
		workloads: prometheus.NewCounterVec(prometheus.CounterOpts(opts("workloads_failed_back_total",
			"Workloads rebalanced back toward a recovered cluster (trigger written and done, as the waves define done).")), []string{"cluster"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts(opts("workload_failures_total",
			"Workloads of a failback that failed: not found, not rescheduled or not ready within --progress-deadline, or rejected by the scheduler.")), []string{"cluster"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("workloads_in_flight",
			"Workloads of a running failback between their trigger and done.")), []string{"cluster"}),
		stabilizing: prometheus.NewGauge(prometheus.GaugeOpts(opts("clusters_stabilizing",
			"Member clusters healthy again and waiting for the end of their stabilization window."))),
		leader: prometheus.NewGauge(prometheus.GaugeOpts(opts("leader",
			"1 while this process acts on recoveries (it holds the Lease, or runs without leader election), else 0."))),
	}
	for _, c := range []prometheus.Collector{m.recoveries, m.resets, m.failbacks, m.workloads, m.failures, m.inFlight, m.stabilizing, m.leader} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) recovery(cluster string) {
	if m != nil {
		m.recoveries.WithLabelValues(cluster).Inc()
	}
}

func (m *Metrics) reset(cluster string) {
	if m != nil {
		m.resets.WithLabelValues(cluster).Inc()
	}
}

func (m *Metrics) failback(cluster, result string, done, failed int) {
	if m == nil {
		return
	}
	m.failbacks.WithLabelValues(cluster, result).Inc()
	m.workloads.WithLabelValues(cluster).Add(float64(done))
	m.failures.WithLabelValues(cluster).Add(float64(failed))
	m.inFlight.WithLabelValues(cluster).Set(0)
}

func (m *Metrics) setInFlight(cluster string, n int) {
	if m != nil {
		m.inFlight.WithLabelValues(cluster).Set(float64(n))
	}
}

func (m *Metrics) setStabilizing(n int) {
	if m != nil {
		m.stabilizing.Set(float64(n))
	}
}

// SetLeader records whether this process is the one doing the work.
func (m *Metrics) SetLeader(leading bool) {
	if m != nil {
		daemon.SetLeaderGauge(m.leader, leading)
	}
}
