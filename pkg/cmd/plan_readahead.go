package cmd

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// readAhead reads the bindings and clusters a prediction needs while the
// workloads are still being resolved. Where the workloads are named by type
// (TYPE/NAME, TYPE NAME..., TYPE -l, TYPE --all) the namespace they are in is
// known from the flags before any of them is listed; the bindings of that
// namespace (or of all, with -A) are what predicting them reads anyway. For
// a selection, the LIST of the workloads and the LISTs of the bindings then
// take about the longer of the two instead of their sum.
type readAhead struct {
	scope  predict.Scope
	done   chan struct{}
	in     predict.Input
	err    error
	cancel context.CancelFunc
}

// startReadAhead starts reading in the background what predicting the
// arguments' workloads needs, and the Karmada release, when their scope is
// known: types only of namespaced kinds other than WorkloadRebalancer (whose
// workloads may be in any namespace). It returns nil when the scope is not
// known before resolving (files, kustomizations, WorkloadRebalancers, a type
// the mapper does not know): predict then reads once the targets are known.
func (o *targetOptions) startReadAhead(ctx context.Context, mapper meta.RESTMapper, source predict.Source) *readAhead {
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
	// The read goes on after the start-up that starts it.
	ctx, cancel := context.WithDeadline(outlivingStartup(ctx), o.deadline)
	r := &readAhead{scope: scope, done: make(chan struct{}), cancel: cancel}
	go func() { _, _ = o.karmadaRelease() }()
	go func() {
		defer close(r.done)
		r.in, r.err = source.ReadScope(ctx, scope)
	}()
	return r
}

// input returns what was read ahead when it covers the scope of targets. ok
// is false when it does not (the read is then stopped) or r is nil.
func (r *readAhead) input(ctx context.Context, targets []rebalance.Target, allNamespaces bool) (in predict.Input, ok bool, err error) {
	if r == nil {
		return predict.Input{}, false, nil
	}
	if !r.scope.Covers(predict.ScopeOf(targets, allNamespaces)) {
		r.stop()
		return predict.Input{}, false, nil
	}
	select {
	case <-r.done:
		return r.in, true, r.err
	case <-ctx.Done():
		r.stop()
		return predict.Input{}, true, ctx.Err()
	}
}

// stop ends the read if it still runs, and waits for it, so that no request
// of it is left behind the command. It can be called more than once.
func (r *readAhead) stop() {
	if r == nil {
		return
	}
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		// A transport that ignores cancellation must not hold the command.
	}
}
