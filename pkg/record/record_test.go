package record

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var (
	serverNow  = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	webDeploy  = rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	apiDeploy  = rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "api"}
	gone       = rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "gone"}
	readerRole = rebalance.Workload{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "reader"}
)

func TestSameWorkloadsAndSpecMatches(t *testing.T) {
	assert.True(t, SameWorkloads([]rebalance.Workload{webDeploy, apiDeploy}, []rebalance.Workload{apiDeploy, webDeploy, apiDeploy}), "order and repeats do not count")
	assert.False(t, SameWorkloads([]rebalance.Workload{webDeploy}, []rebalance.Workload{webDeploy, apiDeploy}))
	other := webDeploy
	other.APIVersion = "apps/v1beta1"
	assert.False(t, SameWorkloads([]rebalance.Workload{webDeploy}, []rebalance.Workload{other}), "all four fields count")

	spec := appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{webDeploy}, TTLSecondsAfterFinished: ptr.To[int32](60)}
	noTTL := appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{webDeploy}}
	assert.True(t, specMatches(spec, noTTL, true), "any ttl")
	assert.False(t, specMatches(spec, noTTL, false))
	assert.True(t, specMatches(spec, *spec.DeepCopy(), false))
	reordered := appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{apiDeploy, webDeploy}}
	assert.False(t, specMatches(appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{webDeploy, apiDeploy}}, reordered, false),
		"a manifest's spec is applied as written")
}

func TestDescribeSpec(t *testing.T) {
	assert.Equal(t, "workloads apps/v1 Deployment shop/web; no ttl", DescribeSpec(appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{webDeploy}}))
	assert.Equal(t, "workloads apps/v1 Deployment shop/web, apps/v1 Deployment shop/api, rbac.authorization.k8s.io/v1 ClusterRole reader, and 1 more; ttlSecondsAfterFinished 0",
		DescribeSpec(appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{webDeploy, apiDeploy, readerRole, gone}, TTLSecondsAfterFinished: ptr.To[int32](0)}))
}

// A result someone else recorded first is kept; only pending entries take
// the run's result.
func TestSetIfPending(t *testing.T) {
	status := appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
		{Workload: apiDeploy, Result: appsv1alpha1.RebalanceSuccessful},
		{Workload: webDeploy},
	}}
	setIfPending(&status, rebalance.Row{Workload: apiDeploy, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound})
	setIfPending(&status, rebalance.Row{Workload: webDeploy, Result: appsv1alpha1.RebalanceSuccessful})
	assert.Equal(t, []appsv1alpha1.ObservedWorkload{
		{Workload: apiDeploy, Result: appsv1alpha1.RebalanceSuccessful},
		{Workload: webDeploy, Result: appsv1alpha1.RebalanceSuccessful},
	}, status.ObservedWorkloads)
}

func TestRowsFromStatus(t *testing.T) {
	finish := metav1.NewTime(serverNow)
	rb := &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Generation: 2},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{webDeploy, gone}},
		Status: appsv1alpha1.WorkloadRebalancerStatus{
			ObservedGeneration: 2,
			FinishTime:         &finish,
			ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
				{Workload: apiDeploy, Result: appsv1alpha1.RebalanceSuccessful},
				{Workload: gone, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound},
				{Workload: webDeploy, Result: appsv1alpha1.RebalanceSuccessful},
			},
		},
	}
	ran := map[rebalance.Workload]rebalance.Row{webDeploy: {Workload: webDeploy, Binding: "web-deployment", Result: appsv1alpha1.RebalanceSuccessful,
		Observation: rebalance.Observation{Outcome: rebalance.OutcomeScheduled}}}
	rows := RowsFromStatus(rb, ran)
	assert.Equal(t, []rebalance.Row{
		{Workload: apiDeploy, Binding: "api-deployment", Result: appsv1alpha1.RebalanceSuccessful,
			Message: "no longer in spec.workloads; kept in the status because it was triggered"},
		{Workload: gone, Binding: "gone-deployment", Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound,
			Message: "recorded by an earlier pass"},
		{Workload: webDeploy, Binding: "web-deployment", Result: appsv1alpha1.RebalanceSuccessful, Observation: rebalance.Observation{Outcome: rebalance.OutcomeScheduled}},
	}, rows)

	// A spec not reconciled yet is shown as the next pass will see it.
	rb.Generation = 3
	rb.Spec.Workloads = []rebalance.Workload{readerRole}
	rows = RowsFromStatus(rb, nil)
	var names []string
	for _, row := range rows {
		names = append(names, row.Workload.Name+"="+string(row.Result)+":"+row.Message)
	}
	assert.Equal(t, []string{
		"api=Successful:no longer in spec.workloads; kept in the status because it was triggered",
		"web=Successful:no longer in spec.workloads; kept in the status because it was triggered",
		"reader=:not triggered yet",
	}, names)
}

func TestOlderThan(t *testing.T) {
	at := func(gen, observed int64) *appsv1alpha1.WorkloadRebalancer {
		return &appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Status: appsv1alpha1.WorkloadRebalancerStatus{ObservedGeneration: observed}}
	}
	assert.True(t, olderThan(at(1, 1), at(2, 1)))
	assert.True(t, olderThan(at(2, 1), at(2, 2)))
	assert.False(t, olderThan(at(2, 2), at(2, 2)))
	assert.False(t, olderThan(at(3, 2), at(2, 2)))
}

func TestExpiresAtAfterEdit(t *testing.T) {
	finish := metav1.NewTime(serverNow)
	rb := &appsv1alpha1.WorkloadRebalancer{
		Spec:   appsv1alpha1.WorkloadRebalancerSpec{TTLSecondsAfterFinished: ptr.To[int32](5)},
		Status: appsv1alpha1.WorkloadRebalancerStatus{FinishTime: &finish},
	}
	expires, ok := ExpiresAt(rb)
	assert.True(t, ok)
	assert.Equal(t, serverNow.Add(5*time.Second), expires)
}

func TestCutByShutdown(t *testing.T) {
	parent, stop := context.WithCancel(context.Background())
	ctx := daemon.WithShutdown(parent)
	cut := errors.New("patch workloadrebalancer r: context canceled")
	stop()
	assert.Same(t, cut, cutByShutdown(ctx, "r", cut), "within the budget the error is the write's own")
	time.Sleep(daemon.ShutdownBudget + 200*time.Millisecond)
	err := cutByShutdown(ctx, "r", cut)
	assert.ErrorIs(t, err, daemon.ErrShutdownBudget)
	assert.Contains(t, err.Error(), "the status of workloadrebalancer r could not be written before the shutdown budget")
	assert.Contains(t, err.Error(), "run the same command again")
}
