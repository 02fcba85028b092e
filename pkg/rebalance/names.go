package rebalance

import "strings"

// BindingName returns the name Karmada gives the binding of a resource
// template called name of the given kind: every ':' in the name becomes '.',
// then name and kind are joined with '-' and the result is lower-cased.
// The API group plays no part, which is why VerifyBinding exists.
func BindingName(name, kind string) string {
	// Binding names must be DNS subdomains; ':' appears in RBAC object names.
	return strings.ToLower(strings.ReplaceAll(name, ":", ".") + "-" + kind)
}

// BindingNameFor returns the binding name of a workload.
func BindingNameFor(w Workload) string {
	return BindingName(w.Name, w.Kind)
}

// IsClusterScoped reports whether a workload names a cluster-scoped template,
// which a WorkloadRebalancer expresses with an empty namespace.
func IsClusterScoped(w Workload) bool {
	return w.Namespace == ""
}

// BindingKind returns the kind of binding Karmada keeps for a workload:
// ResourceBinding for namespaced templates, ClusterResourceBinding otherwise.
func BindingKind(w Workload) string {
	if IsClusterScoped(w) {
		return "ClusterResourceBinding"
	}
	return "ResourceBinding"
}

// BindingRef names a workload's binding for messages, e.g.
// "resourcebinding default/nginx-deployment" or
// "clusterresourcebinding system.aggregate-to-edit-clusterrole".
func BindingRef(w Workload) string {
	if IsClusterScoped(w) {
		return "clusterresourcebinding " + BindingNameFor(w)
	}
	return "resourcebinding " + w.Namespace + "/" + BindingNameFor(w)
}

// WorkloadRef names a workload for messages, e.g. "apps/v1 Deployment default/nginx"
// or "rbac.authorization.k8s.io/v1 ClusterRole admin".
func WorkloadRef(w Workload) string {
	if IsClusterScoped(w) {
		return w.APIVersion + " " + w.Kind + " " + w.Name
	}
	return w.APIVersion + " " + w.Kind + " " + w.Namespace + "/" + w.Name
}
