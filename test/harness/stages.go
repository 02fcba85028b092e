package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// CompletesAnnotation, set to "true" on a pod (in a Job, on its pod
// template), makes kwok end the pod's containers with exit code 0 once it
// runs. Without it a simulated container runs until its pod is deleted, as
// a server such as nginx does.
//
// kwok's own pod-complete stage, which hack/build-controlplane.sh copies,
// ends every pod a Job owns as soon as it runs: a Job of nginx pods would
// complete at once, and the member's job controller would never replace a
// pod deleted afterwards, which no Job of servers does.
const CompletesAnnotation = "harness.kubectl-rebalance.io/completes"

// podCompleteStage is the name of kwok's stage that completes Job pods.
const podCompleteStage = "pod-complete"

// writeKwokStages writes to dir the kwok stages of the assets, with the
// pod-complete stage limited to pods annotated CompletesAnnotation=true, and
// returns the file's path.
func writeKwokStages(assetsDir, dir string) (string, error) {
	stages, err := readObjects(filepath.Join(assetsDir, "kwok-stages.yaml"))
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	found := false
	for _, stage := range stages {
		if stage.GetName() == podCompleteStage {
			if err := requireCompletesAnnotation(stage); err != nil {
				return "", fmt.Errorf("kwok stage %s in %s: %w", podCompleteStage, assetsDir, err)
			}
			found = true
		}
		b, err := yaml.Marshal(stage.Object)
		if err != nil {
			return "", err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	if !found {
		return "", fmt.Errorf("the kwok stages in %s have no %s stage; rebuild them with %s", assetsDir, podCompleteStage, BuildCommand)
	}
	path := filepath.Join(dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, out.Bytes(), 0o644)
}

// requireCompletesAnnotation adds to the selector of a stage the condition
// that the pod is annotated CompletesAnnotation=true.
func requireCompletesAnnotation(stage *unstructured.Unstructured) error {
	exprs, _, err := unstructured.NestedSlice(stage.Object, "spec", "selector", "matchExpressions")
	if err != nil {
		return err
	}
	exprs = append(exprs, map[string]any{
		"key":      fmt.Sprintf(`.metadata.annotations["%s"]`, CompletesAnnotation),
		"operator": "In",
		"values":   []any{"true"},
	})
	return unstructured.SetNestedSlice(stage.Object, exprs, "spec", "selector", "matchExpressions")
}
