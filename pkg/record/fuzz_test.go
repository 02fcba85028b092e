package record

import (
	"slices"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// FuzzRebalancerManifest feeds WorkloadRebalancer manifests, as a user
// writes them, through what reads them: the resolver's checks of
// spec.workloads, and the controller's rules for the status. Whatever the
// manifest, nothing crashes and the status rules keep their promises: every
// spec workload observed once, in controller order, only Successful entries
// kept outside the spec, and a second sync changes nothing.
func FuzzRebalancerManifest(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata: {name: demo, generation: 2}\nspec:\n  workloads:\n  - {apiVersion: apps/v1, kind: Deployment, namespace: shop, name: web}\n  - {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, name: reader}\n  ttlSecondsAfterFinished: 60\n",
		"spec:\n  workloads:\n  - {apiVersion: apps/v1, kind: Deployment, namespace: shop, name: web}\n  - {apiVersion: apps/v1, kind: Deployment, namespace: shop, name: web}\nstatus:\n  observedGeneration: 1\n  observedWorkloads:\n  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: shop, name: old}\n    result: Successful\n  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: shop, name: gone}\n    result: Failed\n    reason: ReferencedBindingNotFound\n",
		"spec: {workloads: []}\n",
		"spec:\n  workloads:\n  - {apiVersion: '', kind: '', name: ''}\n  - {apiVersion: 'a/b/c', kind: Deployment, name: x}\n  - {apiVersion: apps/v1, kind: Deployment, name: nonamespace}\n",
		"spec:\n  ttlSecondsAfterFinished: -5\n  workloads:\n  - {apiVersion: v1, kind: ConfigMap, namespace: a, name: 'x:y'}\nstatus:\n  finishTime: '2024-05-01T10:00:00Z'\n  observedWorkloads:\n  - workload: {apiVersion: v1, kind: ConfigMap, namespace: a, name: 'x:y'}\n    result: Unknown\n",
		"{}",
		"[]",
		"spec: 7",
	} {
		f.Add([]byte(seed))
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	resolver := rebalance.Resolver{Mapper: mapper}
	now := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))

	f.Fuzz(func(t *testing.T, manifest []byte) {
		var rb appsv1alpha1.WorkloadRebalancer
		if err := yaml.Unmarshal(manifest, &rb); err != nil {
			return
		}
		_, _ = resolver.FromRebalancer(&rb, "fuzz.yaml")

		synced := SyncStatus(rb.Status, rb.Spec, rb.Generation)
		keys := make([]string, 0, len(synced.ObservedWorkloads))
		for _, entry := range synced.ObservedWorkloads {
			keys = append(keys, rebalance.SortKey(entry.Workload))
		}
		if !slices.IsSorted(keys) {
			t.Fatalf("observedWorkloads out of controller order: %q", keys)
		}
		inStatus := map[rebalance.Workload]int{}
		for _, entry := range synced.ObservedWorkloads {
			inStatus[entry.Workload]++
		}
		inSpec := map[rebalance.Workload]bool{}
		for _, w := range rb.Spec.Workloads {
			inSpec[w] = true
			if inStatus[w] != 1 {
				t.Fatalf("spec workload %v observed %d times", w, inStatus[w])
			}
		}
		for _, entry := range synced.ObservedWorkloads {
			if !inSpec[entry.Workload] && entry.Result != appsv1alpha1.RebalanceSuccessful {
				t.Fatalf("%v kept outside the spec with result %q", entry.Workload, entry.Result)
			}
		}
		again := SyncStatus(synced, rb.Spec, rb.Generation)
		if len(again.ObservedWorkloads) != len(synced.ObservedWorkloads) {
			t.Fatalf("a second sync changed the status: %d then %d entries", len(synced.ObservedWorkloads), len(again.ObservedWorkloads))
		}

		_ = PendingWorkloads(synced)
		updated := synced.DeepCopy()
		_ = SetFinishTime(&rb.Status, updated, now)
		_, _ = ExpiresAt(&rb)
		_ = Expired(&rb, now.Time)
		rows := RowsFromStatus(&rb, nil)
		printed := Rebalancer("fuzz", rows, rb.Generation, rb.Status.FinishTime)
		for _, entry := range printed.Status.ObservedWorkloads {
			if !Recordable(entry.Result, entry.Reason) {
				t.Fatalf("a status Karmada's controller could not write: %+v", entry)
			}
		}
	})
}
