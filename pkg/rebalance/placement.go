package rebalance

import (
	"strconv"
	"strings"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
)

// FormatPlacement renders a scheduling result the way the scheduler's
// ScheduleBindingSucceed event does: "{member1:2, member2:1}", in the order of
// spec.clusters, and "{}" when there are no clusters.
func FormatPlacement(clusters []workv1alpha2.TargetCluster) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, cluster := range clusters {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(cluster.Name)
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(int64(cluster.Replicas), 10))
	}
	b.WriteByte('}')
	return b.String()
}
