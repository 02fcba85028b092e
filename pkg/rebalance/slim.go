package rebalance

import (
	"encoding/json"
	"strings"
	"sync"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
)

// A run over a fleet holds one Binding per workload until it ends. These
// keep each one small: of the labels only those a rebalance reads, and one
// copy of each distinct set of them and of each distinct placement (the
// bindings of a policy all carry the same), which no code changes after
// reading.

// policyLabelKeys are the labels a rebalance or a prediction reads.
var policyLabelKeys = []string{policyv1alpha1.PropagationPolicyPermanentIDLabel, policyv1alpha1.ClusterPropagationPolicyPermanentIDLabel, workv1alpha2.BindingManagedByLabel}

// PolicyLabels keeps the labels a rebalance or a prediction reads (the
// policy labels that tell a scheduled workload from a dependency), nil when
// none. The bindings of one policy carry the same ones, so the map returned
// is shared with every equal one: callers must not change it.
func PolicyLabels(labels map[string]string) map[string]string {
	var key strings.Builder
	for _, k := range policyLabelKeys {
		if v, ok := labels[k]; ok {
			key.WriteString(k + "=" + v + "\x00")
		}
	}
	if key.Len() == 0 {
		return nil
	}
	sharedLabels.Lock()
	defer sharedLabels.Unlock()
	if shared, ok := sharedLabels.byKey[key.String()]; ok {
		return shared
	}
	out := make(map[string]string, 1)
	for _, k := range policyLabelKeys {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	if len(sharedLabels.byKey) >= maxSharedPlacements {
		sharedLabels.byKey = map[string]map[string]string{}
	}
	sharedLabels.byKey[key.String()] = out
	return out
}

var sharedLabels = struct {
	sync.Mutex
	byKey map[string]map[string]string
}{byKey: map[string]map[string]string{}}

// maxSharedPlacements bounds the placements (and the label sets)
// remembered for sharing; past it the memory starts again empty.
const maxSharedPlacements = 1024

var placements = struct {
	sync.Mutex
	byJSON map[string]*policyv1alpha1.Placement
}{byJSON: map[string]*policyv1alpha1.Placement{}}

// SharedPlacement returns the one copy kept of a placement equal to p. The
// copy is shared: callers must not change it.
func SharedPlacement(p *policyv1alpha1.Placement) *policyv1alpha1.Placement {
	if p == nil {
		return nil
	}
	key, err := json.Marshal(p)
	if err != nil {
		return p
	}
	placements.Lock()
	defer placements.Unlock()
	if shared, ok := placements.byJSON[string(key)]; ok {
		return shared
	}
	if len(placements.byJSON) >= maxSharedPlacements {
		placements.byJSON = map[string]*policyv1alpha1.Placement{}
	}
	placements.byJSON[string(key)] = p
	return p
}

// withSharedPlacement returns spec with its placement shared.
func withSharedPlacement(spec workv1alpha2.ResourceBindingSpec) workv1alpha2.ResourceBindingSpec {
	spec.Placement = SharedPlacement(spec.Placement)
	return spec
}

var requirements = struct {
	sync.Mutex
	byJSON map[string]*workv1alpha2.ReplicaRequirements
}{byJSON: map[string]*workv1alpha2.ReplicaRequirements{}}

// SharedReplicaRequirements returns the one copy kept of replica
// requirements equal to r: the replicas of a fleet's workloads mostly ask for
// the same few sets of resources, and each binding's own resource list took
// more of a prediction's heap than the rest of its spec. The copy is shared:
// callers must not change it.
func SharedReplicaRequirements(r *workv1alpha2.ReplicaRequirements) *workv1alpha2.ReplicaRequirements {
	if r == nil {
		return nil
	}
	key, err := json.Marshal(r)
	if err != nil {
		return r
	}
	requirements.Lock()
	defer requirements.Unlock()
	if shared, ok := requirements.byJSON[string(key)]; ok {
		return shared
	}
	if len(requirements.byJSON) >= maxSharedPlacements {
		requirements.byJSON = map[string]*workv1alpha2.ReplicaRequirements{}
	}
	requirements.byJSON[string(key)] = r
	return r
}
