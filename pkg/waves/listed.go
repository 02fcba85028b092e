package waves

import (
	"context"
	"sync"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// listedReads serves the first read of each binding of a large batch from
// one list of its namespace, so that a run all at once reads a fleet with a
// list per namespace (a page per 500 bindings) instead of a get per binding.
// Only the batch's own bindings are kept from a list, and each only until it
// is read: a second read of the same binding (after a conflict, say) and a
// binding the list did not hold go to the server, as do writes and watches.
type listedReads struct {
	rebalance.BindingAPI
	lister BindingLister
	// wanted holds the batch's bindings by namespace.
	wanted map[string]map[string]bool

	mu    sync.Mutex
	store map[fleetKey]*rebalance.Binding
	loads scopeLoads
}

// ListedReads wraps api for a run all at once of targets: when the batch
// holds more than threshold distinct workloads (zero means 8, as for waves),
// each namespace's bindings are listed once, on its first read, through
// lister. Smaller batches keep a get per binding, which costs less than a
// list of a namespace where few workloads are moved.
func ListedReads(api rebalance.BindingAPI, lister BindingLister, targets []rebalance.Target, threshold int) rebalance.BindingAPI {
	if threshold <= 0 {
		threshold = 8
	}
	workloads := rebalance.DistinctWorkloads(targets)
	if lister == nil || len(workloads) <= threshold {
		return api
	}
	r := &listedReads{BindingAPI: api, lister: lister, wanted: map[string]map[string]bool{},
		store: map[fleetKey]*rebalance.Binding{}}
	for _, w := range workloads {
		if r.wanted[w.Namespace] == nil {
			r.wanted[w.Namespace] = map[string]bool{}
		}
		r.wanted[w.Namespace][rebalance.BindingNameFor(w)] = true
	}
	return r
}

// Get implements rebalance.BindingAPI.
func (r *listedReads) Get(ctx context.Context, namespace, name string) (*rebalance.Binding, error) {
	if err := r.load(ctx, namespace); err != nil {
		return nil, err
	}
	k := fleetKey{namespace, name}
	r.mu.Lock()
	b := r.store[k]
	delete(r.store, k)
	r.mu.Unlock()
	if b != nil {
		return b, nil
	}
	return r.BindingAPI.Get(ctx, namespace, name)
}

// load lists the namespace's bindings once; later readers wait for the
// first. A failed list is tried again by the next reader.
func (r *listedReads) load(ctx context.Context, namespace string) error {
	return r.loads.do(ctx, namespace, func() error {
		bindings, _, err := r.lister.List(ctx, namespace, namespace == "")
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, b := range bindings {
			if r.wanted[namespace][b.Name] {
				r.store[fleetKey{b.Namespace, b.Name}] = b
			}
		}
		return err
	})
}
