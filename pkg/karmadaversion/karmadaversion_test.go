package karmadaversion

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schemaWith builds an object schema holding the given property paths; a
// path may end in =A|B to give its enum, or in ~TEXT to give its
// description.
func schemaWith(paths ...string) mapSchema {
	root := map[string]any{}
	for _, p := range paths {
		p, description, hasDescription := strings.Cut(p, "~")
		p, enum, hasEnum := strings.Cut(p, "=")
		node := root
		for _, part := range strings.Split(p, ".") {
			props, ok := node["properties"].(map[string]any)
			if !ok {
				props = map[string]any{}
				node["properties"] = props
			}
			name := strings.TrimSuffix(part, "[]")
			next, ok := props[name].(map[string]any)
			if !ok {
				next = map[string]any{}
				props[name] = next
			}
			if strings.HasSuffix(part, "[]") {
				items, ok := next["items"].(map[string]any)
				if !ok {
					items = map[string]any{}
					next["items"] = items
				}
				next = items
			}
			node = next
		}
		if hasDescription {
			node["description"] = description
		}
		if hasEnum {
			var values []any
			for _, v := range strings.Split(enum, "|") {
				values = append(values, v)
			}
			node["enum"] = values
		}
	}
	return root
}

const (
	trigger   = "spec.rescheduleTriggeredAt"
	preserve  = "spec.preserveResourcesOnDeletion"
	priority  = "spec.schedulePriority"
	comps     = "spec.components"
	overflow  = "spec.placement.clusterAffinities[].overflowAffinities"
	reqOld    = "spec.replicaRequirements~ReplicaRequirements represents the requirements required\n  by each replica."
	reqNew    = "spec.replicaRequirements~ReplicaRequirements represents the resource and scheduling\n  requirements for each replica."
	groups    = "spec.workloadAffinityGroups"
	purgeOld  = "spec.gracefulEvictionTasks[].purgeMode=Immediately|Directly|Graciously|Gracefully|Never"
	purgeNew  = "spec.gracefulEvictionTasks[].purgeMode=Directly|Gracefully|Never"
	purgeV112 = "spec.gracefulEvictionTasks[].purgeMode=Immediately|Graciously|Never"
)

func TestFromSchema(t *testing.T) {
	tests := []struct {
		name      string
		schema    mapSchema
		wantRange string
		supported bool
		tested    bool
		evidence  string
	}{
		{"v1.10 or v1.11", schemaWith(trigger, purgeV112), "v1.10 or v1.11", false, false, "has spec.rescheduleTriggeredAt but not spec.preserveResourcesOnDeletion"},
		{"v1.12", schemaWith(trigger, preserve, purgeV112), "v1.12", true, true, "has spec.preserveResourcesOnDeletion (added in v1.12) but not spec.schedulePriority"},
		{"v1.13 or v1.14", schemaWith(trigger, preserve, priority, purgeOld), "v1.13 or v1.14", true, true, "has spec.schedulePriority (added in v1.13) but not spec.components"},
		{"v1.15", schemaWith(trigger, preserve, priority, comps, reqOld, purgeOld), "v1.15", true, true, "has spec.components (added in v1.15) but not spec.replicaRequirements described as"},
		{"v1.16", schemaWith(trigger, preserve, priority, comps, reqNew, purgeOld), "v1.16", true, true, "(reworded in v1.16) but not spec.workloadAffinityGroups"},
		{"v1.17", schemaWith(trigger, preserve, priority, comps, reqNew, groups, purgeOld), "v1.17", true, true, "has spec.workloadAffinityGroups (added in v1.17) but not spec.placement.clusterAffinities[].overflowAffinities"},
		{"v1.18", schemaWith(trigger, preserve, priority, comps, reqNew, groups, overflow, purgeOld), "v1.18", true, true, "has spec.placement.clusterAffinities[].overflowAffinities (added in v1.18) but not purgeMode"},
		{"v1.19 or newer", schemaWith(trigger, preserve, priority, comps, reqNew, groups, overflow, purgeNew), "v1.19 or newer", true, false, "has purgeMode without Immediately/Graciously (removed in v1.19)"},
		// A marker stands for its release only if the older ones are there too.
		{"no enum is not v1.19", schemaWith(trigger, preserve, priority, comps, reqNew, groups, overflow), "v1.18", true, true, ""},
		{"a later marker without the earlier ones", schemaWith(trigger, preserve, priority, overflow), "v1.13 or v1.14", true, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := FromSchema(tt.schema)
			require.NoError(t, err)
			assert.Equal(t, tt.wantRange, info.Range())
			assert.Equal(t, tt.supported, info.Supported())
			assert.Equal(t, tt.tested, info.Tested())
			assert.Contains(t, info.Evidence, tt.evidence)
		})
	}
}

