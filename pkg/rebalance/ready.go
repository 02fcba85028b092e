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

// replicaKinds report readyReplicas in their member status (Karmada's
// default interpreters reflect it); a missing count is zero ready.
var replicaKinds = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "StatefulSet"}: true,
	{Group: "apps", Kind: "ReplicaSet"}:  true,
}

// CheckReady reads, from a binding's spec.clusters and
// status.aggregatedStatus, whether the replicas of the placement are ready
// in the member clusters, by the template's kind:
//
//   - Deployment, StatefulSet, ReplicaSet, and any kind whose member status
//     reports readyReplicas or replicas: every cluster with replicas reports
//     at least that many readyReplicas;
//   - Job: every cluster's pods that run or ran to completion (active, or
//     ready when a customization reflects it, plus succeeded) cover its share;
//   - any other kind: the health Karmada's resource interpreter gives the
//     member object (aggregatedStatus[].health) is Healthy in every cluster;
//     where it interprets none (Unknown), the kind is not gated: applied is
//     enough, and the detail says so.
//
// A cluster with no replicas (a ConfigMap, say) is ready once the member
// object is applied. Clusters outside the placement do not count: replicas
// leaving a cluster are the member cluster's business. No member
// credentials are needed; Karmada collects the member objects' status into
// the binding.
func CheckReady(spec workv1alpha2.ResourceBindingSpec, status workv1alpha2.ResourceBindingStatus) Readiness {
	if len(spec.Clusters) == 0 {
		return Readiness{Detail: "no cluster in the placement"}
	}
	gk := schema.FromAPIVersionAndKind(spec.Resource.APIVersion, spec.Resource.Kind).GroupKind()
	items := make(map[string]workv1alpha2.AggregatedStatusItem, len(status.AggregatedStatus))
	for _, item := range status.AggregatedStatus {
		items[item.ClusterName] = item
	}
	switch {
	case gk == jobKind:
		return checkJob(spec, items)
	case replicaKinds[gk] || reportsReplicas(status):
		return checkReplicas(spec, status, items)
	}
	return checkHealth(gk, spec, items)
}

// reportsReplicas tells a member status with replica counts.
func reportsReplicas(status workv1alpha2.ResourceBindingStatus) bool {
	for _, item := range status.AggregatedStatus {
		fields := statusFields(item)
		if _, ok := fields[readyReplicasField]; ok {
			return true
		}
		if _, ok := fields["replicas"]; ok {
			return true
		}
	}
	return false
}

// statusFields reads the top-level fields of a member status; nil when
// there is none or it does not parse.
func statusFields(item workv1alpha2.AggregatedStatusItem) map[string]json.RawMessage {
	if item.Status == nil || len(item.Status.Raw) == 0 {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(item.Status.Raw, &fields); err != nil {
		return nil
	}
	return fields
}

// count reads a numeric field; false when absent or not a number.
func count(fields map[string]json.RawMessage, name string) (int32, bool) {
	raw, ok := fields[name]
	if !ok || string(raw) == "null" {
		return 0, false
	}
	var n float64
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, false
	}
	return int32(n), true
}

// appliedPart says how a cluster without replicas stands; false when it is
// not applied yet.
func appliedPart(name string, items map[string]workv1alpha2.AggregatedStatusItem) (string, bool) {
	if items[name].Applied {
		return name + " applied", true
	}
	return name + " not applied yet", false
}

func checkReplicas(spec workv1alpha2.ResourceBindingSpec, status workv1alpha2.ResourceBindingStatus, items map[string]workv1alpha2.AggregatedStatusItem) Readiness {
	ready := ReadyReplicas(spec, status)
	allReady := true
	parts := make([]string, 0, len(spec.Clusters))
	for _, target := range spec.Clusters {
		if target.Replicas == 0 {
			part, ok := appliedPart(target.Name, items)
			allReady = allReady && ok
			parts = append(parts, part)
			continue
		}
		// A member Deployment with no ready replica leaves readyReplicas
		// out of its status: a missing count is zero ready.
		n := ready[target.Name]
		if n < target.Replicas {
			allReady = false
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d", target.Name, n, target.Replicas))
	}
	return Readiness{Ready: allReady, Detail: strings.Join(parts, ", ")}
}

// checkJob counts a Job's pods that run or ran to completion: succeeded,
// plus ready where a customization reflects it, else active (Karmada
// v1.18's Job interpreter reflects active and succeeded only).
func checkJob(spec workv1alpha2.ResourceBindingSpec, items map[string]workv1alpha2.AggregatedStatusItem) Readiness {
	allReady := true
	parts := make([]string, 0, len(spec.Clusters))
	for _, target := range spec.Clusters {
		if target.Replicas == 0 {
			part, ok := appliedPart(target.Name, items)
			allReady = allReady && ok
			parts = append(parts, part)
			continue
		}
		fields := statusFields(items[target.Name])
		succeeded, _ := count(fields, "succeeded")
		running, what := int32(0), "active"
		if n, ok := count(fields, jobReadyField); ok {
			running, what = n, "ready"
		} else if n, ok := count(fields, "active"); ok {
			running = n
		}
		if running+succeeded < target.Replicas {
			allReady = false
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d (%s+succeeded)", target.Name, running+succeeded, target.Replicas, what))
	}
	return Readiness{Ready: allReady, Detail: strings.Join(parts, ", ")}
}

// checkHealth gates a kind without replica counts on the health Karmada's
// resource interpreter gives its member objects.
func checkHealth(gk schema.GroupKind, spec workv1alpha2.ResourceBindingSpec, items map[string]workv1alpha2.AggregatedStatusItem) Readiness {
	allReady, interpreted := true, false
	parts := make([]string, 0, len(spec.Clusters))
	for _, target := range spec.Clusters {
		item, ok := items[target.Name]
		switch {
		case !ok || !item.Applied:
			allReady = false
			parts = append(parts, target.Name+" not applied yet")
		case item.Health == workv1alpha2.ResourceHealthy:
			interpreted = true
			parts = append(parts, target.Name+" healthy")
		case item.Health == workv1alpha2.ResourceUnhealthy:
			interpreted = true
			allReady = false
			parts = append(parts, target.Name+" unhealthy")
		default:
			parts = append(parts, target.Name+" applied")
		}
	}
	detail := strings.Join(parts, ", ")
	if !interpreted && allReady {
		kind := gk.Kind
		if kind == "" {
			kind = "the kind"
		}
		detail = fmt.Sprintf("not gated: %s reports no ready replicas and Karmada interprets no health for it, so applied is done (%s)", kind, detail)
	}
	return Readiness{Ready: allReady, Detail: detail}
}
