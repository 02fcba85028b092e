package deschedule

import (
	"errors"
	"testing"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

func TestComputePlan(t *testing.T) {
	countErr := errors.New("connection refused")
	tests := []struct {
		name       string
		inputs     []ClusterInput
		wantNew    []int32
		wantAction []Action
	}{
		{
			name:       "unschedulable pods are evicted",
			inputs:     []ClusterInput{{Cluster: "m1", Spec: 5, Ready: ptr.To[int32](1), Unschedulable: 2}},
			wantNew:    []int32{3},
			wantAction: []Action{ActionEvict},
		},
		{
			name:       "ready replicas are a floor",
			inputs:     []ClusterInput{{Cluster: "m1", Spec: 5, Ready: ptr.To[int32](3), Unschedulable: 4}},
			wantNew:    []int32{3},
			wantAction: []Action{ActionEvict},
		},
		{
			name:       "unknown ready is no floor and makes the cluster a candidate",
			inputs:     []ClusterInput{{Cluster: "m1", Spec: 5, Unschedulable: 5}},
			wantNew:    []int32{0},
			wantAction: []Action{ActionEvict},
		},
		{
			name:       "zero ready allows dropping to zero",
			inputs:     []ClusterInput{{Cluster: "m1", Spec: 3, Ready: ptr.To[int32](0), Unschedulable: 3}},
			wantNew:    []int32{0},
			wantAction: []Action{ActionEvict},
		},
		{
			name:       "more unschedulable than spec changes nothing",
			inputs:     []ClusterInput{{Cluster: "m1", Spec: 2, Ready: ptr.To[int32](0), Unschedulable: 3}},
			wantNew:    []int32{2},
			wantAction: []Action{ActionOverSpec},
		},
		{
			name:       "nothing unschedulable",
			inputs:     []ClusterInput{{Cluster: "m1", Spec: 4, Ready: ptr.To[int32](2)}},
			wantNew:    []int32{4},
			wantAction: []Action{ActionNone},
		},
		{
			name:       "all ready is not examined even with a stale count",
			inputs:     []ClusterInput{{Cluster: "m1", Spec: 4, Ready: ptr.To[int32](4), Unschedulable: 2}},
			wantNew:    []int32{4},
			wantAction: []Action{ActionReady},
		},
		{
			name:       "more ready than spec is not a candidate",
			inputs:     []ClusterInput{{Cluster: "m1", Spec: 2, Ready: ptr.To[int32](3), Unschedulable: 1}},
			wantNew:    []int32{2},
			wantAction: []Action{ActionReady},
		},
		{
			name: "several clusters are planned independently",
			inputs: []ClusterInput{
				{Cluster: "m1", Spec: 4, Ready: ptr.To[int32](4)},
				{Cluster: "m2", Spec: 3, Ready: ptr.To[int32](1), Unschedulable: 2},
				{Cluster: "m3", Spec: 3, Unschedulable: 1},
				{Cluster: "m4", Spec: 1, Ready: ptr.To[int32](0), Unschedulable: 2},
			},
			wantNew:    []int32{4, 1, 2, 1},
			wantAction: []Action{ActionReady, ActionEvict, ActionEvict, ActionOverSpec},
		},
		{
			name: "one uncounted candidate blocks the whole binding",
			inputs: []ClusterInput{
				{Cluster: "m1", Spec: 3, Ready: ptr.To[int32](1), Unschedulable: 2},
				{Cluster: "m2", Spec: 3, Ready: ptr.To[int32](0), CountErr: countErr},
				{Cluster: "m3", Spec: 2, Ready: ptr.To[int32](1)},
			},
			wantNew:    []int32{3, 3, 2},
			wantAction: []Action{ActionBlocked, ActionCountFailed, ActionNone},
		},
		{
			name: "a cluster refilled after an eviction has bounced back and is left alone",
			inputs: []ClusterInput{
				{Cluster: "m1", Spec: 1, Ready: ptr.To[int32](0), Unschedulable: 1, LastEviction: &Eviction{To: 0}},
				{Cluster: "m2", Spec: 2, Ready: ptr.To[int32](1), Unschedulable: 1, LastEviction: &Eviction{To: 2}},
			},
			wantNew:    []int32{1, 1},
			wantAction: []Action{ActionBouncedBack, ActionEvict},
		},
		{
			name: "an earlier eviction whose replicas did not come back does not hold",
			inputs: []ClusterInput{
				{Cluster: "m1", Spec: 2, Ready: ptr.To[int32](0), Unschedulable: 2, LastEviction: &Eviction{To: 2}},
			},
			wantNew:    []int32{0},
			wantAction: []Action{ActionEvict},
		},
		{
			name: "a count error on a cluster that is all ready blocks nothing",
			inputs: []ClusterInput{
				{Cluster: "m1", Spec: 3, Ready: ptr.To[int32](1), Unschedulable: 2},
				{Cluster: "m2", Spec: 3, Ready: ptr.To[int32](3), CountErr: countErr},
			},
			wantNew:    []int32{1, 3},
			wantAction: []Action{ActionEvict, ActionReady},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := ComputePlan(tt.inputs)
			var gotNew []int32
			var gotAction []Action
			for i, r := range rows {
				assert.Equal(t, tt.inputs[i].Cluster, r.Cluster)
				assert.Equal(t, tt.inputs[i].Spec, r.Spec)
				gotNew = append(gotNew, r.New)
				gotAction = append(gotAction, r.Action)
			}
			assert.Equal(t, tt.wantNew, gotNew)
			assert.Equal(t, tt.wantAction, gotAction)
		})
	}
}

