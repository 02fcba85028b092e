package run

import (
	"testing"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// TestRecordPlan checks when a request is recorded, and as what.
func TestRecordPlan(t *testing.T) {
	web := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	manifest := &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "from-file", Labels: map[string]string{"a": "b"}},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{web}},
	}
	targets := []rebalance.Target{{Workload: web}}
	tests := []struct {
		name    string
		req     Request
		want    *recordPlan
		wantErr string
	}{
		{name: "plain", req: Request{Targets: targets, DryRun: rebalance.DryRunNone}},
		{name: "a dry run records nothing", req: Request{Targets: targets, DryRun: rebalance.DryRunClient, Record: Recording{Name: "x"}}},
		{name: "named", req: Request{Targets: targets, DryRun: rebalance.DryRunNone, Record: Recording{Name: "x", TTL: ptr.To[int32](60), Labels: map[string]string{"k": "v"}}},
			want: &recordPlan{desired: &appsv1alpha1.WorkloadRebalancer{
				ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"k": "v"}},
				Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{web}, TTLSecondsAfterFinished: ptr.To[int32](60)},
			}}},
		{name: "generated name", req: Request{Targets: targets, DryRun: rebalance.DryRunNone, Record: Recording{ServerSide: true}},
			want: &recordPlan{desired: &appsv1alpha1.WorkloadRebalancer{
				Spec: appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{web}},
			}, apply: record.ApplyOptions{AnyTTL: true}, generate: true}},
		{name: "nothing to record", req: Request{DryRun: rebalance.DryRunNone, Record: Recording{Name: "x"}},
			wantErr: "nothing to record: the selection holds no workload"},
		{name: "a manifest", req: Request{Targets: targets, Rebalancers: []*appsv1alpha1.WorkloadRebalancer{manifest}, DryRun: rebalance.DryRunNone},
			want: &recordPlan{desired: &appsv1alpha1.WorkloadRebalancer{
				ObjectMeta: metav1.ObjectMeta{Name: "from-file", Labels: map[string]string{"a": "b"}},
				Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{web}},
			}, apply: record.ApplyOptions{UpdateSpec: true}, fromManifest: true}},
		{name: "a manifest and another name", req: Request{Targets: targets, Rebalancers: []*appsv1alpha1.WorkloadRebalancer{manifest}, DryRun: rebalance.DryRunNone, Record: Recording{Name: "other"}},
			wantErr: "the manifest names workloadrebalancer from-file but --name says other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := tt.req.recordPlan()
			recorded, rerr := tt.req.Recorded()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Error(t, rerr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want != nil, recorded)
			assert.Equal(t, tt.want, plan)
		})
	}
}

func TestWaveStop(t *testing.T) {
	assert.Empty(t, WaveStop(nil, ""))
	assert.Empty(t, WaveStop(&waves.Result{}, ""))
	res := &waves.Result{Stop: waves.StopFailureBudget, StopMessage: "3 workload(s) failed (--max-failures 3)", NotStarted: 7, InFlightAtStop: 2}
	assert.Equal(t, "stopped: 3 workload(s) failed (--max-failures 3); 2 workload(s) were in flight then (see the table), 7 not started (pending): "+
		"run the same command again to rebalance them (workloads already triggered are rebalanced again: give --name to record the run and continue where it stopped)",
		WaveStop(res, ""))
	res.InFlightAtStop = 0
	assert.Equal(t, "stopped: 3 workload(s) failed (--max-failures 3); none was in flight then, 7 not started (pending): "+
		"run the same command again to continue with them; workloadrebalancer fleet records which workloads were triggered, and none is triggered twice",
		WaveStop(res, "fleet"))
}
