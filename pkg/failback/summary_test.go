package failback

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

func summaryRows() (done, failed, pending, earlier rebalance.Row) {
	at := &metav1.Time{Time: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	done = rebalance.Row{Workload: rebalance.Workload{Kind: "Deployment", Namespace: "ns", Name: "a"}, Binding: "a-deployment",
		Result: appsv1alpha1.RebalanceSuccessful, TriggeredAt: at, Observation: rebalance.Observation{Outcome: rebalance.OutcomeScheduled},
		Before: []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 3}}, After: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}}}
	failed = rebalance.Row{Workload: rebalance.Workload{Kind: "Deployment", Namespace: "ns", Name: "b"}, Binding: "b-deployment",
		Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound}
	pending = rebalance.Row{Workload: rebalance.Workload{Kind: "Deployment", Namespace: "ns", Name: "c"}}
	earlier = rebalance.Row{Workload: rebalance.Workload{Kind: "Deployment", Namespace: "ns", Name: "d"}, Result: appsv1alpha1.RebalanceSuccessful}
	return done, failed, pending, earlier
}

// TestSummarize checks the result, counts and words of a finished failback
// for each way one can end, without writing anything.
func TestSummarize(t *testing.T) {
	done, failed, pending, earlier := summaryRows()
	req := Request{Cluster: "member1", Key: "k", Name: "failback-member1-k"}
	tests := []struct {
		name    string
		report  Report
		err     error
		aborted string
		result  string
		counts  [4]int // done, failed, pending, earlier
		level   slog.Level
		event   *clusterEvent
		events  int
	}{
		{name: "succeeded", report: Report{Rows: []rebalance.Row{done, earlier}}, result: ResultSucceeded, counts: [4]int{1, 0, 0, 1}, events: 1,
			event: &clusterEvent{corev1.EventTypeNormal, ReasonFinished, "Failback to cluster member1 finished: 1 workload(s) rebalanced (1 more triggered before this failback was resumed), recorded as workloadrebalancer failback-member1-k"}},
		{name: "nothing", result: ResultNothing,
			event: &clusterEvent{corev1.EventTypeNormal, ReasonFinished, "Failback to cluster member1: no workload displaced by its failure would gain replicas there from a fresh reschedule; nothing moved"}},
		{name: "failures", report: Report{Rows: []rebalance.Row{done, failed}}, result: ResultFailed, counts: [4]int{1, 1, 0, 0}, level: slog.LevelWarn, events: 2,
			event: &clusterEvent{corev1.EventTypeWarning, ReasonFinished, "Failback to cluster member1 finished: 1 workload(s) done, 1 failed; see workloadrebalancer failback-member1-k"}},
		{name: "budget spent", report: Report{Rows: []rebalance.Row{failed, pending}, BudgetSpent: true, Stopped: "1 workload(s) failed (--max-failures 1)"},
			result: ResultFailed, counts: [4]int{0, 1, 1, 0}, level: slog.LevelWarn, events: 1,
			event: &clusterEvent{corev1.EventTypeWarning, ReasonFinished, "Failback to cluster member1 finished: 0 workload(s) done, 1 failed; 1 workload(s) failed (--max-failures 1); see workloadrebalancer failback-member1-k"}},
		{name: "aborted", report: Report{Rows: []rebalance.Row{done, pending}}, aborted: "cluster member1 failed again", result: ResultStopped, counts: [4]int{1, 0, 1, 0}, level: slog.LevelWarn, events: 1,
			event: &clusterEvent{corev1.EventTypeWarning, ReasonStopped, "Failback to cluster member1 stopped: cluster member1 failed again; 1 workload(s) done, 0 failed, 1 pending in workloadrebalancer failback-member1-k"}},
		{name: "cut short before resuming anything", report: Report{Rows: []rebalance.Row{earlier, pending}}, aborted: "the daemon is stopping", result: ResultStopped, counts: [4]int{0, 0, 2, 0}, level: slog.LevelWarn, events: 0,
			event: &clusterEvent{corev1.EventTypeWarning, ReasonStopped, "Failback to cluster member1 stopped: the daemon is stopping; 0 workload(s) done, 0 failed, 2 pending in workloadrebalancer failback-member1-k"}},
		{name: "error", err: errors.New("forbidden"), result: ResultError, level: slog.LevelError,
			event: &clusterEvent{corev1.EventTypeWarning, ReasonStopped, "Failback to cluster member1 stopped on an error: forbidden"}},
		{name: "dry run", report: Report{Rows: []rebalance.Row{done}, DryRun: true}, result: ResultDryRun, counts: [4]int{1, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := summarize(req, &tt.report, tt.err, tt.aborted)
			assert.Equal(t, tt.result, s.result)
			assert.Equal(t, tt.counts, [4]int{s.done, s.failed, s.pending, s.earlier})
			assert.Equal(t, tt.level, s.level)
			assert.Equal(t, tt.event, s.event)
			assert.Len(t, s.bindings, tt.events)
			if tt.report.DryRun {
				assert.Len(t, s.dryRun, len(tt.report.Rows))
			}
		})
	}
}

