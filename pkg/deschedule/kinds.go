package deschedule

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Workload kinds with rules of their own. Every other kind is found through
// the owner chain of its pods alone.
var (
	deploymentKind  = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	replicaSetKind  = schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
	statefulSetKind = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	jobKind         = schema.GroupKind{Group: "batch", Kind: "Job"}
	podKind         = schema.GroupKind{Kind: "Pod"}
)

// builtinKind is a kind whose resource name is known without discovery.
type builtinKind struct {
	gvr        schema.GroupVersionResource
	kind       string
	singular   string
	shortNames []string
	namespaced bool
}

// builtinKinds are the Kubernetes kinds a pass meets most: templates Karmada
// divides and the controllers between them and their pods. Anything else is
// mapped through the API server's discovery.
var builtinKinds = []builtinKind{
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, kind: "Deployment", singular: "deployment", shortNames: []string{"deploy"}, namespaced: true},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, kind: "StatefulSet", singular: "statefulset", shortNames: []string{"sts"}, namespaced: true},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, kind: "ReplicaSet", singular: "replicaset", shortNames: []string{"rs"}, namespaced: true},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, kind: "DaemonSet", singular: "daemonset", shortNames: []string{"ds"}, namespaced: true},
	{gvr: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, kind: "Job", singular: "job", namespaced: true},
	{gvr: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}, kind: "CronJob", singular: "cronjob", shortNames: []string{"cj"}, namespaced: true},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, kind: "Pod", singular: "pod", shortNames: []string{"po"}, namespaced: true},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"}, kind: "ReplicationController", singular: "replicationcontroller", shortNames: []string{"rc"}, namespaced: true},
}

func builtinByKind(gk schema.GroupKind) (builtinKind, bool) {
	for _, b := range builtinKinds {
		if b.gvr.Group == gk.Group && b.kind == gk.Kind {
			return b, true
		}
	}
	return builtinKind{}, false
}

// resourceMapping is how a kind is listed: its resource and whether it is namespaced.
type resourceMapping struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// mapKind finds the resource of gvk: the built-in table first, then mapper
// (discovery), which may be nil. An empty version takes the preferred one.
func mapKind(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (resourceMapping, error) {
	if b, ok := builtinByKind(gvk.GroupKind()); ok {
		return resourceMapping{gvr: b.gvr, namespaced: b.namespaced}, nil
	}
	if mapper == nil {
		return resourceMapping{}, fmt.Errorf("kind %s is not a built-in kind and no discovery is available to find its resource", kindWords(gvk.GroupKind()))
	}
	var versions []string
	if gvk.Version != "" {
		versions = []string{gvk.Version}
	}
	m, err := mapper.RESTMapping(gvk.GroupKind(), versions...)
	if err != nil {
		return resourceMapping{}, err
	}
	return resourceMapping{gvr: m.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}, nil
}

// kindWords names a kind as kubectl does, Kind.group ("Deployment.apps", "Pod").
func kindWords(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}

// AllKinds, given to ParseKinds or as Options.Kinds, selects every kind.
const AllKinds = "*"

// DefaultKinds are the kinds a pass considers unless told otherwise, in
// kubectl's resource.group form: the kinds proven end to end on a real
// control plane. Custom kinds are counted when named.
var DefaultKinds = []string{"deployments.apps", "statefulsets.apps", "jobs.batch"}

// ParseKinds turns kubectl-like resource names (deployments.apps, deploy,
// statefulsets, sts, jobs.batch, flinkdeployments.flink.apache.org,
// FlinkDeployment.flink.apache.org) into the kinds they name. "*" selects
// every kind and gives nil. mapper resolves names that are not built in; it
// may be nil when only built-in names are given.
func ParseKinds(names []string, mapper meta.RESTMapper) ([]schema.GroupKind, error) {
	var out []schema.GroupKind
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if name == AllKinds {
			return nil, nil
		}
		gk, err := parseKind(name, mapper)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, gk) {
			out = append(out, gk)
		}
	}
	if len(out) == 0 {
		return nil, errors.New(`no kind given, name at least one (for example deployments.apps) or "*" for every kind`)
	}
	return out, nil
}

func parseKind(name string, mapper meta.RESTMapper) (schema.GroupKind, error) {
	lower := strings.ToLower(name)
	for _, b := range builtinKinds {
		for _, n := range append([]string{b.gvr.Resource, b.singular}, b.shortNames...) {
			if lower == n || (b.gvr.Group != "" && lower == n+"."+b.gvr.Group) {
				return schema.GroupKind{Group: b.gvr.Group, Kind: b.kind}, nil
			}
		}
	}
	if mapper == nil {
		return schema.GroupKind{}, fmt.Errorf("unknown kind %q: name a resource as kubectl does, for example deployments.apps", name)
	}
	gr := schema.ParseGroupResource(lower)
	if gvk, err := mapper.KindFor(gr.WithVersion("")); err == nil {
		return gvk.GroupKind(), nil
	}
	// Kind.group, as kubectl prints it.
	gk := schema.ParseGroupKind(name)
	if m, err := mapper.RESTMapping(gk); err == nil {
		return m.GroupVersionKind.GroupKind(), nil
	}
	return schema.GroupKind{}, fmt.Errorf("unknown kind %q: the Karmada apiserver serves no such resource; name it as kubectl does, for example deployments.apps or flinkdeployments.flink.apache.org", name)
}
