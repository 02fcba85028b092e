package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestWriteKwokStages checks that only kwok's pod-complete and pod-ready
// stages change: the first requires the pod's CompletesAnnotation, the
// second skips pods with NeverReadyAnnotation or ReadyAfterAnnotation, which
// the two stages added after kwok's own take.
func TestWriteKwokStages(t *testing.T) {
	assets := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(assets, "kwok-stages.yaml"), []byte(`---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .status.phase, operator: In, values: [Pending]}
  next:
    statusTemplate: |
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.ownerReferences.[].kind', operator: In, values: [Job]}
  next:
    statusTemplate: |
      phase: Succeeded
`), 0o644))

	path, err := writeKwokStages(assets, t.TempDir())
	require.NoError(t, err)
	stages, err := readObjects(path)
	require.NoError(t, err)
	require.Len(t, stages, 4)
	assert.Equal(t, "pod-ready", stages[0].GetName())
	assert.Equal(t, []any{
		map[string]any{"key": ".status.phase", "operator": "In", "values": []any{"Pending"}},
		map[string]any{"key": `.metadata.annotations["harness.kubectl-rebalance.io/never-ready"]`, "operator": "NotIn", "values": []any{"true"}},
		map[string]any{"key": `.metadata.annotations["harness.kubectl-rebalance.io/ready-after"]`, "operator": "DoesNotExist"},
	}, stages[0].Object["spec"].(map[string]any)["selector"].(map[string]any)["matchExpressions"])
	assert.Equal(t, "phase: Running\n", stages[0].Object["spec"].(map[string]any)["next"].(map[string]any)["statusTemplate"])
	assert.Equal(t, "pod-complete", stages[1].GetName())
	assert.Equal(t, []any{
		map[string]any{"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": []any{"Job"}},
		map[string]any{"key": `.metadata.annotations["harness.kubectl-rebalance.io/completes"]`, "operator": "In", "values": []any{"true"}},
	}, stages[1].Object["spec"].(map[string]any)["selector"].(map[string]any)["matchExpressions"])
	assert.Equal(t, "pod-start-not-ready", stages[2].GetName())
	assert.Equal(t, "pod-ready-after", stages[3].GetName())
	delay, _, _ := unstructured.NestedString(stages[3].Object, "spec", "delay", "durationFrom", "expressionFrom")
	assert.Equal(t, `.metadata.annotations["harness.kubectl-rebalance.io/ready-after"]`, delay)

	// Stages without pod-complete were not built by this repository's script.
	require.NoError(t, os.WriteFile(filepath.Join(assets, "kwok-stages.yaml"), []byte("kind: Stage\nmetadata: {name: pod-ready}\n"), 0o644))
	_, err = writeKwokStages(assets, t.TempDir())
	assert.ErrorContains(t, err, "have no pod-complete stage")
}

// TestWriteKwokStagesOfTheAssets runs on the built assets, when there are.
func TestWriteKwokStagesOfTheAssets(t *testing.T) {
	dir, err := DefaultAssetsDir()
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "kwok-stages.yaml")); err != nil {
		t.Skipf("no control-plane assets in %s", dir)
	}
	path, err := writeKwokStages(dir, t.TempDir())
	require.NoError(t, err)
	stages, err := readObjects(path)
	require.NoError(t, err)
	names := []string{}
	for _, s := range stages {
		names = append(names, s.GetName())
	}
	assert.Contains(t, names, "pod-ready")
	assert.Contains(t, names, "pod-complete")
}
