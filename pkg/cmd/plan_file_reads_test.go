package cmd

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// plan -f with the estimators on reads what the bare lists of the plan
// benchmark read - the bindings, the Clusters, each member's nodes and active
// pods - and the two reads that tell the release, whatever the number of
// workloads the file lists: nothing per workload (the file's objects are not
// fetched), nothing listed twice. With a warm discovery cache, as any run
// after the first has it.
func TestPlanFileReadsTheBareListsOnly(t *testing.T) {
	const workloads = 30
	fleet := &syntheticFleet{fakeServer: newFakeServer(t), workloads: workloads, namespaces: 1, recovery: &recoveryFleet{}}
	fleet.recovery.index(fleet)
	for _, m := range fleetMembers {
		proxy := "/apis/cluster.karmada.io/v1alpha1/clusters/" + m + "/proxy"
		fleet.on("GET "+proxy+"/api/v1/nodes", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"kind": "NodeList", "apiVersion": "v1",
				"metadata": map[string]any{"resourceVersion": "1000"}, "items": []any{fleetNode(m, 0), fleetNode(m, 1)}})
		})
		fleet.on("GET "+proxy+"/api/v1/pods", func(w http.ResponseWriter, r *http.Request) {
			fleet.recovery.podPage(w, r, fleet, m)
		})
	}
	fleet.on("GET /apis/work.karmada.io/v1alpha2/namespaces/fleet-000/resourcebindings", func(w http.ResponseWriter, r *http.Request) {
		fleet.page(w, r, "ResourceBindingList", "work.karmada.io/v1alpha2", func(i int) any { return fleet.binding(i) })
	})
	newFleetRoutes(fleet)

	var manifest strings.Builder
	manifest.WriteString("apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata: {name: fleet}\nspec:\n  workloads:\n")
	for i := range workloads {
		ns, name := fleet.names(i)
		fmt.Fprintf(&manifest, "  - {apiVersion: apps/v1, kind: Deployment, namespace: %s, name: %s}\n", ns, name)
	}
	file := filepath.Join(t.TempDir(), "rebalancer.yaml")
	require.NoError(t, os.WriteFile(file, []byte(manifest.String()), 0o600))
	args := []string{"--kubeconfig", kubeconfigFor(t, fleet.URL), "--cache-dir", t.TempDir(), "plan", "-f", file,
		"--scheduler-estimator=enabled", "-o", "report-json"}

	code, _, errOut := runRebalanceCaptured(args...) // warms the discovery cache
	require.Equal(t, 0, code, errOut)
	before := len(fleet.requests())
	code, out, errOut := runRebalanceCaptured(args...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, fmt.Sprintf(`"workloads": %d`, workloads))

	got := fleet.requests()[before:]
	slices.Sort(got)
	assert.Equal(t, []string{
		"GET /apis/cluster.karmada.io/v1alpha1/clusters",
		"GET /apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy/api/v1/nodes",
		"GET /apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy/api/v1/pods",
		"GET /apis/cluster.karmada.io/v1alpha1/clusters/member2/proxy/api/v1/nodes",
		"GET /apis/cluster.karmada.io/v1alpha1/clusters/member2/proxy/api/v1/pods",
		"GET /apis/cluster.karmada.io/v1alpha1/clusters/member3/proxy/api/v1/nodes",
		"GET /apis/cluster.karmada.io/v1alpha1/clusters/member3/proxy/api/v1/pods",
		// The release: the binding group's resources (asked of an uncached
		// discovery client) and the OpenAPI v3 index, which this server
		// lacks (a real one is then asked for the group's schema).
		"GET /apis/work.karmada.io/v1alpha2",
		"GET /apis/work.karmada.io/v1alpha2/namespaces/fleet-000/resourcebindings",
		"GET /openapi/v3",
	}, got)
}
