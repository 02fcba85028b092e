package rebalance

import (
	"testing"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestCheckReady(t *testing.T) {
	item := func(cluster, raw string, applied bool) workv1alpha2.AggregatedStatusItem {
		it := workv1alpha2.AggregatedStatusItem{ClusterName: cluster, Applied: applied}
		if raw != "" {
			it.Status = &runtime.RawExtension{Raw: []byte(raw)}
		}
		return it
	}
	placement := func(clusters ...workv1alpha2.TargetCluster) workv1alpha2.ResourceBindingSpec {
		return workv1alpha2.ResourceBindingSpec{Clusters: clusters}
	}
	of := func(apiVersion, kind string, clusters ...workv1alpha2.TargetCluster) workv1alpha2.ResourceBindingSpec {
		return workv1alpha2.ResourceBindingSpec{Resource: workv1alpha2.ObjectReference{APIVersion: apiVersion, Kind: kind}, Clusters: clusters}
	}
	health := func(it workv1alpha2.AggregatedStatusItem, h workv1alpha2.ResourceHealth) workv1alpha2.AggregatedStatusItem {
		it.Health = h
		return it
	}
	tests := []struct {
		name   string
		spec   workv1alpha2.ResourceBindingSpec
		status []workv1alpha2.AggregatedStatusItem
		ready  bool
		detail string
	}{
		{name: "every cluster ready", spec: placement(workv1alpha2.TargetCluster{Name: "member1", Replicas: 2}, workv1alpha2.TargetCluster{Name: "member2", Replicas: 1}),
			status: []workv1alpha2.AggregatedStatusItem{item("member1", `{"readyReplicas":2}`, true), item("member2", `{"readyReplicas":1}`, true)},
			ready:  true, detail: "member1 2/2, member2 1/1"},
		{name: "a moved replica not ready yet", spec: placement(workv1alpha2.TargetCluster{Name: "member1", Replicas: 1}, workv1alpha2.TargetCluster{Name: "member2", Replicas: 2}),
			status: []workv1alpha2.AggregatedStatusItem{item("member1", `{"readyReplicas":2}`, true), item("member2", `{"readyReplicas":1}`, true)},
			detail: "member1 2/1, member2 1/2"},
		{name: "a new cluster not reported yet", spec: placement(workv1alpha2.TargetCluster{Name: "member1", Replicas: 1}, workv1alpha2.TargetCluster{Name: "member3", Replicas: 1}),
			status: []workv1alpha2.AggregatedStatusItem{item("member1", `{"readyReplicas":1}`, true)},
			detail: "member1 1/1, member3 0/1"},
		{name: "no ready replica: readyReplicas left out", spec: placement(workv1alpha2.TargetCluster{Name: "member1", Replicas: 1}),
			status: []workv1alpha2.AggregatedStatusItem{item("member1", `{"replicas":1}`, true)},
			detail: "member1 0/1"},
		{name: "clusters outside the placement do not count", spec: placement(workv1alpha2.TargetCluster{Name: "member1", Replicas: 1}),
			status: []workv1alpha2.AggregatedStatusItem{item("member1", `{"readyReplicas":1}`, true), item("member2", `{"readyReplicas":0}`, true)},
			ready:  true, detail: "member1 1/1"},
		{name: "no replicas: applied is enough", spec: placement(workv1alpha2.TargetCluster{Name: "member1"}, workv1alpha2.TargetCluster{Name: "member2"}),
			status: []workv1alpha2.AggregatedStatusItem{item("member1", "", true), item("member2", "", false)},
			detail: "member1 applied, member2 not applied yet"},
		{name: "no placement", spec: placement(), detail: "no cluster in the placement"},
		{name: "a deployment not reported yet counts zero ready", spec: of("apps/v1", "Deployment", workv1alpha2.TargetCluster{Name: "member1", Replicas: 1}),
			status: []workv1alpha2.AggregatedStatusItem{item("member1", "", true)}, detail: "member1 0/1"},
		{name: "a job: active and succeeded pods", spec: of("batch/v1", "Job", workv1alpha2.TargetCluster{Name: "member1", Replicas: 2}, workv1alpha2.TargetCluster{Name: "member2", Replicas: 1}),
			status: []workv1alpha2.AggregatedStatusItem{item("member1", `{"active":1,"succeeded":1}`, true), item("member2", `{"succeeded":1}`, true)},
			ready:  true, detail: "member1 2/2 (active+succeeded), member2 1/1 (active+succeeded)"},
		{name: "a job whose pods have not started", spec: of("batch/v1", "Job", workv1alpha2.TargetCluster{Name: "member1", Replicas: 2}),
			status: []workv1alpha2.AggregatedStatusItem{item("member1", `{}`, true)}, detail: "member1 0/2 (active+succeeded)"},
		{name: "a job whose ready count is reflected", spec: of("batch/v1", "Job", workv1alpha2.TargetCluster{Name: "member1", Replicas: 2}),
			status: []workv1alpha2.AggregatedStatusItem{item("member1", `{"active":2,"ready":1}`, true)}, detail: "member1 1/2 (ready+succeeded)"},
		{name: "another kind: Karmada's health", spec: of("example.io/v1", "Widget", workv1alpha2.TargetCluster{Name: "member1", Replicas: 1}, workv1alpha2.TargetCluster{Name: "member2", Replicas: 1}),
			status: []workv1alpha2.AggregatedStatusItem{health(item("member1", `{"phase":"Up"}`, true), workv1alpha2.ResourceHealthy), health(item("member2", `{"phase":"Down"}`, true), workv1alpha2.ResourceUnhealthy)},
			detail: "member1 healthy, member2 unhealthy"},
		{name: "another kind without an interpreted health is not gated", spec: of("example.io/v1", "Widget", workv1alpha2.TargetCluster{Name: "member1", Replicas: 1}),
			status: []workv1alpha2.AggregatedStatusItem{health(item("member1", `{"phase":"Up"}`, true), workv1alpha2.ResourceUnknown)},
			ready:  true, detail: "not gated: Widget reports no ready replicas and Karmada interprets no health for it, so applied is done (member1 applied)"},
		{name: "another kind not applied yet", spec: of("example.io/v1", "Widget", workv1alpha2.TargetCluster{Name: "member1", Replicas: 1}),
			detail: "member1 not applied yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckReady(tt.spec, workv1alpha2.ResourceBindingStatus{AggregatedStatus: tt.status})
			assert.Equal(t, tt.ready, got.Ready)
			assert.Equal(t, tt.detail, got.Detail)
		})
	}
}
