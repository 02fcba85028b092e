package deschedule

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ErrWorkloadNotFound is wrapped by counting errors when the member cluster
// has no copy of the binding's workload; Karmada may not have propagated it yet.
var ErrWorkloadNotFound = errors.New("workload not found in member cluster")

// ClusterObjects is what one member cluster returned for a pass: its pods,
// and the workloads and controllers between them and the resource templates,
// possibly limited to some namespaces. Kinds whose revisions matter are kept
// whole; every other kind only as metadata.
type ClusterObjects struct {
	Deployments  []appsv1.Deployment
	ReplicaSets  []appsv1.ReplicaSet
	StatefulSets []appsv1.StatefulSet
	Pods         []corev1.Pod
	// Others holds objects of every other kind listed (Jobs, custom
	// resources, the controllers between them and their pods) as metadata,
	// with apiVersion and kind set.
	Others []metav1.PartialObjectMetadata
	// KindErrors holds the kinds that could not be listed, and why.
	KindErrors map[schema.GroupKind]error
	// ServerTime is a time the member's API server had certainly reached
	// when the pods were listed, from the Date of its answers; zero when
	// unknown. Pods' lastTransitionTime comes from the member's clock, so
	// the unschedulable threshold is measured against it, never against
	// this machine's clock.
	ServerTime time.Time
}

// maxOwnerDepth bounds an owner walk; real chains are at most three or four
// links long (pod, ReplicaSet, Deployment, custom resource).
const maxOwnerDepth = 8

// object is one listed object of any kind, as the owner walk sees it.
type object struct {
	kind      schema.GroupKind
	namespace string
	name      string
	uid       types.UID
	owner     *metav1.OwnerReference
	// Set for the kinds whose revisions matter.
	deployment  *appsv1.Deployment
	replicaSet  *appsv1.ReplicaSet
	statefulSet *appsv1.StatefulSet
}

type objectKey struct {
	kind            schema.GroupKind
	namespace, name string
}

// ClusterIndex answers unschedulable-count questions for many workloads of
// one member cluster from a single set of lists, without further API calls.
//
// A pod belongs to a workload when its chain of controller references leads
// to the member's copy of the workload (same kind, namespace and name as the
// resource template). It counts only when every link of the chain is of the
// current revision where the kind has revisions: the current ReplicaSet of a
// Deployment, the update revision of a StatefulSet.
type ClusterIndex struct {
	cluster    string
	serverTime time.Time
	byKey      map[objectKey]*object
	byUID      map[types.UID]*object
	pods       map[types.NamespacedName]*corev1.Pod
	// replicaSetsByOwner is keyed by the UID of the controlling
	// Deployment, which is how the Deployment controller links its
	// ReplicaSets regardless of labels.
	replicaSetsByOwner map[types.UID][]*appsv1.ReplicaSet
	// podsByAncestor holds, per workload UID, the unschedulable pods whose
	// chain reaches it through current revisions only.
	podsByAncestor map[types.UID][]*corev1.Pod
	// statefulSetPods holds, per StatefulSet UID, every pod it controls,
	// whatever its state: which ordinals run decides what can be handed back.
	statefulSetPods map[types.UID][]*corev1.Pod
	// unresolved holds, per namespace, why some unschedulable pods could not
	// be followed to their workload (an owner kind that could not be listed).
	unresolved map[string]error
	// invalid holds workloads whose spec prevents counting (a bad selector).
	invalid    map[types.UID]error
	kindErrors map[schema.GroupKind]error
	// currentRS memoizes each Deployment's current ReplicaSet (nil: none).
	currentRS map[types.UID]*appsv1.ReplicaSet
}

