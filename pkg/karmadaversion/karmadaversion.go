// Package karmadaversion tells which Karmada release a control plane runs,
// from what the control plane serves, and what follows for the plugin: the
// behaviours that differ between releases. It owns nothing else.
//
// Karmada's components do not publish their version to clients: the Karmada
// apiserver is a kube-apiserver (its /version is Kubernetes'), and the
// aggregated apiserver's /version is neither reachable through it nor
// Karmada's. What a client can see is the API: each release adds fields to
// the ResourceBinding CRD, so the schema the apiserver publishes (OpenAPI v3,
// readable by every authenticated user) bounds the release. The markers are
// checked against the CRDs of the releases the Go module proxy serves
// (v1.12.0, v1.13.0, v1.16.0, v1.18.0, v1.18.2) and Karmada's changelogs for
// the others. v1.16 and v1.17 added nothing to the ResourceBinding schema, so
// they cannot be told from v1.15: behaviours that changed in v1.16 are
// unknown there, and callers say so.
package karmadaversion

import (
	"fmt"
	"slices"
	"strings"
)

// Release is a Karmada minor release line, v1.<Minor>.
type Release struct {
	Minor int
}

// String prints the release as v1.<minor>.
func (r Release) String() string { return fmt.Sprintf("v1.%d", r.Minor) }

// Oldest and newest releases the plugin is tested on (make test-matrix).
var (
	// OldestSupported is the oldest release the plugin is tested on.
	OldestSupported = Release{Minor: 12}
	// NewestTested is the newest release the plugin is tested on.
	NewestTested = Release{Minor: 18}
)

// Info is what the control plane's API says of its Karmada release: a range
// of release lines, as narrow as the markers allow.
type Info struct {
	// Oldest is the oldest release consistent with what is served.
	Oldest Release
	// Newest is the newest one; zero when there is no upper bound.
	Newest Release
	// Evidence says in plain words what set the bounds.
	Evidence string
}

// Range prints the releases the control plane may run, e.g. "v1.18",
// "v1.13 to v1.17" or "v1.19 or newer".
func (i Info) Range() string {
	switch {
	case i.Newest.Minor == 0:
		return i.Oldest.String() + " or newer"
	case i.Newest == i.Oldest:
		return i.Oldest.String()
	case i.Newest.Minor == i.Oldest.Minor+1:
		return i.Oldest.String() + " or " + i.Newest.String()
	}
	return i.Oldest.String() + " to " + i.Newest.String()
}

// Supported reports whether every release in the range is one the plugin
// supports (v1.12 or newer).
func (i Info) Supported() bool { return i.Oldest.Minor >= OldestSupported.Minor }

// Tested reports whether every release in the range was tested.
func (i Info) Tested() bool {
	return i.Supported() && i.Newest.Minor != 0 && i.Newest.Minor <= NewestTested.Minor
}

// Behaviour is a yes/no fact of the scheduler or controllers that differs
// between releases; Known is false when the range spans both answers.
type Behaviour struct {
	Yes, Known bool
}

// behaviour answers for a change that arrived in release since.
func (i Info) behaviour(since int) Behaviour {
	switch {
	case i.Oldest.Minor >= since:
		return Behaviour{Yes: true, Known: true}
	case i.Newest.Minor != 0 && i.Newest.Minor < since:
		return Behaviour{Yes: false, Known: true}
	}
	return Behaviour{}
}

// RescheduleRestartsAffinityGroups: from v1.19 (karmada#5425) a triggered
// reschedule considers the clusterAffinities groups again from the first
// one, so a workload can go back to its first group; v1.18 and older go on
// from the group the workload is in.
func (i Info) RescheduleRestartsAffinityGroups() Behaviour { return i.behaviour(19) }

// between answers for a change that arrived in one of the releases after
// lastWithout up to firstWith, when the exact one is not known (the Go module
// proxy does not serve every release to read).
func (i Info) between(lastWithout, firstWith int) Behaviour {
	switch {
	case i.Oldest.Minor >= firstWith:
		return Behaviour{Yes: true, Known: true}
	case i.Newest.Minor != 0 && i.Newest.Minor <= lastWithout:
		return Behaviour{Yes: false, Known: true}
	}
	return Behaviour{}
}