func TestFromSchemaWithoutTrigger(t *testing.T) {
	_, err := FromSchema(schemaWith("spec.clusters"))
	var unsupported *UnsupportedError
	require.True(t, errors.As(err, &unsupported))
	assert.Equal(t, "not a supported Karmada control plane: its ResourceBinding has no spec.rescheduleTriggeredAt, so it is older than Karmada v1.10 and cannot reschedule on request", err.Error())
}

func TestBehaviours(t *testing.T) {
	v := func(oldest, newest int) Info { return Info{Oldest: Release{oldest}, Newest: Release{newest}} }
	no, yes, unknown := Behaviour{false, true}, Behaviour{true, true}, Behaviour{}
	tests := []struct {
		name                          string
		info                          Info
		restarts, remembers, ttlFixed Behaviour
		webster, modelNodes, keepsAPI Behaviour
		anyZone                       Behaviour
	}{
		{"v1.12", v(12, 12), no, no, no, no, no, no, no},
		{"v1.13 or v1.14", v(13, 14), no, no, yes, no, no, unknown, no},
		{"v1.15 to v1.17", v(15, 17), no, no, yes, unknown, no, unknown, no},
		{"v1.16", v(16, 16), no, no, yes, yes, no, yes, no},
		{"v1.18", v(18, 18), no, yes, yes, yes, yes, yes, yes},
		{"v1.19 or newer", v(19, 0), yes, yes, yes, yes, yes, yes, yes},
		{"v1.10 or v1.11", v(10, 11), no, no, no, no, no, no, no},
		{"unknown span", v(13, 0), unknown, unknown, yes, unknown, unknown, unknown, unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.restarts, tt.info.RescheduleRestartsAffinityGroups(), "affinity groups")
			assert.Equal(t, tt.remembers, tt.info.SchedulerRemembersRecentPlacements(), "overcommit protection")
			assert.Equal(t, tt.ttlFixed, tt.info.ControllerDeletesAfterTTL(), "ttl deletion")
			assert.Equal(t, tt.webster, tt.info.DividesByWebster(), "webster")
			assert.Equal(t, tt.modelNodes, tt.info.EstimatesOnModelNodes(), "model nodes")
			assert.Equal(t, tt.keepsAPI, tt.info.KeepsScheduledClustersWithoutAPI(), "api enablement")
			assert.Equal(t, tt.anyZone, tt.info.ZoneAffinityMatchesAnyZone(), "zones")
		})
	}
}

func TestSchemaOfKind(t *testing.T) {
	doc := `{"components":{"schemas":{
	  "io.karmada.work.v1alpha2.ClusterResourceBinding":{"x-kubernetes-group-version-kind":[{"group":"work.karmada.io","version":"v1alpha2","kind":"ClusterResourceBinding"}],"properties":{"spec":{"properties":{"other":{}}}}},
	  "io.karmada.work.v1alpha2.ResourceBinding":{"x-kubernetes-group-version-kind":[{"group":"work.karmada.io","version":"v1alpha2","kind":"ResourceBinding"}],"properties":{"spec":{"properties":{"rescheduleTriggeredAt":{"type":"string"}}}}}}}}`
	s, err := schemaOfKind([]byte(doc), "ResourceBinding")
	require.NoError(t, err)
	assert.True(t, s.Has("spec.rescheduleTriggeredAt"))
	assert.False(t, s.Has("spec.other"))

	_, err = schemaOfKind([]byte(`{"components":{"schemas":{}}}`), "ResourceBinding")
	assert.EqualError(t, err, "the OpenAPI v3 schema of work.karmada.io/v1alpha2 has no ResourceBinding")
}
