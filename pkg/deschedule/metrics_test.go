package deschedule

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricsObservePass(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)

	result := samplePass()
	result.Start, result.End = testNow, testNow.Add(2*time.Second)
	result.Bindings[0].EventErr = errors.New("events forbidden")
	result.Skipped = []SkippedBinding{{Namespace: "default", Name: "batch-job", Code: SkipOptedOut}}
	m.ObservePass(result, nil)
	m.ObservePass(nil, errors.New("connection refused"))
	m.SetLeader(true)

	got := gather(t, reg)
	want := map[string]float64{
		"kubectl_rebalance_deschedule_bindings_examined_total":                  3,
		`kubectl_rebalance_deschedule_bindings_total{outcome="descheduled"}`:    1,
		`kubectl_rebalance_deschedule_bindings_total{outcome="failed"}`:         1,
		`kubectl_rebalance_deschedule_bindings_total{outcome="unchanged"}`:      1,
		`kubectl_rebalance_deschedule_errors_total{kind="event"}`:               1,
		`kubectl_rebalance_deschedule_errors_total{kind="list-bindings"}`:       1,
		`kubectl_rebalance_deschedule_errors_total{kind="member-list"}`:         0,
		`kubectl_rebalance_deschedule_errors_total{kind="list-templates"}`:      0,
		`kubectl_rebalance_deschedule_errors_total{kind="write"}`:               1,
		"kubectl_rebalance_deschedule_leader":                                   1,
		`kubectl_rebalance_deschedule_passes_total{result="error"}`:             1,
		`kubectl_rebalance_deschedule_passes_total{result="partial"}`:           1,
		`kubectl_rebalance_deschedule_passes_total{result="stopped"}`:           0,
		`kubectl_rebalance_deschedule_passes_total{result="succeeded"}`:         0,
		`kubectl_rebalance_deschedule_replicas_descheduled_total{cluster="m1"}`: 2,
		"kubectl_rebalance_deschedule_pass_duration_seconds_count":              1,
		"kubectl_rebalance_deschedule_pass_duration_seconds_sum":                2,
		"kubectl_rebalance_deschedule_last_pass_timestamp_seconds":              float64(testNow.Add(2 * time.Second).Unix()),
	}
	for _, code := range SkipCodes {
		want[`kubectl_rebalance_deschedule_bindings_skipped_total{reason="`+string(code)+`"}`] = 0
	}
	want[`kubectl_rebalance_deschedule_bindings_skipped_total{reason="opted-out"}`] = 1
	assert.Equal(t, want, got)
}

func TestMetricsCountBouncesOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	bounced := func(newly ...string) *PassResult {
		return &PassResult{Start: testNow, End: testNow, Bindings: []BindingResult{{
			Outcome: OutcomeBouncedBack, NewlyBounced: newly,
			Rows: []ClusterRow{{Cluster: "member1", Spec: 1, New: 1, Action: ActionBouncedBack}},
		}}}
	}
	m.ObservePass(bounced("member1"), nil)
	m.ObservePass(bounced(), nil)

	got := gather(t, reg)
	assert.Equal(t, float64(1), got[`kubectl_rebalance_deschedule_bounced_back_total{cluster="member1"}`], "a bounce is counted when first found")
	assert.Equal(t, float64(2), got[`kubectl_rebalance_deschedule_bindings_total{outcome="bounced-back"}`], "every pass reports the binding")
}

// gather flattens a registry into "name{label=\"value\"}" -> value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := f.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[name] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func TestPassResultLabel(t *testing.T) {
	assert.Equal(t, PassError, PassResultLabel(nil, errors.New("x")))
	assert.Equal(t, PassSucceeded, PassResultLabel(&PassResult{}, nil))
	assert.Equal(t, PassStopped, PassResultLabel(&PassResult{Stopped: true}, nil))
	assert.Equal(t, PassPartial, PassResultLabel(&PassResult{ClusterErrors: map[string]error{"m1": errors.New("x")}}, nil))
}

func TestNilMetricsAndHealth(t *testing.T) {
	var m *Metrics
	m.ObservePass(&PassResult{}, nil)
	m.SetLeader(true)
}
