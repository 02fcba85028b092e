package failback

import (
	"sort"
	"strings"
	"sync"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Displaced is a workload that lost replicas on a cluster because the
// cluster failed, and has not got them back since.
type Displaced struct {
	Workload rebalance.Workload
	// Binding is the workload's ResourceBinding, namespace/name.
	Binding string
	// Evicting: the binding still holds a graceful eviction task for the
	// cluster, which keeps karmada-scheduler from placing replicas there;
	// its failback waits until Karmada has finished evicting it.
	Evicting bool
	// Tolerations are the binding's cluster tolerations (spec.placement).
	Tolerations []corev1.Toleration
}

// Displacements remembers, per member cluster, the workloads its failure
// displaced. It learns them from the ResourceBindings: a graceful eviction
// task naming the cluster (Karmada's failover moving replicas away), or a
// binding that lost replicas on the cluster while the cluster was down (a
// failover without graceful eviction). A workload stops being displaced
// when its binding has replicas on the cluster again, or is deleted.
//
// What it knows lives in memory: a daemon that was not running when a
// binding's eviction finished does not know the binding was displaced.
type Displacements struct {
	mu sync.Mutex
	// byCluster: cluster name -> binding namespace/name -> displacement.
	byCluster map[string]map[string]*Displaced
}

// NewDisplacements returns an empty Displacements.
func NewDisplacements() *Displacements {
	return &Displacements{byCluster: map[string]map[string]*Displaced{}}
}

// Observe takes a binding's new version cur (old is the previous one, nil
// when first seen). clusterDown says whether a cluster is failed now for
// this binding. It returns the clusters where Karmada finished evicting the
// binding in this update, so that a failback can pick it up.
func (d *Displacements) Observe(old, cur *workv1alpha2.ResourceBinding, clusterDown func(cluster string, tolerations []corev1.Toleration) bool) (evicted []string) {
	if cur.DeletionTimestamp != nil {
		d.Forget(cur.Namespace, cur.Name)
		return nil
	}
	key := cur.Namespace + "/" + cur.Name
	var tolerations []corev1.Toleration
	if cur.Spec.Placement != nil {
		tolerations = cur.Spec.Placement.ClusterTolerations
	}
	tasks := map[string]bool{}
	for _, t := range cur.Spec.GracefulEvictionTasks {
		// An application failover moves a workload because it failed,
		// not because the cluster did.
		if t.Reason != workv1alpha2.EvictionReasonApplicationFailure {
			tasks[t.FromCluster] = true
		}
	}
	now := replicasByCluster(cur)
	lost := map[string]bool{}
	if old != nil {
		for name, n := range replicasByCluster(old) {
			if n > now[name] && clusterDown(name, tolerations) {
				lost[name] = true
			}
		}
	}
	workload := rebalance.Workload{APIVersion: cur.Spec.Resource.APIVersion, Kind: cur.Spec.Resource.Kind,
		Namespace: cur.Spec.Resource.Namespace, Name: cur.Spec.Resource.Name}

	d.mu.Lock()
	defer d.mu.Unlock()
	for cluster, byBinding := range d.byCluster {
		e := byBinding[key]
		if e == nil {
			continue
		}
		if now[cluster] > 0 && !tasks[cluster] {
			// Back on the cluster: whoever brought it back, it is no
			// longer displaced.
			delete(byBinding, key)
			continue
		}
		if e.Evicting && !tasks[cluster] {
			evicted = append(evicted, cluster)
		}
		e.Evicting = tasks[cluster]
		e.Workload, e.Tolerations = workload, tolerations
	}
	add := func(cluster string) {
		byBinding := d.byCluster[cluster]
		if byBinding == nil {
			byBinding = map[string]*Displaced{}
			d.byCluster[cluster] = byBinding
		}
		if byBinding[key] == nil {
			byBinding[key] = &Displaced{Workload: workload, Binding: key, Evicting: tasks[cluster], Tolerations: tolerations}
		}
	}
	for cluster := range tasks {
		add(cluster)
	}
	for cluster := range lost {
		add(cluster)
	}
	sort.Strings(evicted)
	return evicted
}

// Forget drops a deleted binding.
func (d *Displacements) Forget(namespace, name string) {
	key := namespace + "/" + name
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, byBinding := range d.byCluster {
		delete(byBinding, key)
	}
}

// Of returns the workloads displaced from cluster, by binding: those whose
// eviction is over (ready to fail back) and how many Karmada is still
// evicting.
func (d *Displacements) Of(cluster string) (ready []Displaced, evicting int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.byCluster[cluster] {
		if e.Evicting {
			evicting++
			continue
		}
		ready = append(ready, *e)
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].Binding < ready[j].Binding })
	return ready, evicting
}

// List returns every workload displaced from cluster, those Karmada is
// still evicting included, by binding.
func (d *Displacements) List(cluster string) []Displaced {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Displaced, 0, len(d.byCluster[cluster]))
	for _, e := range d.byCluster[cluster] {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Binding < out[j].Binding })
	return out
}

// Tolerates reports whether a taint of cluster is tolerated by the
// workloads displaced from it: by one of them at least (the scheduler
// places each only where it tolerates every taint, so a workload that does
// not tolerate it is simply not moved). With nothing displaced, no taint
// is tolerated.
func (d *Displacements) Tolerates(cluster string, taint corev1.Taint) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.byCluster[cluster] {
		if tolerates(e.Tolerations, taint) {
			return true
		}
	}
	return false
}

// tolerates reports whether tolerations let replicas stay on a cluster with
// taint for good: a toleration with tolerationSeconds only delays an
// eviction, so it does not count.
func tolerates(tolerations []corev1.Toleration, taint corev1.Taint) bool {
	for i := range tolerations {
		t := &tolerations[i]
		if t.TolerationSeconds != nil {
			continue
		}
		if t.ToleratesTaint(klog.Background(), &taint, false) {
			return true
		}
	}
	return false
}

// ClusterDown reports whether cluster is failed for a workload with
// tolerations: not Ready, being deleted, or carrying a NoSchedule or
// NoExecute taint the workload does not tolerate.
func ClusterDown(cluster *clusterv1alpha1.Cluster, tolerations []corev1.Toleration) bool {
	if cluster == nil {
		return false
	}
	ready := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	if cluster.DeletionTimestamp != nil || ready == nil || ready.Status != "True" {
		return true
	}
	for _, t := range cluster.Spec.Taints {
		if blocking(t) && !tolerates(tolerations, t) {
			return true
		}
	}
	return false
}

// blocking reports whether a taint keeps new replicas off a cluster.
func blocking(t corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

func replicasByCluster(rb *workv1alpha2.ResourceBinding) map[string]int32 {
	out := make(map[string]int32, len(rb.Spec.Clusters))
	for _, c := range rb.Spec.Clusters {
		out[c.Name] += c.Replicas
	}
	return out
}

// WorkloadIdentity is a workload's API group, kind, namespace and name: the
// version in apiVersion may differ between a binding and a resolved target,
// which the runner matches against a request's workloads with it.
func WorkloadIdentity(w rebalance.Workload) string {
	group, _, found := strings.Cut(w.APIVersion, "/")
	if !found {
		group = ""
	}
	return group + "|" + w.Kind + "|" + w.Namespace + "|" + w.Name
}
