package cmd

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Where the workloads' namespace is known from the flags, plan lists the
// bindings while the workloads are still being listed; where it is not (a
// WorkloadRebalancer, whose workloads may be anywhere), it waits for them.
// The server holds its answer about the workloads until it sees the bindings
// listed, or gives up after a while.
func TestPlanReadsBindingsWhileResolving(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		readAhead bool
	}{
		{name: "a selection", args: []string{"deployments", "-l", "app=web"}, readAhead: true},
		{name: "every workload of a type", args: []string{"deploy", "--all"}, readAhead: true},
		{name: "a workloadrebalancer", args: []string{"workloadrebalancers/r"}, readAhead: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeServer(t)
			bindingsListed := make(chan struct{})
			s.on("GET /apis/work.karmada.io/v1alpha2/namespaces/default/resourcebindings", func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-bindingsListed:
				default:
					close(bindingsListed)
				}
				writeJSON(w, http.StatusOK, map[string]any{"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBindingList", "metadata": map[string]any{}, "items": []any{}})
			})
			// waited says whether the bindings were listed before the
			// workloads were answered.
			waited := make(chan bool, 1)
			hold := func() {
				select {
				case <-bindingsListed:
					waited <- true
				case <-time.After(2 * time.Second):
					waited <- false
				}
			}
			s.on("GET /apis/apps/v1/namespaces/default/deployments", func(w http.ResponseWriter, r *http.Request) {
				hold()
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"apiVersion":"apps/v1","kind":"DeploymentList","metadata":{},"items":[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"default","name":"web0","uid":"u-0"}}]}`)
			})
			s.on("GET /apis/apps.karmada.io/v1alpha1/workloadrebalancers/r", func(w http.ResponseWriter, r *http.Request) {
				hold()
				writeJSON(w, http.StatusOK, map[string]any{"apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer",
					"metadata": map[string]any{"name": "r"},
					"spec":     map[string]any{"workloads": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web0"}}}})
			})
			streams, _, _, errOut := genericiooptions.NewTestIOStreams()
			root := NewCmdRebalance(streams)
			root.SetArgs(append([]string{"--kubeconfig", kubeconfigFor(t, s.URL), "--cache-dir", t.TempDir(), "plan", "--scheduler-estimator=disabled"}, tt.args...))
			Execute(root, streams)
			select {
			case got := <-waited:
				assert.Equal(t, tt.readAhead, got, errOut.String())
			default:
				t.Fatalf("the workloads were never read: %s %v", errOut.String(), s.requests())
			}
			listed := 0
			for _, r := range s.requests() {
				if strings.HasPrefix(r, "GET /apis/work.karmada.io/v1alpha2/namespaces/default/resourcebindings") {
					listed++
				}
			}
			assert.Equal(t, 1, listed, "the bindings are listed once: %v", s.requests())
		})
	}
}
