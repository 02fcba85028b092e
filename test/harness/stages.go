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

// ReadyAfterAnnotation, set on a pod template to a Go duration ("15s"),
// makes the member report the pod Running at once but Ready only that long
// after it started, as a real container whose readiness probe passes after
// its start-up. Tests of readiness gates, waves and availability use it:
// with kwok's own stages every pod is Ready the moment it is bound.
const ReadyAfterAnnotation = "harness.kubectl-rebalance.io/ready-after"

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
			if err := addExpression(stage, annotationKey(ReadyAfterAnnotation), "DoesNotExist"); err != nil {
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
	out.WriteString(readyAfterStages)
	path := filepath.Join(dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, out.Bytes(), 0o644)
}

// addAnnotationCondition adds to the selector of a stage the condition that
// the pod's annotation is (operator In) or is not (NotIn) "true".
func addAnnotationCondition(stage *unstructured.Unstructured, annotation, operator string) error {
	return addExpression(stage, annotationKey(annotation), operator, "true")
}

// addExpression adds one match expression to the selector of a stage.
func addExpression(stage *unstructured.Unstructured, key, operator string, values ...string) error {
	exprs, _, err := unstructured.NestedSlice(stage.Object, "spec", "selector", "matchExpressions")
	if err != nil {
		return err
	}
	expr := map[string]any{"key": key, "operator": operator}
	if len(values) > 0 {
		vs := make([]any, len(values))
		for i, v := range values {
			vs[i] = v
		}
		expr["values"] = vs
	}
	exprs = append(exprs, expr)
	return unstructured.SetNestedSlice(stage.Object, exprs, "spec", "selector", "matchExpressions")
}

// annotationKey is the kwok selector key (a jq path) of a pod annotation.
func annotationKey(annotation string) string {
	return fmt.Sprintf(`.metadata.annotations["%s"]`, annotation)
}

// readyAfterStages take the pods with ReadyAfterAnnotation in two steps, in
// place of kwok's pod-ready stage: pod-start-not-ready runs a bound pod with
// its containers started but not ready; pod-ready-after, delayed by the
// annotation's duration from the moment the pod runs, turns it Ready. A
// value that is not a duration leaves the pod Running and never Ready.
const readyAfterStages = `---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-start-not-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Pending]
    - key: '.metadata.annotations["` + ReadyAfterAnnotation + `"]'
      operator: Exists
    - key: '.metadata.annotations["` + NeverReadyAnnotation + `"]'
      operator: NotIn
      values: ["true"]
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "False", reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "False", reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: false
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      {{ with NodeIPsWith .spec.nodeName }}
      hostIP: {{ index . 0 | Quote }}
      {{ end }}
      {{ with PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      podIP: {{ index . 0 | Quote }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready-after
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Running]
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: In
      values: ["False"]
    - key: '.metadata.annotations["` + ReadyAfterAnnotation + `"]'
      operator: Exists
  delay:
    durationFrom:
      expressionFrom: '.metadata.annotations["` + ReadyAfterAnnotation + `"]'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ $started := .status.startTime }}
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $started | Quote }}
      {{ end }}
`
