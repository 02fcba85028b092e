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

// NeverReadyAnnotation, set to "true" on a pod template, keeps kwok from
// running the pod: it is bound to a node and stays Pending, never ready, as
// a pod whose image cannot be pulled does. Tests use it for workloads that
// are scheduled but never become ready.
const NeverReadyAnnotation = "harness.kubectl-rebalance.io/never-ready"

// podCompleteStage is the name of kwok's stage that completes Job pods.
const podCompleteStage = "pod-complete"

// podReadyStage is the name of kwok's stage that runs a bound pod.
const podReadyStage = "pod-ready"

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
			if err := addAnnotationCondition(stage, CompletesAnnotation, "In"); err != nil {
				return "", fmt.Errorf("kwok stage %s in %s: %w", podCompleteStage, assetsDir, err)
			}
			found = true
		}
		if stage.GetName() == podReadyStage {
			if err := addAnnotationCondition(stage, NeverReadyAnnotation, "NotIn"); err != nil {
				return "", fmt.Errorf("kwok stage %s in %s: %w", podReadyStage, assetsDir, err)
			}
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

// addAnnotationCondition adds to the selector of a stage the condition that
// the pod's annotation is (operator In) or is not (NotIn) "true".
func addAnnotationCondition(stage *unstructured.Unstructured, annotation, operator string) error {
	exprs, _, err := unstructured.NestedSlice(stage.Object, "spec", "selector", "matchExpressions")
	if err != nil {
		return err
	}
	exprs = append(exprs, map[string]any{
		"key":      fmt.Sprintf(`.metadata.annotations["%s"]`, annotation),
		"operator": operator,
		"values":   []any{"true"},
	})
	return unstructured.SetNestedSlice(stage.Object, exprs, "spec", "selector", "matchExpressions")
}
