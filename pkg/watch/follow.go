package watch

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	karmadainformers "github.com/karmada-io/karmada/pkg/generated/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// SyncError says that a watch could not list its objects in time.
type SyncError struct{ Timeout time.Duration }

func (e *SyncError) Error() string {
	return fmt.Sprintf("the WorkloadRebalancers and the bindings could not be listed within %s", e.Timeout)
}

// Update is what changed in one record since the last update.
type Update struct {
	// Record is the WorkloadRebalancer as last seen.
	Record *appsv1alpha1.WorkloadRebalancer
	// Changed are the rows whose state, placement, readiness or reason
	// changed (every row the first time), in the record's order.
	Changed []Row
	// Rows are all its rows now.
	Rows []Row
	// Summary sums them up; SummaryChanged is set when its line changed.
	Summary        Summary
	SummaryChanged bool
	// Deleted is set when the record was deleted.
	Deleted bool
}

// Follower follows recorded runs with informers: the WorkloadRebalancers
// (one, or all) and the bindings of the control plane, so that every
// change is seen as it happens and nothing is polled. It remembers the
// placement each workload had before its move, which the binding forgets
// once the move's ledger is dropped.
type Follower struct {
	Client karmadaclient.Interface
	// Name is the record followed; empty follows every record.
	Name string
	// SyncTimeout bounds the first list of each watch; zero waits as long
	// as the context lasts.
	SyncTimeout time.Duration
	// Scope, when set, limits the bindings watched to those of these
	// workloads' namespaces (and the ClusterResourceBindings only when one
	// of them is cluster-scoped), so that following one run does not hold
	// a whole fleet's bindings. Nil watches every binding.
	Scope []rebalance.Workload

	before map[rebalance.Workload][]workv1alpha2.TargetCluster
	last   map[string]*recordView
}

type recordView struct {
	rows    map[rebalance.Workload]Row
	summary string
}

// Run follows until ctx ends or emit returns false, calling emit with each
// record that changed (once for each record when the caches are synced).
func (f *Follower) Run(ctx context.Context, emit func(Update) bool) error {
	f.before = map[rebalance.Workload][]workv1alpha2.TargetCluster{}
	f.last = map[string]*recordView{}
	var tweak []karmadainformers.SharedInformerOption
	if f.Name != "" {
		tweak = append(tweak, karmadainformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", f.Name).String()
		}))
	}
	records := karmadainformers.NewSharedInformerFactoryWithOptions(f.Client, 0, tweak...)
	// A fleet's bindings are many: keep less of each.
	slim := karmadainformers.WithTransform(func(obj any) (any, error) {
		if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
			m.GetObjectMeta().SetManagedFields(nil)
		}
		return obj, nil
	})
	namespaces, clusterScoped := scope(f.Scope)
	// One factory per namespace watched ("" watches them all), and one for
	// the ClusterResourceBindings when needed.
	factories := []karmadainformers.SharedInformerFactory{records}
	rbIndexers := map[string]cache.Indexer{}
	var bindingInformers []cache.SharedIndexInformer
	for _, ns := range namespaces {
		factory := karmadainformers.NewSharedInformerFactoryWithOptions(f.Client, 0, slim, karmadainformers.WithNamespace(ns))
		inf := factory.Work().V1alpha2().ResourceBindings().Informer()
		rbIndexers[ns] = inf.GetIndexer()
		bindingInformers = append(bindingInformers, inf)
		factories = append(factories, factory)
	}
	var crbIndexer cache.Indexer
	if clusterScoped {
		factory := karmadainformers.NewSharedInformerFactoryWithOptions(f.Client, 0, slim)
		inf := factory.Work().V1alpha2().ClusterResourceBindings().Informer()
		crbIndexer = inf.GetIndexer()
		bindingInformers = append(bindingInformers, inf)
		factories = append(factories, factory)
	}
	rbInformer := records.Apps().V1alpha1().WorkloadRebalancers().Informer()
	rbLister := records.Apps().V1alpha1().WorkloadRebalancers().Lister()

	changed := make(chan struct{}, 1)
	deleted := make(chan *appsv1alpha1.WorkloadRebalancer, 64)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	if _, err := rbInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if rb, ok := obj.(*appsv1alpha1.WorkloadRebalancer); ok {
				select {
				case deleted <- rb:
				default:
				}
			}
			poke()
		},
	}); err != nil {
		return err
	}
	for _, inf := range bindingInformers {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, factory := range factories {
		factory.Start(runCtx.Done())
		// Stop the informers before waiting for them to end.
		defer factory.Shutdown()
	}
	defer cancel()
	syncCtx, syncDone := runCtx, context.CancelFunc(func() {})
	if f.SyncTimeout > 0 {
		syncCtx, syncDone = context.WithTimeout(runCtx, f.SyncTimeout)
	}
	defer syncDone()
	for _, factory := range factories {
		for _, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return &SyncError{Timeout: f.SyncTimeout}
			}
		}
	}
	syncDone()

	binding := func(w rebalance.Workload) *workv1alpha2.ResourceBinding {
		name := rebalance.BindingNameFor(w)
		if w.Namespace == "" {
			if crbIndexer == nil {
				return nil
			}
			obj, ok, _ := crbIndexer.GetByKey(name)
			if !ok {
				return nil
			}
			crb := obj.(*workv1alpha2.ClusterResourceBinding)
			return &workv1alpha2.ResourceBinding{ObjectMeta: crb.ObjectMeta, Spec: crb.Spec, Status: crb.Status}
		}
		indexer := rbIndexers[metav1.NamespaceAll]
		if indexer == nil {
			indexer = rbIndexers[w.Namespace]
		}
		if indexer == nil {
			return nil
		}
		obj, ok, _ := indexer.GetByKey(w.Namespace + "/" + name)
		if !ok {
			return nil
		}
		return obj.(*workv1alpha2.ResourceBinding)
	}

	poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case rb := <-deleted:
			if _, seen := f.last[rb.Name]; seen {
				delete(f.last, rb.Name)
				if !emit(Update{Record: rb, Deleted: true}) {
					return nil
				}
			}
		case <-changed:
			list, err := rbLister.List(labels.Everything())
			if err != nil {
				return err
			}
			sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
			for _, rb := range list {
				if rb.DeletionTimestamp != nil && f.Name == "" {
					continue
				}
				u := f.view(rb, binding)
				if (len(u.Changed) > 0 || u.SummaryChanged) && !emit(u) {
					return nil
				}
			}
		}
	}
}

