package rebalance

import (
	"fmt"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fleetOf returns perNamespace Deployments in each of namespaces.
func fleetOf(namespaces, perNamespace int) []Workload {
	var ws []Workload
	for n := range namespaces {
		for i := range perNamespace {
			ws = append(ws, Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: fmt.Sprintf("ns-%02d", n), Name: fmt.Sprintf("app-%02d", i)})
		}
	}
	return ws
}

// When the watch of a fleet has lost its place in history (its starting
// version expired while the triggers were written), the awaited bindings
// are read again with one list per namespace, not a get each: the wait
// costs O(namespaces) requests whatever the number of bindings. A
// namespace with few awaited bindings keeps a get each, and a binding the
// list no longer holds was deleted.
func TestWaitAfterExpiredWatchListsPerNamespace(t *testing.T) {
	const namespaces, perNamespace = 12, 10
	ws := append(fleetOf(namespaces, perNamespace),
		Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "small", Name: "one"},
		Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "small", Name: "two"})
	for _, lister := range []bool{true, false} {
		t.Run(fmt.Sprintf("lister=%v", lister), func(t *testing.T) {
			f := newRunnerFixture(Options{Wait: true})
			if lister {
				f.runner.Lister = f.api
			}
			for _, w := range ws {
				f.api.add(scheduledBinding(w, serverNow.Add(-time.Hour), member2Only...))
			}
			f.api.compacting = true
			f.api.scheduler = reschedulingTo(backInMember...)
			// One binding is deleted after the writes, before the wait
			// takes a fresh version to watch from.
			f.api.beforeResourceVersion = func(api *fakeAPI, calls int) {
				if calls == 2 {
					api.removeLocked(bindingKey{"ns-00", "app-00-deployment"})
				}
			}

			result, err := f.run(t, time.Minute, targetsOf(ws...)...)
			require.NoError(t, err)
			require.Len(t, result.Rows, len(ws))
			for _, row := range result.Rows {
				assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result, row.Workload.Name)
				if row.Workload.Namespace == "ns-00" && row.Workload.Name == "app-00" {
					assert.Equal(t, ReasonBindingDeleted, row.Observation.Reason)
					continue
				}
				assert.Equal(t, OutcomeScheduled, row.Observation.Outcome, row.Workload.Namespace+"/"+row.Workload.Name)
				assert.Equal(t, backInMember, row.After)
			}

			n := len(ws)
			assert.Equal(t, n, f.api.count("patch"))
			// One watch over all namespaces, expired, then resumed.
			assert.Equal(t, 2, f.api.count("watch"))
			if lister {
				// Reads: a get per binding before the writes; after the
				// expiry, a list for each of the 12 large namespaces and a
				// get for each of the 2 bindings of the small one, next to
				// the two versions to watch from.
				assert.Equal(t, n+2, f.api.count("get"))
				assert.Equal(t, 2+namespaces, f.api.count("list"))
			} else {
				// Without a lister, a get per binding after the expiry.
				assert.Equal(t, 2*n, f.api.count("get"))
				assert.Equal(t, 2, f.api.count("list"))
			}
		})
	}
}
