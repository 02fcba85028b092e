package handover

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// newerServerBinding is a binding as a newer Karmada serves it: its
// spec.clusters entries carry a field (v1.19's components) that the Karmada
// types this plugin is built with do not know, and its policy suspended
// dispatching.
const newerServerBinding = `{
  "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
  "metadata": {"name": "web-deployment", "namespace": "default", "resourceVersion": "7"},
  "spec": {
    "replicas": 3,
    "suspension": {"dispatching": true},
    "clusters": [
      {"name": "member2", "replicas": 3, "components": [{"name": "main", "replicas": 3}]}
    ]
  }
}`

// apply applies a JSON patch to raw, as the API server would, and returns
// both the result as raw JSON and as this plugin's types read it.
func apply(t *testing.T, raw string, patch []byte) (map[string]any, *workv1alpha2.ResourceBinding) {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	require.NoError(t, err, "%s", patch)
	out, err := p.Apply([]byte(raw))
	require.NoError(t, err, "%s", patch)
	var generic map[string]any
	require.NoError(t, json.Unmarshal(out, &generic))
	var b workv1alpha2.ResourceBinding
	require.NoError(t, json.Unmarshal(out, &b))
	return generic, &b
}

func typed(t *testing.T, raw string) *workv1alpha2.ResourceBinding {
	t.Helper()
	var b workv1alpha2.ResourceBinding
	require.NoError(t, json.Unmarshal([]byte(raw), &b))
	return &b
}