// SchedulerRemembersRecentPlacements: from v1.18 karmada-scheduler can count
// the capacity its recent decisions consumed (overcommit protection), so that
// consecutive reschedules do not all see the same free space. It does so only
// with its SchedulingOvercommitProtection feature gate (alpha in v1.18, off by
// default); older releases have no such gate.
func (i Info) SchedulerRemembersRecentPlacements() Behaviour { return i.behaviour(18) }

// DividesByWebster: from v1.16 (karmada#6837, #6793) the scheduler divides
// replicas among clusters by the Webster (Sainte-Laguë) method, breaking ties
// by the workload's UID. Older releases give each cluster the floor of its
// proportional share and the remaining replicas one each to the clusters of
// largest weight, then of most replicas before, then at random.
func (i Info) DividesByWebster() Behaviour { return i.behaviour(16) }

// EstimatesOnModelNodes: from v1.18 the scheduler's general estimator, for
// a cluster that reports resource models, simulates placing the replicas on
// one node per counted model node, each holding at most 110 pods and
// matching no node claim. Older releases count, from the smallest grade whose
// minimum covers the request, the nodes of each grade times the replicas
// that grade's minimum holds, with no pod limit per node.
func (i Info) EstimatesOnModelNodes() Behaviour { return i.behaviour(18) }

// KeepsScheduledClustersWithoutAPI: a cluster already in a binding's
// placement passes the scheduler's API-enablement filter even when it no
// longer serves the workload's API. v1.12 and v1.13 let it pass only while the
// cluster's API list is incomplete; v1.16 keeps it always. (v1.14 and v1.15
// were not read.)
func (i Info) KeepsScheduledClustersWithoutAPI() Behaviour { return i.between(13, 16) }

// ZoneAffinityMatchesAnyZone: from v1.18 (karmada#6431) a cluster affinity's
// zone selector with operator In matches a cluster of several zones when any
// of them is listed; older releases require all of them.
func (i Info) ZoneAffinityMatchesAnyZone() Behaviour { return i.behaviour(18) }

// ControllerDeletesAfterTTL: Karmada's workloadRebalancer controller deletes
// a finished WorkloadRebalancer when its ttlSecondsAfterFinished runs out.
// v1.12.0's controller schedules that deletion only from a reconciliation
// that already saw the object finished, which never comes once the status is
// written, so it keeps the object (fixed in v1.13, karmada#5989).
func (i Info) ControllerDeletesAfterTTL() Behaviour { return i.behaviour(13) }

// Schema is what Detect reads of the served ResourceBinding schema: the
// paths of its properties (spec.placement.clusterAffinities[].affinityName)
// and the enum values at a path.
type Schema interface {
	Has(path string) bool
	Enum(path string) []string
	Description(path string) string
}

// marker is a change of the ResourceBinding schema that came with a release.
type marker struct {
	release Release
	what    string
	present func(Schema) bool
}

// markers, oldest first. Each was absent from the release before.
var markers = []marker{
	{Release{12}, "spec.preserveResourcesOnDeletion (added in v1.12)",
		func(s Schema) bool { return s.Has("spec.preserveResourcesOnDeletion") }},
	{Release{13}, "spec.schedulePriority (added in v1.13)",
		func(s Schema) bool { return s.Has("spec.schedulePriority") }},
	{Release{15}, "spec.components (added in v1.15)",
		func(s Schema) bool { return s.Has("spec.components") }},
	// v1.16 added no field to the binding; it reworded the descriptions
	// of the replica requirements, which the served schema carries. The
	// change in division rule that came with it (Webster) is what depends
	// on telling v1.16 from v1.15.
	{Release{16}, "spec.replicaRequirements described as the \"resource and scheduling requirements\" (reworded in v1.16)",
		func(s Schema) bool {
			return strings.Contains(s.Description("spec.replicaRequirements"), "resource and scheduling requirements")
		}},
	{Release{17}, "spec.workloadAffinityGroups (added in v1.17)",
		func(s Schema) bool { return s.Has("spec.workloadAffinityGroups") }},
	{Release{18}, "spec.placement.clusterAffinities[].overflowAffinities (added in v1.18)",
		func(s Schema) bool { return s.Has("spec.placement.clusterAffinities[].overflowAffinities") }},
	{Release{19}, "purgeMode without Immediately/Graciously (removed in v1.19)",
		func(s Schema) bool {
			enum := s.Enum("spec.gracefulEvictionTasks[].purgeMode")
			return len(enum) > 0 && !slices.Contains(enum, "Immediately")
		}},
}