// view classifies every workload of rb and keeps what changed.
func (f *Follower) view(rb *appsv1alpha1.WorkloadRebalancer, binding func(rebalance.Workload) *workv1alpha2.ResourceBinding) Update {
	last := f.last[rb.Name]
	if last == nil {
		last = &recordView{rows: map[rebalance.Workload]Row{}}
		f.last[rb.Name] = last
	}
	u := Update{Record: rb}
	for _, e := range Entries(rb) {
		b := binding(e.Workload)
		row := Classify(e, b, f.before[e.Workload])
		switch {
		case row.Before != nil:
			f.before[e.Workload] = row.Before
		case row.State == StateWaiting && b != nil:
			// Not moving yet: its placement now is the one before its move.
			f.before[e.Workload] = b.Spec.Clusters
		}
		if row.State == StateWaiting && b != nil {
			row.Before, row.After = b.Spec.Clusters, nil
		}
		u.Rows = append(u.Rows, row)
		if prev, ok := last.rows[e.Workload]; !ok || !reflect.DeepEqual(prev, row) {
			u.Changed = append(u.Changed, row)
			last.rows[e.Workload] = row
		}
	}
	u.Summary = Summarize(rb, u.Rows)
	if line := u.Summary.String(); line != last.summary {
		u.SummaryChanged = true
		last.summary = line
	}
	return u
}

// scope returns the namespaces whose ResourceBindings to watch (all of
// them, metav1.NamespaceAll, without a scope) and whether to watch the
// ClusterResourceBindings.
func scope(ws []rebalance.Workload) ([]string, bool) {
	if ws == nil {
		return []string{metav1.NamespaceAll}, true
	}
	var namespaces []string
	clusterScoped := false
	for _, w := range ws {
		switch {
		case w.Namespace == "":
			clusterScoped = true
		case !slices.Contains(namespaces, w.Namespace):
			namespaces = append(namespaces, w.Namespace)
		}
	}
	if len(namespaces) > maxScopedNamespaces {
		// One watch of everything costs less than a watch per namespace.
		return []string{metav1.NamespaceAll}, clusterScoped
	}
	sort.Strings(namespaces)
	return namespaces, clusterScoped
}

// maxScopedNamespaces is the most namespaces watched one by one.
const maxScopedNamespaces = 10

// Workloads lists every workload rb names (listed or only planned), the
// scope a Follower of rb needs.
func Workloads(rb *appsv1alpha1.WorkloadRebalancer) []rebalance.Workload {
	out := []rebalance.Workload{}
	for _, e := range Entries(rb) {
		out = append(out, e.Workload)
	}
	return out
}