func entries(t *testing.T, generic map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range generic["spec"].(map[string]any)["clusters"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// TestWritesKeepWhatTheyDoNotOwn walks a move's writes over a binding as a
// newer server holds it: every write keeps the unknown fields of the
// entries it keeps, and the dispatching suspension, and lifts only the
// scheduling suspension it set.
func TestWritesKeepWhatTheyDoNotOwn(t *testing.T) {
	m := &Mover{Owner: "host/1/abc"}
	b := typed(t, newerServerBinding)
	l := m.newLedger(b, PhaseStaging)
	l.Staged = tc("member2", 3, "member1", 1)
	body, err := ledgerWrite(b, l)
	require.NoError(t, err)
	raw := newerServerBinding
	generic, staged := apply(t, raw, body)
	assert.True(t, staged.Spec.SchedulingSuspended())
	assert.True(t, *staged.Spec.Suspension.Dispatching, "the policy's dispatching suspension stays")
	es := entries(t, generic)
	require.Len(t, es, 2)
	assert.Equal(t, "member2", es[0]["name"])
	assert.NotNil(t, es[0]["components"], "a kept entry keeps the fields a newer Karmada added")
	assert.Equal(t, "member1", es[1]["name"])
	got, err := ReadLedger(staged)
	require.NoError(t, err)
	assert.Equal(t, PhaseStaging, got.Phase)
	assert.Equal(t, "host/1/abc", got.Owner)
	assert.Equal(t, int32(3), got.Replicas)

	// The settle write: member2 loses two replicas, its entry stays.
	rawStaged, _ := json.Marshal(generic)
	staged.ResourceVersion = "7"
	l.Phase, l.Staged = PhaseSettling, tc("member2", 1, "member1", 2)
	body, err = ledgerWrite(staged, l)
	require.NoError(t, err)
	generic, settled := apply(t, string(rawStaged), body)
	es = entries(t, generic)
	assert.Equal(t, float64(1), es[0]["replicas"])
	assert.NotNil(t, es[0]["components"])
	assert.Equal(t, "{member1:2, member2:1}", formatted(settled.Spec.Clusters))

	// The release lifts only spec.suspension.scheduling.
	rawSettled, _ := json.Marshal(generic)
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	body, err = releasePatch(settled, at, tc("member2", 1, "member1", 2))
	require.NoError(t, err)
	generic, released := apply(t, string(rawSettled), body)
	assert.False(t, released.Spec.SchedulingSuspended())
	require.NotNil(t, released.Spec.Suspension)
	assert.True(t, *released.Spec.Suspension.Dispatching, "a dispatching suspension survives the release")
	assert.NotContains(t, released.Annotations, LedgerAnnotation)
	assert.True(t, at.Equal(released.Spec.RescheduleTriggeredAt), "the release writes its trigger")
	assert.NotNil(t, entries(t, generic)[0]["components"])

	// An undo from staging puts the original back, entry by entry.
	body, err = undoPatch(staged, &Ledger{Original: tc("member2", 3), TriggerSaved: true})
	require.NoError(t, err)
	generic, undone := apply(t, string(rawStaged), body)
	assert.Equal(t, "{member2:3}", formatted(undone.Spec.Clusters))
	assert.NotNil(t, entries(t, generic)[0]["components"])
	assert.False(t, undone.Spec.SchedulingSuspended())
	assert.True(t, *undone.Spec.Suspension.Dispatching)
}

// TestPatchesCarryTheResourceVersion: every write is guarded by the
// version it was built from.
func TestPatchesCarryTheResourceVersion(t *testing.T) {
	b := typed(t, newerServerBinding)
	b.Annotations = map[string]string{LedgerAnnotation: `{"original":[],"started":null}`}
	for name, build := range map[string]func() ([]byte, error){
		"ledger":  func() ([]byte, error) { return ledgerWrite(b, Ledger{Phase: PhaseHeld}) },
		"release": func() ([]byte, error) { return releasePatch(b, metav1.Now(), tc("member1", 3)) },
		"undo":    func() ([]byte, error) { return undoPatch(b, &Ledger{Original: tc("member2", 3)}) },
		"let go":  func() ([]byte, error) { return letGoPatch(b) },
	} {
		body, err := build()
		require.NoError(t, err, name)
		var ops []map[string]any
		require.NoError(t, json.Unmarshal(body, &ops), name)
		assert.Equal(t, map[string]any{"op": "replace", "path": "/metadata/resourceVersion", "value": "7"}, ops[0], name)
	}
}

// TestPlaceEntryByEntry: removed clusters go from the last index down,
// kept ones are tested by name, new ones appended.
func TestPlaceEntryByEntry(t *testing.T) {
	b := &workv1alpha2.ResourceBinding{Spec: workv1alpha2.ResourceBindingSpec{Clusters: tc("a", 1, "b", 2, "c", 3)}}
	p := &jsonPatch{b: b}
	p.place(tc("c", 1, "d", 5))
	raw, err := p.bytes()
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"op":"test","path":"/spec/clusters/0/name","value":"a"},
		{"op":"test","path":"/spec/clusters/1/name","value":"b"},
		{"op":"test","path":"/spec/clusters/2/name","value":"c"},
		{"op":"replace","path":"/spec/clusters/2/replicas","value":1},
		{"op":"remove","path":"/spec/clusters/1"},
		{"op":"remove","path":"/spec/clusters/0"},
		{"op":"add","path":"/spec/clusters/-","value":{"name":"d","replicas":5}}]`, string(raw))
	doc := `{"spec":{"clusters":[{"name":"a","replicas":1},{"name":"b","replicas":2},{"name":"c","replicas":3,"x":1}]}}`
	generic, got := apply(t, doc, raw)
	assert.Equal(t, "{c:1, d:5}", formatted(got.Spec.Clusters))
	assert.Equal(t, float64(1), entries(t, generic)[0]["x"])
}

// formatted is a placement in the plugin's words, clusters by name.
func formatted(clusters []workv1alpha2.TargetCluster) string {
	sorted := slices.Clone(clusters)
	slices.SortFunc(sorted, func(a, b workv1alpha2.TargetCluster) int { return strings.Compare(a.Name, b.Name) })
	return rebalance.FormatPlacement(sorted)
}

// TestLedgerHeadReadsWhatTheMoveWrites: other commands (plan) read the
// phase, owner, start and deadline of a ledger through rebalance's head of
// it; it reads what a move writes, for every phase.
func TestLedgerHeadReadsWhatTheMoveWrites(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	deadline := metav1.NewTime(started.Add(DefaultMoveTimeout))
	for _, phase := range []Phase{PhaseHeld, PhaseStaging, PhaseSettling} {
		raw, err := jsonLedger(Ledger{Phase: phase, Owner: "host/1/ab", Started: started, Deadline: &deadline})
		require.NoError(t, err)
		head, ok := rebalance.ReadHandoverHead(map[string]string{LedgerAnnotation: raw})
		require.True(t, ok)
		assert.Equal(t, string(phase), head.Phase)
		assert.Equal(t, "host/1/ab", head.Owner)
		assert.True(t, head.Started.Equal(&started))
		assert.True(t, head.Deadline.Equal(&deadline))
	}
}