// NewClusterIndex indexes objs, listed from the member cluster named cluster.
// The index keeps pointers into objs, which must not be modified afterwards.
func NewClusterIndex(cluster string, objs *ClusterObjects) *ClusterIndex {
	ix := &ClusterIndex{
		cluster:            cluster,
		serverTime:         objs.ServerTime,
		byKey:              map[objectKey]*object{},
		byUID:              map[types.UID]*object{},
		pods:               make(map[types.NamespacedName]*corev1.Pod, len(objs.Pods)),
		replicaSetsByOwner: make(map[types.UID][]*appsv1.ReplicaSet, len(objs.ReplicaSets)),
		podsByAncestor:     map[types.UID][]*corev1.Pod{},
		statefulSetPods:    map[types.UID][]*corev1.Pod{},
		unresolved:         map[string]error{},
		invalid:            map[types.UID]error{},
		kindErrors:         objs.KindErrors,
		currentRS:          map[types.UID]*appsv1.ReplicaSet{},
	}
	add := func(o *object) {
		ix.byKey[objectKey{o.kind, o.namespace, o.name}] = o
		if o.uid != "" {
			ix.byUID[o.uid] = o
		}
	}
	for i := range objs.Deployments {
		d := &objs.Deployments[i]
		add(&object{kind: deploymentKind, namespace: d.Namespace, name: d.Name, uid: d.UID, owner: metav1.GetControllerOfNoCopy(d), deployment: d})
	}
	for i := range objs.ReplicaSets {
		rs := &objs.ReplicaSets[i]
		owner := metav1.GetControllerOfNoCopy(rs)
		add(&object{kind: replicaSetKind, namespace: rs.Namespace, name: rs.Name, uid: rs.UID, owner: owner, replicaSet: rs})
		if owner != nil {
			ix.replicaSetsByOwner[owner.UID] = append(ix.replicaSetsByOwner[owner.UID], rs)
		}
	}
	for i := range objs.StatefulSets {
		s := &objs.StatefulSets[i]
		add(&object{kind: statefulSetKind, namespace: s.Namespace, name: s.Name, uid: s.UID, owner: metav1.GetControllerOfNoCopy(s), statefulSet: s})
	}
	for i := range objs.Others {
		m := &objs.Others[i]
		add(&object{kind: m.GroupVersionKind().GroupKind(), namespace: m.Namespace, name: m.Name, uid: m.UID, owner: metav1.GetControllerOfNoCopy(m)})
	}
	for i := range objs.Pods {
		pod := &objs.Pods[i]
		ix.pods[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = pod
		if isUnschedulableNow(pod) {
			ix.walk(pod)
		}
		if owner := metav1.GetControllerOfNoCopy(pod); owner != nil && owner.Kind == statefulSetKind.Kind {
			ix.statefulSetPods[owner.UID] = append(ix.statefulSetPods[owner.UID], pod)
		}
	}
	return ix
}

// walk follows the controller chain of an unschedulable pod upwards and
// files the pod under every ancestor it reaches through current revisions.
func (ix *ClusterIndex) walk(pod *corev1.Pod) {
	child := &object{kind: podKind, namespace: pod.Namespace, name: pod.Name, uid: pod.UID, owner: metav1.GetControllerOfNoCopy(pod)}
	for range maxOwnerDepth {
		ref := child.owner
		if ref == nil {
			return
		}
		parent, ok := ix.byUID[ref.UID]
		if !ok {
			gv, _ := schema.ParseGroupVersion(ref.APIVersion)
			if err := ix.kindErrors[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]; err != nil && ix.unresolved[pod.Namespace] == nil {
				ix.unresolved[pod.Namespace] = fmt.Errorf("unschedulable pod %s/%s is controlled by %s %s, which could not be listed: %w",
					pod.Namespace, pod.Name, kindWords(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}), ref.Name, err)
			}
			// Otherwise its owner is gone, or not a kind of interest: the pod
			// belongs to no workload of this pass.
			return
		}
		if parent.namespace != pod.Namespace || !ix.current(parent, child, pod) {
			return
		}
		ix.podsByAncestor[parent.uid] = append(ix.podsByAncestor[parent.uid], pod)
		child = parent
	}
}

