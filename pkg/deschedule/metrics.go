package deschedule

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
)

// Metric names share this prefix, e.g. kubectl_rebalance_deschedule_passes_total.
const (
	metricsNamespace = "kubectl_rebalance"
	metricsSubsystem = "deschedule"
)

// Pass results, the values of the result label of the passes metric.
const (
	// PassSucceeded: every binding that needed a write got it.
	PassSucceeded = "succeeded"
	// PassPartial: the pass ran, but some member cluster could not be
	// listed or some write failed.
	PassPartial = "partial"
	// PassError: the bindings could not be listed; nothing was done.
	PassError = "error"
	// PassStopped: a stop request ended the pass before every write.
	PassStopped = "stopped"
)

// Error kinds, the values of the kind label of the errors metric.
const (
	errorListBindings = "list-bindings"
	errorMemberList   = "member-list"
	errorWrite        = "write"
	errorEvent        = "event"
	errorTemplates    = "list-templates"
)

// Metrics holds the Prometheus metrics of descheduling passes. A nil
// *Metrics records nothing.
type Metrics struct {
	passes            *prometheus.CounterVec
	passDuration      prometheus.Histogram
	bindingsExamined  prometheus.Counter
	bindingsByOutcome *prometheus.CounterVec
	bindingsSkipped   *prometheus.CounterVec
	replicas          *prometheus.CounterVec
	bouncedBack       *prometheus.CounterVec
	errors            *prometheus.CounterVec
	lastPass          prometheus.Gauge
	leader            prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "passes_total",
			Help: "Descheduling passes run, by result: succeeded, partial (a member cluster or a write failed), error (bindings could not be listed) or stopped.",
		}, []string{"result"}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "pass_duration_seconds",
			Help:    "Wall time of a descheduling pass, from listing bindings to the last write.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14), // 50ms .. ~7min
		}),
		bindingsExamined: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "bindings_examined_total",
			Help: "Candidate ResourceBindings examined by passes (dynamically divided workloads of the selected kinds with a scheduling result, not opted out).",
		}),
		bindingsByOutcome: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "bindings_total",
			Help: "Candidate ResourceBindings by what a pass did with them: descheduled, dry-run, unchanged, blocked, limited, bounced-back, skipped, failed, stopped.",
		}, []string{"outcome"}),
		bindingsSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "bindings_skipped_total",
			Help: "Listed ResourceBindings a pass left alone, by reason: deleting, no-placement, invalid-placement, not-divided, static-weight, not-scheduled, suspended, opted-out, template-not-found, template-unreadable, unsupported.",
		}, []string{"reason"}),
		replicas: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "replicas_descheduled_total",
			Help: "Replicas taken away from a member cluster by written binding updates (dry runs are not counted).",
		}, []string{"cluster"}),
		bouncedBack: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "bounced_back_total",
			Help: "Bounces found: a member cluster the scheduler gave evicted replicas back to, where they were unschedulable again; such a cluster is left alone instead of evicted from in a loop. Counted once per bounce.",
		}, []string{"cluster"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "errors_total",
			Help: "Errors by kind: list-bindings, member-list (a member cluster could not be listed), list-templates (the templates of a kind could not be listed), write (a binding update failed), event.",
		}, []string{"kind"}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "last_pass_timestamp_seconds",
			Help: "Unix time at which the last pass ended, whatever its result.",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "leader",
			Help: "1 while this process runs passes (it holds the lease, or runs without leader election), else 0.",
		}),
	}
	for _, c := range []prometheus.Collector{m.passes, m.passDuration, m.bindingsExamined, m.bindingsByOutcome, m.bindingsSkipped, m.replicas, m.bouncedBack, m.errors, m.lastPass, m.leader} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Make the result and error series exist from the start, so that
	// rate() and alerts see a zero before the first increment.
	for _, r := range []string{PassSucceeded, PassPartial, PassError, PassStopped} {
		m.passes.WithLabelValues(r)
	}
	for _, k := range []string{errorListBindings, errorMemberList, errorTemplates, errorWrite, errorEvent} {
		m.errors.WithLabelValues(k)
	}
	for _, c := range SkipCodes {
		m.bindingsSkipped.WithLabelValues(string(c))
	}
	return m, nil
}

// PassResultLabel classifies a pass for the passes metric and for logs.
func PassResultLabel(result *PassResult, err error) string {
	switch {
	case err != nil || result == nil:
		return PassError
	case result.Stopped:
		return PassStopped
	case result.Err() != nil:
		return PassPartial
	}
	return PassSucceeded
}

// ObservePass records one pass; err is Pass's error, result its result.
func (m *Metrics) ObservePass(result *PassResult, err error) {
	if m == nil {
		return
	}
	m.passes.WithLabelValues(PassResultLabel(result, err)).Inc()
	if err != nil || result == nil {
		m.errors.WithLabelValues(errorListBindings).Inc()
		return
	}
	m.passDuration.Observe(result.End.Sub(result.Start).Seconds())
	m.lastPass.Set(float64(result.End.UnixNano()) / 1e9)
	m.bindingsExamined.Add(float64(len(result.Bindings)))
	m.errors.WithLabelValues(errorMemberList).Add(float64(len(result.ClusterErrors)))
	m.errors.WithLabelValues(errorTemplates).Add(float64(len(result.TemplateErrors)))
	for _, sb := range result.Skipped {
		m.bindingsSkipped.WithLabelValues(string(sb.Code)).Inc()
	}
	for i := range result.Bindings {
		br := &result.Bindings[i]
		m.bindingsByOutcome.WithLabelValues(string(br.Outcome)).Inc()
		if br.Err != nil {
			m.errors.WithLabelValues(errorWrite).Inc()
		}
		if br.EventErr != nil {
			m.errors.WithLabelValues(errorEvent).Inc()
		}
		for _, cluster := range br.NewlyBounced {
			m.bouncedBack.WithLabelValues(cluster).Inc()
		}
		if br.Outcome != OutcomeDescheduled {
			continue
		}
		for _, row := range br.Rows {
			if n := row.Evicted(); n > 0 {
				m.replicas.WithLabelValues(row.Cluster).Add(float64(n))
			}
		}
	}
}

// SetLeader records whether this process is the one doing the work.
func (m *Metrics) SetLeader(leading bool) {
	if m != nil {
		daemon.SetLeaderGauge(m.leader, leading)
	}
}
