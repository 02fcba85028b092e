package rebalance

import (
	"testing"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
)

func TestFormatPlacement(t *testing.T) {
	tests := []struct {
		name     string
		clusters []workv1alpha2.TargetCluster
		want     string
	}{
		{name: "nil", clusters: nil, want: "{}"},
		{name: "empty", clusters: []workv1alpha2.TargetCluster{}, want: "{}"},
		{name: "one", clusters: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 3}}, want: "{member1:3}"},
		{
			name:     "keeps spec order",
			clusters: []workv1alpha2.TargetCluster{{Name: "member2", Replicas: 2}, {Name: "member1", Replicas: 1}},
			want:     "{member2:2, member1:1}",
		},
		{name: "zero replicas (duplicated, non-workload)", clusters: []workv1alpha2.TargetCluster{{Name: "member1"}}, want: "{member1:0}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, FormatPlacement(tt.clusters))
		})
	}
}
