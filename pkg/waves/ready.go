package waves

import (
	"fmt"
	"strings"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
)

// Readiness is what a binding's aggregatedStatus says about the replicas of
// its current placement.
type Readiness struct {
	// Ready is set when every cluster of the placement reports its share.
	Ready bool
	// Detail lists, per cluster of the placement, ready/wanted replicas
	// (e.g. "member1 2/2, member2 0/1"), or what is missing.
	Detail string
}

// CheckReady reads, from a binding's spec.clusters and
// status.aggregatedStatus, whether the replicas of the placement are ready
// in the member clusters: every cluster with replicas reports at least that
// many readyReplicas. A cluster with no replicas (a workload without
// replicas, such as a ConfigMap) is ready once the member object is
// applied. Clusters outside the placement do not count: replicas leaving a
// cluster are the member cluster's business. No member credentials are
// needed; Karmada collects the member objects' status into the binding.
func CheckReady(spec workv1alpha2.ResourceBindingSpec, status workv1alpha2.ResourceBindingStatus) Readiness {
	if len(spec.Clusters) == 0 {
		return Readiness{Detail: "no cluster in the placement"}
	}
	ready := deschedule.ReadyReplicas(&workv1alpha2.ResourceBinding{Status: status})
	applied := make(map[string]bool, len(status.AggregatedStatus))
	for _, item := range status.AggregatedStatus {
		applied[item.ClusterName] = item.Applied
	}
	allReady := true
	parts := make([]string, 0, len(spec.Clusters))
	for _, target := range spec.Clusters {
		switch {
		case target.Replicas == 0:
			if applied[target.Name] {
				parts = append(parts, target.Name+" applied")
			} else {
				allReady = false
				parts = append(parts, target.Name+" not applied yet")
			}
		default:
			// A member Deployment with no ready replica leaves readyReplicas
			// out of its status: a missing count is zero ready.
			n := ready[target.Name]
			if n < target.Replicas {
				allReady = false
			}
			parts = append(parts, fmt.Sprintf("%s %d/%d", target.Name, n, target.Replicas))
		}
	}
	return Readiness{Ready: allReady, Detail: strings.Join(parts, ", ")}
}