// firstRebalancerRelease introduced the WorkloadRebalancer API and the
// binding's spec.rescheduleTriggeredAt.
var firstRebalancerRelease = Release{10}

// FromSchema bounds the release from the ResourceBinding schema: the newest
// marker present sets the oldest release, the next marker the newest.
func FromSchema(s Schema) (Info, error) {
	if !s.Has("spec.rescheduleTriggeredAt") {
		return Info{}, &UnsupportedError{Reason: "its ResourceBinding has no spec.rescheduleTriggeredAt, so it is older than Karmada " +
			firstRebalancerRelease.String() + " and cannot reschedule on request"}
	}
	info := Info{Oldest: firstRebalancerRelease, Newest: Release{markers[0].release.Minor - 1}}
	var seen []string
	for i, m := range markers {
		if !m.present(s) {
			break
		}
		seen = append(seen, m.what)
		info.Oldest, info.Newest = m.release, Release{}
		if i+1 < len(markers) {
			info.Newest = Release{markers[i+1].release.Minor - 1}
		}
	}
	switch {
	case len(seen) == 0:
		info.Evidence = "the ResourceBinding schema has spec.rescheduleTriggeredAt but not " + markers[0].what
	case len(seen) < len(markers):
		info.Evidence = "the ResourceBinding schema has " + seen[len(seen)-1] + " but not " + markers[len(seen)].what
	default:
		info.Evidence = "the ResourceBinding schema has " + seen[len(seen)-1]
	}
	return info, nil
}

// UnsupportedError says why the control plane cannot be rebalanced.
type UnsupportedError struct {
	Reason string
}

func (e *UnsupportedError) Error() string {
	return "not a supported Karmada control plane: " + e.Reason
}

// mapSchema reads an OpenAPI v3 object schema decoded from JSON.
type mapSchema map[string]any

func (m mapSchema) lookup(path string) map[string]any {
	node := map[string]any(m)
	for _, part := range strings.Split(path, ".") {
		items := strings.HasSuffix(part, "[]")
		props, _ := node["properties"].(map[string]any)
		next, ok := props[strings.TrimSuffix(part, "[]")].(map[string]any)
		if !ok {
			return nil
		}
		if items {
			if next, ok = next["items"].(map[string]any); !ok {
				return nil
			}
		}
		node = next
	}
	return node
}

// Has reports whether path names a property of the schema.
func (m mapSchema) Has(path string) bool { return m.lookup(path) != nil }

// Enum returns the enum values of the property at path.
func (m mapSchema) Enum(path string) []string {
	node := m.lookup(path)
	values, _ := node["enum"].([]any)
	var out []string
	for _, v := range values {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Description returns the description of the property at path, with its
// lines joined by single spaces.
func (m mapSchema) Description(path string) string {
	text, _ := m.lookup(path)["description"].(string)
	return strings.Join(strings.Fields(text), " ")
}

// Describe says which release was detected and from what, or why none
// could be, for a message.
func Describe(info Info, err error) string {
	if err != nil {
		return fmt.Sprintf("the Karmada release could not be told (%v)", err)
	}
	return fmt.Sprintf("this control plane runs Karmada %s (%s)", info.Range(), info.Evidence)
}

// SuspendsScheduling: from v1.13 a binding has spec.suspension.scheduling,
// which keeps karmada-scheduler away from it; v1.12 has no such field, so a
// placement cannot be staged there without the scheduler undoing it.
func (i Info) SuspendsScheduling() Behaviour { return i.behaviour(13) }
