package rebalance

import (
	"encoding/json"
	"fmt"
	"strings"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// readyReplicasField is the status field Karmada reflects into
// aggregatedStatus for Deployments and StatefulSets, and the one a
// ResourceInterpreterCustomization is expected to reflect for a custom kind.
const readyReplicasField = "readyReplicas"

// jobReadyField is a Job's count of ready pods. Karmada v1.18's Job
// interpreter does not reflect it (only active, succeeded, failed, the
// conditions and the start and completion times), so a Job's ready count is
// unknown unless a customization's ReflectStatus adds it. active is never
// used: it counts pending pods too, and would hide the very pods that cannot
// run.
const jobReadyField = "ready"

var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

// ReadyField is the aggregatedStatus field that holds the ready count of a
// workload of kind: "ready" for Jobs, "readyReplicas" for every other kind.
func ReadyField(kind schema.GroupKind) string {
	if kind == jobKind {
		return jobReadyField
	}
	return readyReplicasField
}

// ReadyReplicas reads, per cluster, the ready count reported in the
// aggregatedStatus of a binding whose template is of the kind spec.resource
// names (ReadyField). Clusters without a status, with a status that does
// not parse, or without a numeric count are absent from the map, which
// makes their ready count unknown.
func ReadyReplicas(spec workv1alpha2.ResourceBindingSpec, status workv1alpha2.ResourceBindingStatus) map[string]int32 {
	field := ReadyField(schema.FromAPIVersionAndKind(spec.Resource.APIVersion, spec.Resource.Kind).GroupKind())
	ready := make(map[string]int32, len(status.AggregatedStatus))
	for _, item := range status.AggregatedStatus {
		if item.Status == nil || len(item.Status.Raw) == 0 {
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(item.Status.Raw, &fields); err != nil {
			continue
		}
		raw, ok := fields[field]
		if !ok || string(raw) == "null" {
			continue
		}
		var n float64
		if err := json.Unmarshal(raw, &n); err != nil {
			continue
		}
		ready[item.ClusterName] = int32(n)
	}
	return ready
}

// CheckReady reads, from a binding's spec.clusters and
// status.aggregatedStatus, whether the replicas of the placement are ready
// in the member clusters: every cluster with replicas reports at least that
// many ready (ReadyReplicas, by the template's kind). A cluster with no
// replicas (a workload without replicas, such as a ConfigMap) is ready once
// the member object is applied. Clusters outside the placement do not
// count: replicas leaving a cluster are the member cluster's business. No
// member credentials are needed; Karmada collects the member objects'
// status into the binding.
func CheckReady(spec workv1alpha2.ResourceBindingSpec, status workv1alpha2.ResourceBindingStatus) Readiness {
	if len(spec.Clusters) == 0 {
		return Readiness{Detail: "no cluster in the placement"}
	}
	ready := ReadyReplicas(spec, status)
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
