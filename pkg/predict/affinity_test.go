package predict

import (
	"context"
	"testing"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// After a failover to the backup clusterAffinities group, a triggered
// reschedule stays in that group on v1.18 and older and starts again from
// the primary group on v1.19 and newer (karmada#5425); a control plane that
// may run either gets no prediction where the two differ.
func TestPredictAffinityGroupByRelease(t *testing.T) {
	v119 := &karmadaversion.Info{Oldest: karmadaversion.Release{Minor: 19}}
	v118up := &karmadaversion.Info{Oldest: karmadaversion.Release{Minor: 18}}
	placement := dynamic
	placement.ClusterAffinities = []policyv1alpha1.ClusterAffinityTerm{
		{AffinityName: "primary", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}},
		{AffinityName: "backup", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}},
	}
	tests := []struct {
		name      string
		release   *karmadaversion.Info
		verdict   Verdict
		reason    string
		predicted map[string]int32
	}{
		{name: "the pinned rules (v1.18) stay in the backup group", verdict: Unchanged, reason: ReasonFreshReschedule, predicted: map[string]int32{"member2": 3}},
		{name: "v1.18 stays in the backup group", release: v118, verdict: Unchanged, reason: ReasonFreshReschedule, predicted: map[string]int32{"member2": 3}},
		{name: "v1.19 goes back to the primary group", release: v119, verdict: WouldMove, reason: ReasonFreshReschedule, predicted: map[string]int32{"member1": 3}},
		{name: "v1.18 or newer cannot be told", release: v118up, verdict: CannotPredict, reason: ReasonReleaseDependent, predicted: map[string]int32{"member2": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb := binding("a", placement, 3, tc("member2", 3))
			rb.Status.SchedulerObservedAffinityName = "backup"
			in := input([]*clusterv1alpha1.Cluster{cluster("member1", 100), cluster("member2", 100)}, rb)
			got, err := Predict(context.Background(), in, []rebalance.Target{deploy("a")}, Options{Release: tt.release})
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, tt.verdict, got[0].Verdict, got[0].Message)
			assert.Equal(t, tt.reason, got[0].Reason)
			assert.Equal(t, tt.predicted, placementMap(got[0].Predicted))
			if tt.verdict == CannotPredict {
				assert.Contains(t, got[0].Message, `v1.18 and older reschedule from clusterAffinities group "backup"`)
				assert.Contains(t, got[0].Message, `v1.19 and newer start again from the first group, "primary" (placement {member1:3}`)
			}
		})
	}
}
