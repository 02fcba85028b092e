package daemon

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// tenure is one holder's time with the Lease, as the Lease records it: from
// its acquireTime (written with the acquiring daemon's clock, which is this
// machine's) to the last renewal seen.
type tenure struct {
	holder             string
	acquired, lastSeen time.Time
	lastRenew          time.Time
}

// leaseWatch polls the Lease directly (not through the fault proxies) and
// keeps the history of its holders.
type leaseWatch struct {
	mu      sync.Mutex
	tenures []tenure
	reads   int
	failed  int
}

// watchLease polls namespace/name every 200 ms until ctx ends.
func watchLease(ctx context.Context, client kubernetes.Interface, namespace, name string) *leaseWatch {
	w := &leaseWatch{}
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			readCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			lease, err := client.CoordinationV1().Leases(namespace).Get(readCtx, name, metav1.GetOptions{})
			cancel()
			w.mu.Lock()
			w.reads++
			if err != nil {
				w.failed++
			} else if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != "" && lease.Spec.AcquireTime != nil {
				acquired := lease.Spec.AcquireTime.Time
				var renewed time.Time
				if lease.Spec.RenewTime != nil {
					renewed = lease.Spec.RenewTime.Time
				}
				n := len(w.tenures)
				if n == 0 || w.tenures[n-1].holder != holder || !w.tenures[n-1].acquired.Equal(acquired) {
					w.tenures = append(w.tenures, tenure{holder: holder, acquired: acquired})
					n++
				}
				w.tenures[n-1].lastSeen = time.Now()
				w.tenures[n-1].lastRenew = renewed
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// history returns the tenures seen so far, in order.
func (w *leaseWatch) history() []tenure {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]tenure(nil), w.tenures...)
}

// holder returns the current holder, "" before the first one.
func (w *leaseWatch) holder() string {
	h := w.history()
	if len(h) == 0 {
		return ""
	}
	return h[len(h)-1].holder
}

// holderAt returns who held the Lease at t: the holder of the last tenure
// acquired at or before t.
func holderAt(history []tenure, t time.Time) string {
	holder := ""
	for _, h := range history {
		if !h.acquired.After(t) {
			holder = h.holder
		}
	}
	return holder
}