// TestSummarizeBindingEvents checks the events on the bindings: a trigger
// names the placement before and after, a failure says why.
func TestSummarizeBindingEvents(t *testing.T) {
	done, failed, _, _ := summaryRows()
	s := summarize(Request{Cluster: "member1", Name: "rec"}, &Report{Rows: []rebalance.Row{done, failed}}, nil, "")
	require.Len(t, s.bindings, 2)
	assert.Equal(t, "a-deployment", s.bindings[0].ref.Name)
	assert.Equal(t, bindingEvent{s.bindings[0].ref, corev1.EventTypeNormal, ReasonTriggered,
		"Rescheduled afresh by kubectl-rebalance failback because cluster member1 recovered (workloadrebalancer rec); placement {member2:3} -> {member1:1, member2:2}"}, s.bindings[0])
	assert.Equal(t, bindingEvent{s.bindings[1].ref, corev1.EventTypeWarning, ReasonFailed,
		"Failback to recovered cluster member1 (workloadrebalancer rec) failed for this workload: ReferencedBindingNotFound"}, s.bindings[1])
}

// TestWriteSummary checks that a summary's writes reach the log and the
// events, and that a dry run records no event.
func TestWriteSummary(t *testing.T) {
	done, failed, _, _ := summaryRows()
	cluster := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}}
	req := Request{Cluster: "member1", Name: "rec"}

	var logs bytes.Buffer
	events := &eventLog{}
	c := &Controller{opts: Options{Events: events}, log: slog.New(slog.NewTextHandler(&logs, nil))}
	c.write(cluster, summarize(req, &Report{Rows: []rebalance.Row{done, failed}}, nil, ""))
	assert.Len(t, events.with(ReasonTriggered), 1)
	assert.Len(t, events.with(ReasonFailed), 1)
	assert.Equal(t, []string{"Warning FailbackFinished Failback to cluster member1 finished: 1 workload(s) done, 1 failed; see workloadrebalancer rec"}, events.with(ReasonFinished))
	assert.Contains(t, logs.String(), `level=WARN msg="failback finished with failures" cluster=member1 record=rec result=failed workloads=2 done=1 failed=1 pending=0`)

	logs.Reset()
	events = &eventLog{}
	c.opts.Events = events
	c.write(cluster, summarize(req, &Report{Rows: []rebalance.Row{done}, DryRun: true}, nil, ""))
	assert.Empty(t, events.events)
	assert.Contains(t, logs.String(), `msg="dry run: would rebalance" cluster=member1 record=rec workload=Deployment/ns/a binding=a-deployment`)
	assert.Contains(t, logs.String(), `msg="dry run over"`)
}
