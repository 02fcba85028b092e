package cmd

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
)

// startReadAhead starts reading in the background what predicting the
// arguments' workloads needs, and the Karmada release, when their scope is
// known: types only of namespaced kinds other than WorkloadRebalancer (whose
// workloads may be in any namespace). It returns nil when the scope is not
// known before resolving (files, kustomizations, WorkloadRebalancers, a type
// the mapper does not know): predict then reads once the targets are known.
func (o *targetOptions) startReadAhead(ctx context.Context, mapper meta.RESTMapper, source predict.Source) *predict.ReadAhead {
	if len(o.Filenames) > 0 || o.Kustomize != "" || len(o.Args) == 0 {
		return nil
	}
	kinds, ok := workloadKindsOfArgs(mapper, o.Args)
	if !ok {
		return nil
	}
	for _, gvk := range kinds {
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			return nil
		}
	}
	scope := predict.Scope{Namespaces: []string{o.Namespace}}
	if o.AllNamespaces {
		scope.Namespaces = []string{metav1.NamespaceAll}
	}
	go func() { _, _ = o.karmadaRelease() }()
	// The read goes on after the start-up that starts it.
	return predict.StartReadAhead(outlivingStartup(ctx), o.deadline, source, scope)
}