func TestComputePlanRowDetails(t *testing.T) {
	countErr := errors.New("forbidden")
	rows := ComputePlan([]ClusterInput{
		{Cluster: "m1", Spec: 3, Unschedulable: 1},
		{Cluster: "m2", Spec: 3, Ready: ptr.To[int32](3), Unschedulable: 9},
		{Cluster: "m3", Spec: 3, CountErr: countErr},
	})
	assert.Equal(t, UnknownReady, rows[0].ReadyOrUnknown())
	assert.True(t, rows[0].Counted)
	assert.Equal(t, int32(1), rows[0].Unschedulable)
	assert.False(t, rows[1].Counted, "clusters that are not examined carry no count")
	assert.Zero(t, rows[1].Unschedulable)
	assert.Equal(t, int32(3), rows[1].ReadyOrUnknown())
	assert.False(t, rows[2].Counted)
	assert.ErrorIs(t, rows[2].Err, countErr)
}

func TestSucceedMessage(t *testing.T) {
	tests := []struct {
		name string
		rows []ClusterRow
		want string
	}{
		{
			name: "one cluster",
			rows: []ClusterRow{{Cluster: "member1", Spec: 4, New: 2}, {Cluster: "member2", Spec: 2, New: 2}},
			want: "Binding has been descheduled, 2 replica(s) in cluster(member1), 2 total descheduled replica(s)",
		},
		{
			name: "several clusters in spec order",
			rows: []ClusterRow{{Cluster: "b", Spec: 4, New: 3}, {Cluster: "a", Spec: 2, New: 0}},
			want: "Binding has been descheduled, 1 replica(s) in cluster(b), 2 replica(s) in cluster(a), 3 total descheduled replica(s)",
		},
		{name: "nothing evicted", rows: []ClusterRow{{Cluster: "a", Spec: 2, New: 2}}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, SucceedMessage(tt.rows))
		})
	}
}

func TestReadyReplicas(t *testing.T) {
	item := func(cluster, raw string) workv1alpha2.AggregatedStatusItem {
		it := workv1alpha2.AggregatedStatusItem{ClusterName: cluster}
		if raw != "" {
			it.Status = &runtime.RawExtension{Raw: []byte(raw)}
		}
		return it
	}
	rb := &workv1alpha2.ResourceBinding{Status: workv1alpha2.ResourceBindingStatus{AggregatedStatus: []workv1alpha2.AggregatedStatusItem{
		item("ok", `{"replicas":3,"readyReplicas":2}`),
		item("zero", `{"readyReplicas":0}`),
		item("missing-field", `{"replicas":3}`),
		item("no-status", ""),
		item("garbage", `not json`),
		item("string", `{"readyReplicas":"2"}`),
		item("null", `{"readyReplicas":null}`),
	}}}
	assert.Equal(t, map[string]int32{"ok": 2, "zero": 0}, rebalance.ReadyReplicas(rb.Spec, rb.Status))
}
