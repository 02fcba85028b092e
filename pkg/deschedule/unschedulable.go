package deschedule

import (
	"errors"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// ErrDeploymentNotFound is wrapped by counting errors when the member cluster
// has no Deployment of the binding's name; Karmada may not have propagated it yet.
var ErrDeploymentNotFound = errors.New("deployment not found in member cluster")

// ClusterObjects is what one member cluster returned for a pass: its
// Deployments, ReplicaSets and Pods, possibly limited to some namespaces.
type ClusterObjects struct {
	Deployments []appsv1.Deployment
	ReplicaSets []appsv1.ReplicaSet
	Pods        []corev1.Pod
	// ServerTime is a time the member's API server had certainly reached
	// when the pods were listed, from the Date of its answers; zero when
	// unknown. Pods' lastTransitionTime comes from the member's clock, so
	// the unschedulable threshold is measured against it, never against
	// this machine's clock.
	ServerTime time.Time
}

// ClusterIndex answers unschedulable-count questions for many Deployments of
// one member cluster from a single set of lists, without further API calls.
type ClusterIndex struct {
	cluster     string
	serverTime  time.Time
	deployments map[types.NamespacedName]*appsv1.Deployment
	// Both maps are keyed by the UID of the controlling owner, which is how
	// the Deployment controller links its objects regardless of labels.
	replicaSetsByOwner map[types.UID][]*appsv1.ReplicaSet
	podsByOwner        map[types.UID][]*corev1.Pod
}

// Now returns the member cluster's time at the listing when it is known,
// and fallback (this machine's clock) otherwise.
func (ix *ClusterIndex) Now(fallback time.Time) time.Time {
	if ix.serverTime.IsZero() {
		return fallback
	}
	return ix.serverTime
}

// NewClusterIndex indexes objs, listed from the member cluster named cluster.
// The index keeps pointers into objs, which must not be modified afterwards.
func NewClusterIndex(cluster string, objs *ClusterObjects) *ClusterIndex {
	ix := &ClusterIndex{
		cluster:            cluster,
		serverTime:         objs.ServerTime,
		deployments:        make(map[types.NamespacedName]*appsv1.Deployment, len(objs.Deployments)),
		replicaSetsByOwner: make(map[types.UID][]*appsv1.ReplicaSet, len(objs.ReplicaSets)),
		podsByOwner:        make(map[types.UID][]*corev1.Pod, len(objs.ReplicaSets)),
	}
	for i := range objs.Deployments {
		d := &objs.Deployments[i]
		ix.deployments[types.NamespacedName{Namespace: d.Namespace, Name: d.Name}] = d
	}
	for i := range objs.ReplicaSets {
		rs := &objs.ReplicaSets[i]
		if owner := metav1.GetControllerOfNoCopy(rs); owner != nil {
			ix.replicaSetsByOwner[owner.UID] = append(ix.replicaSetsByOwner[owner.UID], rs)
		}
	}
	for i := range objs.Pods {
		pod := &objs.Pods[i]
		if owner := metav1.GetControllerOfNoCopy(pod); owner != nil {
			ix.podsByOwner[owner.UID] = append(ix.podsByOwner[owner.UID], pod)
		}
	}
	return ix
}

// Cluster is the member cluster the index was built from.
func (ix *ClusterIndex) Cluster() string { return ix.cluster }

// Deployment returns the indexed Deployment namespace/name, if listed.
func (ix *ClusterIndex) Deployment(namespace, name string) (*appsv1.Deployment, bool) {
	d, ok := ix.deployments[types.NamespacedName{Namespace: namespace, Name: name}]
	return d, ok
}

// CurrentReplicaSet returns the ReplicaSet that runs d's current pod
// template: controlled by d, matching d's selector, and with a template equal
// to d's apart from the pod-template-hash label. When several match, the
// oldest wins, as in the Deployment controller. It returns nil when the
// Deployment controller has not created one yet.
func (ix *ClusterIndex) CurrentReplicaSet(d *appsv1.Deployment) (*appsv1.ReplicaSet, error) {
	selector, err := ix.selector(d)
	if err != nil {
		return nil, err
	}
	return ix.currentReplicaSet(d, selector), nil
}

func (ix *ClusterIndex) selector(d *appsv1.Deployment) (labels.Selector, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s in cluster %s has an invalid selector, fix its spec.selector: %w",
			d.Namespace, d.Name, ix.cluster, err)
	}
	return selector, nil
}

func (ix *ClusterIndex) currentReplicaSet(d *appsv1.Deployment, selector labels.Selector) *appsv1.ReplicaSet {
	var owned []*appsv1.ReplicaSet
	for _, rs := range ix.replicaSetsByOwner[d.UID] {
		if rs.Namespace == d.Namespace && selector.Matches(labels.Set(rs.Labels)) {
			owned = append(owned, rs)
		}
	}
	sort.SliceStable(owned, func(i, j int) bool {
		a, b := owned[i], owned[j]
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name < b.Name
		}
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	})
	for _, rs := range owned {
		if templatesMatch(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// templatesMatch compares two pod templates ignoring pod-template-hash,
// which the Deployment controller adds to its ReplicaSets only.
func templatesMatch(a, b *corev1.PodTemplateSpec) bool {
	ac, bc := *a, *b
	ac.Labels = withoutTemplateHash(a.Labels)
	bc.Labels = withoutTemplateHash(b.Labels)
	// Semantic equality treats nil and empty maps alike and compares
	// quantities by value, as the Deployment controller does.
	return equality.Semantic.DeepEqual(&ac, &bc)
}

func withoutTemplateHash(in map[string]string) map[string]string {
	if _, ok := in[appsv1.DefaultDeploymentUniqueLabelKey]; !ok {
		return in
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		if k != appsv1.DefaultDeploymentUniqueLabelKey {
			out[k] = v
		}
	}
	return out
}

// CountUnschedulable counts the pods of the Deployment namespace/name that
// have been unschedulable for longer than threshold at now. Only pods of the
// current ReplicaSet count: pods of an older template are on their way out
// and say nothing about where the workload fits.
func (ix *ClusterIndex) CountUnschedulable(namespace, name string, threshold time.Duration, now time.Time) (int32, error) {
	d, ok := ix.Deployment(namespace, name)
	if !ok {
		return 0, fmt.Errorf("%w: deployment %s/%s in cluster %s, it is counted again next pass once Karmada has propagated it",
			ErrDeploymentNotFound, namespace, name, ix.cluster)
	}
	selector, err := ix.selector(d)
	if err != nil {
		return 0, err
	}
	rs := ix.currentReplicaSet(d, selector)
	if rs == nil {
		// The Deployment controller has not created it yet: no pods to count.
		return 0, nil
	}
	// Pods are matched by the Deployment's selector and their controller,
	// never by the ReplicaSet's own selector, as the Deployment controller does.
	var count int32
	for _, pod := range ix.podsByOwner[rs.UID] {
		if pod.Namespace != d.Namespace || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if IsUnschedulable(pod, threshold, now) {
			count++
		}
	}
	return count, nil
}

// IsUnschedulable reports whether pod is still running its course (not
// Succeeded or Failed) and the scheduler has reported it Unschedulable for
// longer than threshold at now. A negative threshold counts as zero.
func IsUnschedulable(pod *corev1.Pod, threshold time.Duration, now time.Time) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	threshold = max(threshold, 0)
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type != corev1.PodScheduled {
			continue
		}
		// Only the first PodScheduled condition is consulted, like the
		// lookup helpers in Kubernetes and Karmada.
		return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
			c.LastTransitionTime.Add(threshold).Before(now)
	}
	return false
}
