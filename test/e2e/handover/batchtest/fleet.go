// Package batchtest is the batch scenario of make-before-break moves that
// the handover e2e tests and the batch benchmark share: a fleet of
// Deployments spread by the seed's policy over member1 and member2, member1
// failed over and recovered, then moved back by one command while a watch
// on the member Deployments keeps the fewest ready replicas of each.
package batchtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TwoMembers are the members the scenario's policy divides over.
var TwoMembers = []string{"member1", "member2"}

// FleetWatch follows every Deployment of a namespace on the members and
// keeps, per Deployment, the fewest ready replicas summed over members.
type FleetWatch struct {
	mu      sync.Mutex
	ready   map[string]map[string]int32 // deployment -> member -> ready
	min     map[string]int32
	started bool
	stop    context.CancelFunc
	done    sync.WaitGroup
}

// WatchFleet starts a FleetWatch of ns on members; it has read every
// Deployment once when it returns.
func WatchFleet(t testing.TB, cp *harness.ControlPlane, members []string, ns string) *FleetWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &FleetWatch{ready: map[string]map[string]int32{}, min: map[string]int32{}, stop: cancel}
	t.Cleanup(w.Close)
	var first sync.WaitGroup
	for _, m := range members {
		kube, err := kubernetes.NewForConfig(cp.Member(m).Config)
		require.NoError(t, err)
		first.Add(1)
		w.done.Add(1)
		go w.follow(ctx, kube, m, ns, &first)
	}
	first.Wait()
	w.mu.Lock()
	w.started = true
	for name := range w.ready {
		w.observe(name)
	}
	w.mu.Unlock()
	return w
}

func (w *FleetWatch) follow(ctx context.Context, kube kubernetes.Interface, member, ns string, first *sync.WaitGroup) {
	defer w.done.Done()
	once := sync.OnceFunc(first.Done)
	defer once()
	for ctx.Err() == nil {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for i := range list.Items {
			w.set(list.Items[i].Name, member, list.Items[i].Status.ReadyReplicas)
		}
		once()
		ww, err := kube.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			continue
		}
		for ev := range ww.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok {
				continue
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				w.set(d.Name, member, d.Status.ReadyReplicas)
			case watch.Deleted:
				w.set(d.Name, member, 0)
			}
		}
		ww.Stop()
	}
}

func (w *FleetWatch) set(name, member string, n int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ready[name] == nil {
		w.ready[name] = map[string]int32{}
	}
	w.ready[name][member] = n
	if w.started {
		w.observe(name)
	}
}

func (w *FleetWatch) observe(name string) {
	var sum int32
	for _, n := range w.ready[name] {
		sum += n
	}
	if cur, ok := w.min[name]; !ok || sum < cur {
		w.min[name] = sum
	}
}

// Min is the fewest ready replicas of Deployment name seen since the watch
// started.
func (w *FleetWatch) Min(name string) int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.min[name]
}

// Close stops the watch.
func (w *FleetWatch) Close() {
	w.stop()
	w.done.Wait()
}

// WaitFleetReady waits until every Deployment names runs exactly want
// ready replicas summed over the members, and no more are asked for.
func WaitFleetReady(ctx context.Context, t testing.TB, cp *harness.ControlPlane, ns string, names []string, want int32, members []string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		ready, asked := map[string]int32{}, map[string]int32{}
		for _, m := range members {
			list, err := fixtures.TestClients(t, cp.Member(m).Config).Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, d := range list.Items {
				ready[d.Name] += d.Status.ReadyReplicas
				asked[d.Name] += *d.Spec.Replicas
			}
		}
		for _, n := range names {
			if ready[n] != want || asked[n] != want {
				last = fmt.Sprintf("%s: %d ready of %d asked", n, ready[n], asked[n])
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, last)
}
