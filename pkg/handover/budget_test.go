package handover

import (
	"testing"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func tc(pairs ...any) []workv1alpha2.TargetCluster {
	var out []workv1alpha2.TargetCluster
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, workv1alpha2.TargetCluster{Name: pairs[i].(string), Replicas: int32(pairs[i+1].(int))})
	}
	return out
}

func TestBudgetResolve(t *testing.T) {
	tests := []struct {
		surge, unavailable string
		replicas           int32
		want               Limits
		oneWrite           bool
	}{
		{"100%", "0", 3, Limits{Surge: 3}, false},
		{"25%", "25%", 3, Limits{Surge: 1, Unavailable: 0}, false},
		{"1", "100%", 3, Limits{Surge: 1, Unavailable: 3}, true},
		{"0", "1", 3, Limits{Unavailable: 1}, false},
	}
	for _, tt := range tests {
		b := Budget{MaxSurge: intstr.Parse(tt.surge), MaxUnavailable: intstr.Parse(tt.unavailable)}
		got, err := b.Resolve(tt.replicas)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, "%s/%s", tt.surge, tt.unavailable)
		assert.Equal(t, tt.oneWrite, got.OneWrite(tt.replicas))
	}
	assert.Error(t, Budget{MaxSurge: intstr.Parse("0"), MaxUnavailable: intstr.Parse("0%")}.Validate())
	assert.Error(t, Budget{MaxSurge: intstr.Parse("x%"), MaxUnavailable: intstr.Parse("0")}.Validate())
	assert.NoError(t, DefaultBudget().Validate())
}

func TestCovering(t *testing.T) {
	assert.Equal(t, tc("member1", 2, "member2", 3), Covering(tc("member2", 3), tc("member1", 2, "member2", 1)))
	assert.Equal(t, tc("member1", 3, "member2", 3), Covering(tc("member2", 3), tc("member1", 3), tc("member1", 1, "member2", 2)))
}

// steps runs the staging loop of a move on paper: the placements written,
// each followed (after its replicas are ready) by a shrink, until all gains
// are staged.
func steps(now, target []workv1alpha2.TargetCluster, replicas int32, l Limits) [][]workv1alpha2.TargetCluster {
	cur, cover := toPlacement(now), toPlacement(Covering(now, target))
	var out [][]workv1alpha2.TargetCluster
	for i := 0; i < 20; i++ {
		next, done := grow(cur, gaining(toPlacement(now), cover), replicas, l.Surge)
		if !next.equal(cur) {
			out = append(out, next.clusters())
			cur = next
		}
		if done {
			return out
		}
		after := shrink(cur, keeping(target), replicas, l.Unavailable)
		if after.equal(cur) {
			return append(out, nil)
		}
		out = append(out, after.clusters())
		cur = after
	}
	return out
}

func TestSteps(t *testing.T) {
	// The whole gain at once: stage, then the release scales the source down.
	assert.Equal(t, [][]workv1alpha2.TargetCluster{tc("member1", 1, "member2", 3)},
		steps(tc("member2", 3), tc("member1", 1, "member2", 2), 3, Limits{Surge: 3}))
	// An Aggregated move with a surge of one: one replica at a time.
	assert.Equal(t, [][]workv1alpha2.TargetCluster{
		tc("member1", 3, "member2", 1), tc("member1", 2, "member2", 1),
		tc("member1", 2, "member2", 2), tc("member1", 1, "member2", 2),
		tc("member1", 1, "member2", 3),
	}, steps(tc("member1", 3), tc("member2", 3), 3, Limits{Surge: 1}))
	// No surge: stop one first, then start its replacement.
	assert.Equal(t, [][]workv1alpha2.TargetCluster{
		tc("member1", 2), tc("member1", 2, "member2", 1), tc("member1", 1, "member2", 1), tc("member1", 1, "member2", 2),
		tc("member2", 2), tc("member2", 3),
	}, steps(tc("member1", 3), tc("member2", 3), 3, Limits{Unavailable: 1}))
}

func TestKeeping(t *testing.T) {
	assert.Equal(t, tc("member1", 1, "member2", 1), keeping(tc("member1", 1, "member2", 2), tc("member1", 2, "member2", 1)).clusters())
	assert.Equal(t, tc("member2", 1), keeping(tc("member1", 1, "member2", 2), tc("member2", 1)).clusters())
}

func TestReadyWithin(t *testing.T) {
	after := toPlacement(tc("member1", 1, "member2", 2))
	assert.Equal(t, int32(2), readyWithin(map[string]int32{"member2": 3}, after))
	assert.Equal(t, int32(3), readyWithin(map[string]int32{"member1": 1, "member2": 3}, after))
}
