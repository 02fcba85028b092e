package rebalance

import (
	"testing"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
)

var (
	deployA = Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "a"}
	deployC = Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "c"}
	roleX   = Workload{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "x"}
)

func TestSortRows(t *testing.T) {
	rows := []Row{{Workload: deployC, Binding: "c"}, {Workload: roleX}, {Workload: deployA}, {Workload: deployC, Binding: "second c"}}
	SortRows(rows)
	got := make([]Workload, 0, len(rows))
	for _, r := range rows {
		got = append(got, r.Workload)
	}
	assert.Equal(t, []Workload{deployA, deployC, deployC, roleX}, got)
	assert.Equal(t, "c", rows[1].Binding, "equal keys keep their order")
}

func TestCountRows(t *testing.T) {
	failed, pending := CountRows([]Row{
		{Result: appsv1alpha1.RebalanceSuccessful, Observation: Observation{Outcome: OutcomeScheduled}},
		{Result: appsv1alpha1.RebalanceFailed},
		{Result: appsv1alpha1.RebalanceSuccessful, Observation: Observation{Outcome: OutcomeIgnored}},
		{Result: appsv1alpha1.RebalanceSuccessful, Observation: Observation{Outcome: OutcomeWaiting}},
		{},
	})
	assert.Equal(t, 2, failed)
	assert.Equal(t, 2, pending)
}

func TestDistinctWorkloads(t *testing.T) {
	assert.Equal(t, []Workload{webDeploy, apiDeploy}, DistinctWorkloads(targetsOf(webDeploy, apiDeploy, webDeploy)))
}
