package handover

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// readyWatch follows one Deployment on every member with a watch and keeps
// the fewest ready replicas summed over the members it ever saw.
type readyWatch struct {
	mu      sync.Mutex
	ready   map[string]int32
	min     int32
	max     int32
	started bool
	stop    context.CancelFunc
	done    sync.WaitGroup
	errs    []error
}

// watchReady starts watching Deployment ns/name on members; the sums count
// only once every member has answered.
func watchReady(t *testing.T, cp *harness.ControlPlane, members []string, ns, name string) *readyWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &readyWatch{ready: map[string]int32{}, min: 1 << 30, stop: cancel}
	t.Cleanup(w.close)
	var first sync.WaitGroup
	for _, m := range members {
		kube, err := kubernetes.NewForConfig(cp.Member(m).Config)
		require.NoError(t, err)
		first.Add(1)
		w.done.Add(1)
		go w.follow(ctx, kube, m, ns, name, &first)
	}
	first.Wait()
	w.mu.Lock()
	w.started = true
	w.observe()
	w.mu.Unlock()
	return w
}

func (w *readyWatch) follow(ctx context.Context, kube kubernetes.Interface, member, ns, name string, first *sync.WaitGroup) {
	defer w.done.Done()
	once := sync.OnceFunc(first.Done)
	defer once()
	for ctx.Err() == nil {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var n int32
		if len(list.Items) == 1 {
			n = list.Items[0].Status.ReadyReplicas
		}
		w.set(member, n)
		once()
		ww, err := kube.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: list.ResourceVersion})
		if err != nil {
			continue
		}
		for ev := range ww.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified:
				if d, ok := ev.Object.(*appsv1.Deployment); ok {
					w.set(member, d.Status.ReadyReplicas)
				}
			case watch.Deleted:
				w.set(member, 0)
			}
		}
		ww.Stop()
	}
}

func (w *readyWatch) set(member string, n int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ready[member] = n
	if w.started {
		w.observe()
	}
}

func (w *readyWatch) observe() {
	var sum int32
	for _, n := range w.ready {
		sum += n
	}
	w.min = min(w.min, sum)
	w.max = max(w.max, sum)
}

// Range returns the fewest and the most ready replicas seen so far.
func (w *readyWatch) Range() (lo, hi int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.min, w.max
}

// Now is the sum of ready replicas now.
func (w *readyWatch) Now() int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sum int32
	for _, n := range w.ready {
		sum += n
	}
	return sum
}

func (w *readyWatch) close() {
	w.stop()
	w.done.Wait()
}