// current reports whether child, on the way up from pod, is of parent's
// current revision.
func (ix *ClusterIndex) current(parent, child *object, pod *corev1.Pod) bool {
	switch {
	case parent.deployment != nil:
		d := parent.deployment
		selector, err := ix.selector(d)
		if err != nil {
			ix.invalid[d.UID] = err
			return false
		}
		// Pods are matched by the Deployment's selector and their
		// controller, never by the ReplicaSet's own selector, as the
		// Deployment controller does; older ReplicaSets are on their way out.
		if child.replicaSet == nil || !selector.Matches(labels.Set(pod.Labels)) {
			return false
		}
		rs, ok := ix.currentRS[d.UID]
		if !ok {
			rs = ix.currentReplicaSet(d, selector)
			ix.currentRS[d.UID] = rs
		}
		return rs == child.replicaSet
	case parent.statefulSet != nil:
		// A StatefulSet labels each pod with the revision it was created
		// from; pods of an older revision are replaced in turn.
		update := parent.statefulSet.Status.UpdateRevision
		return update == "" || pod.Labels[appsv1.ControllerRevisionHashLabelKey] == update
	}
	return true
}

// Now returns the member cluster's time at the listing when it is known,
// and fallback (this machine's clock) otherwise.
func (ix *ClusterIndex) Now(fallback time.Time) time.Time {
	if ix.serverTime.IsZero() {
		return fallback
	}
	return ix.serverTime
}

// Cluster is the member cluster the index was built from.
func (ix *ClusterIndex) Cluster() string { return ix.cluster }

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

// CountUnschedulable counts the pods of the workload of kind namespace/name
// (the member's copy of a resource template) that have been unschedulable
// for longer than threshold at now. Only pods of the current revision count:
// pods of an older template are on their way out and say nothing about
// where the workload fits.
func (ix *ClusterIndex) CountUnschedulable(kind schema.GroupKind, namespace, name string, threshold time.Duration, now time.Time) (int32, error) {
	if kind == podKind {
		// A bare Pod is its own workload.
		pod, ok := ix.pods[types.NamespacedName{Namespace: namespace, Name: name}]
		if !ok {
			return 0, ix.notFound(kind, namespace, name)
		}
		if IsUnschedulable(pod, threshold, now) {
			return 1, nil
		}
		return 0, nil
	}
	w, ok := ix.byKey[objectKey{kind, namespace, name}]
	if !ok {
		return 0, ix.notFound(kind, namespace, name)
	}
	if w.deployment != nil {
		// A Deployment with a bad selector cannot be counted at all.
		if _, err := ix.selector(w.deployment); err != nil {
			return 0, err
		}
	}
	if err := ix.invalid[w.uid]; err != nil {
		return 0, err
	}
	if _, known := knownChains[kind]; !known {
		// The pods of a custom kind may hide behind any owner: one that
		// could not be listed may be hiding some of them.
		if err := ix.unresolved[namespace]; err != nil {
			return 0, fmt.Errorf("cannot tell which pods belong to %s %s/%s in cluster %s: %w", kindWords(kind), namespace, name, ix.cluster, err)
		}
	}
	if w.statefulSet != nil {
		return ix.countStatefulSet(w.statefulSet, ix.podsByAncestor[w.uid], ix.statefulSetPods[w.uid], threshold, now)
	}
	var count int32
	for _, pod := range ix.podsByAncestor[w.uid] {
		if IsUnschedulable(pod, threshold, now) {
			count++
		}
	}
	return count, nil
}

// ErrStatefulSetOrder: a StatefulSet's unschedulable pods are not its
// highest ordinals, so handing replicas back would delete Ready pods.
var ErrStatefulSetOrder = errors.New("its unschedulable pods are not its highest ordinals")

