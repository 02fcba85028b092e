package run

import (
	"context"
	"fmt"
	"sync"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadainformers "github.com/karmada-io/karmada/pkg/generated/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// recordWatch follows the record of a running run, for what people write
// on it from any machine: an abort (`kubectl rebalance abort`) and the
// approval of a step (`kubectl rebalance approve`).
type recordWatch struct {
	mu     sync.Mutex
	latest *appsv1alpha1.WorkloadRebalancer
	// changed is closed, and replaced, at every change of the record.
	changed chan struct{}
}

// wait returns the record once ok holds for it, or ctx's error.
func (w *recordWatch) wait(ctx context.Context, ok func(*appsv1alpha1.WorkloadRebalancer) bool) (*appsv1alpha1.WorkloadRebalancer, error) {
	for {
		w.mu.Lock()
		latest, changed := w.latest, w.changed
		w.mu.Unlock()
		if latest != nil && ok(latest) {
			return latest, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

// watchRecord returns a context that ends, with a *waves.AbortError as its
// cause, once the record name carries record.AbortedAnnotation: the waves
// then stop starting workloads, and the moves in flight end by the
// make-before-break rules, as on Ctrl-C. It follows the record with an
// informer, so an abort or an approval is seen as soon as it is written.
// The function returned stops the watch.
func (e *Engine) watchRecord(ctx context.Context, name string, notice func(string)) (context.Context, *recordWatch, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &recordWatch{changed: make(chan struct{})}
	factory := karmadainformers.NewSharedInformerFactoryWithOptions(e.Karmada, 0,
		karmadainformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	informer := factory.Apps().V1alpha1().WorkloadRebalancers().Informer()
	var once sync.Once
	check := func(obj any) {
		rb, ok := obj.(*appsv1alpha1.WorkloadRebalancer)
		if !ok || rb.Name != name {
			return
		}
		w.mu.Lock()
		w.latest = rb
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
		if mark, aborted := record.Aborted(rb); aborted {
			once.Do(func() {
				msg := fmt.Sprintf("aborted by %s; no further workload was started", mark)
				notice(fmt.Sprintf("workloadrebalancer %s was aborted by %s: no further workload is started; the moves in flight finish or are let go", name, mark))
				cancel(&waves.AbortError{Message: msg})
			})
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
	})
	if err != nil {
		// Only a stopped informer refuses a handler; the run goes on
		// without hearing of an abort or an approval.
		notice(fmt.Sprintf("warning: cannot follow workloadrebalancer %s for an abort or an approval: %v", name, err))
		return ctx, w, func() { cancel(nil) }
	}
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	factory.Start(watchCtx.Done())
	return ctx, w, func() {
		stopWatch()
		factory.Shutdown()
		cancel(nil)
	}
}