// countStatefulSet counts the replicas of a member StatefulSet that can be
// handed back without deleting a pod that runs: lowering its replicas
// removes the highest ordinals first, so only the unbroken run of highest
// ordinals that are unschedulable (or not created yet, as OrderedReady
// leaves those above a Pending pod) counts, and only when it holds an
// unschedulable pod. Unschedulable pods below a pod that is scheduled are
// never freed that way: the StatefulSet is left alone, and the error says why.
//
// pending are its unschedulable pods of the current revision (those that
// count), all every pod it controls, of any revision and state.
func (ix *ClusterIndex) countStatefulSet(sts *appsv1.StatefulSet, pending, all []*corev1.Pod, threshold time.Duration, now time.Time) (int32, error) {
	replicas := int32(1)
	if sts.Spec.Replicas != nil {
		replicas = *sts.Spec.Replicas
	}
	counts := map[*corev1.Pod]bool{}
	var unschedulable []string
	for _, pod := range pending {
		if IsUnschedulable(pod, threshold, now) {
			counts[pod] = true
			unschedulable = append(unschedulable, pod.Name)
		}
	}
	if len(unschedulable) == 0 {
		return 0, nil
	}
	byOrdinal := map[int32]*corev1.Pod{}
	for _, pod := range all {
		if o, ok := statefulSetOrdinal(sts.Name, pod.Name); ok {
			byOrdinal[o] = pod
		}
	}
	// run counts the ordinals from the top down to the lowest unschedulable
	// pod before the first pod that is scheduled.
	var run int32
	for o := replicas - 1; o >= 0; o-- {
		pod := byOrdinal[o]
		if pod == nil {
			continue
		}
		if !counts[pod] {
			break
		}
		run = replicas - o
	}
	if run == 0 {
		sort.Strings(unschedulable)
		return 0, fmt.Errorf("%w: statefulset %s/%s in cluster %s has unschedulable pod(s) %s below pods that are scheduled; lowering its replicas deletes the highest ordinals, which run, so it is left alone",
			ErrStatefulSetOrder, sts.Namespace, sts.Name, ix.cluster, strings.Join(unschedulable, ", "))
	}
	return run, nil
}

// statefulSetOrdinal reads the ordinal of a StatefulSet's pod from its
// name, NAME-ORDINAL.
func statefulSetOrdinal(set, pod string) (int32, bool) {
	suffix, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return 0, false
	}
	o, err := strconv.ParseInt(suffix, 10, 32)
	if err != nil || o < 0 {
		return 0, false
	}
	return int32(o), true
}

// knownChains are the kinds whose pods are reached through known
// controllers only, all of which a pass lists: Deployment through
// ReplicaSet, StatefulSet and Job directly.
var knownChains = map[schema.GroupKind][]schema.GroupKind{
	deploymentKind:  {replicaSetKind, deploymentKind},
	statefulSetKind: {statefulSetKind},
	jobKind:         {jobKind},
}

func (ix *ClusterIndex) notFound(kind schema.GroupKind, namespace, name string) error {
	if err := ix.kindErrors[kind]; err != nil {
		return fmt.Errorf("cannot list %s in cluster %s: %w", kindWords(kind), ix.cluster, err)
	}
	return fmt.Errorf("%w: %s %s/%s in cluster %s, it is counted again next pass once Karmada has propagated it",
		ErrWorkloadNotFound, kindWords(kind), namespace, name, ix.cluster)
}

// isUnschedulableNow reports whether pod is unschedulable, however recently.
func isUnschedulableNow(pod *corev1.Pod) bool {
	return IsUnschedulable(pod, 0, maxTime)
}

// maxTime is later than any transition time.
var maxTime = time.Unix(1<<62, 0)

// IsUnschedulable reports whether pod is still running its course (not
// Succeeded or Failed) and the scheduler has reported it Unschedulable for
// longer than threshold at now. A zero or negative threshold counts every
// Unschedulable pod: now is a member's whole-second time, so a pod that turned
// Unschedulable within its current second is not yet "before" it, and a
// threshold of zero means not waiting at all.
func IsUnschedulable(pod *corev1.Pod, threshold time.Duration, now time.Time) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type != corev1.PodScheduled {
			continue
		}
		// Only the first PodScheduled condition is consulted, like the
		// lookup helpers in Kubernetes and Karmada.
		return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
			(threshold <= 0 || c.LastTransitionTime.Add(threshold).Before(now))
	}
	return false
}
