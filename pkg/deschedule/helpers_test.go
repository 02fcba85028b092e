package deschedule

import (
	"encoding/json"
	"fmt"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// testNow is the fixed clock of the tests.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

var aggregatedPlacement = policyv1alpha1.Placement{
	ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated,
	},
}

func placementJSON(p policyv1alpha1.Placement) string {
	raw, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	return string(raw)
}

// cluster is one target cluster of a test binding; ready < 0 leaves the
// cluster without an aggregatedStatus entry.
type cluster struct {
	name  string
	spec  int32
	ready int32
}

// newBinding returns a candidate binding for Deployment ns/name.
func newBinding(ns, name string, clusters ...cluster) *workv1alpha2.ResourceBinding {
	rb := &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ns,
			Name:            name + "-deployment",
			ResourceVersion: "1",
			UID:             types.UID("rb-" + ns + "-" + name),
			Annotations:     map[string]string{AppliedPlacementAnnotation: placementJSON(aggregatedPlacement)},
		},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{
				APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name, UID: types.UID("tpl-" + ns + "-" + name),
			},
		},
	}
	for _, c := range clusters {
		rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: c.name, Replicas: c.spec})
		rb.Spec.Replicas += c.spec
		if c.ready >= 0 {
			rb.Status.AggregatedStatus = append(rb.Status.AggregatedStatus, workv1alpha2.AggregatedStatusItem{
				ClusterName: c.name,
				Status:      &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"replicas":%d,"readyReplicas":%d}`, c.spec, c.ready))},
			})
		}
	}
	return rb
}

var podTemplate = corev1.PodTemplateSpec{
	ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
	Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
}

func newDeployment(ns, name string) appsv1.Deployment {
	return appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("deploy-" + ns + "-" + name)},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: *podTemplate.DeepCopy(),
		},
	}
}

func controllerRef(kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

// newReplicaSet returns a ReplicaSet of d with hash; image overrides the
// container image when not empty, making the template differ from d's.
func newReplicaSet(d appsv1.Deployment, hash, image string, created time.Time) appsv1.ReplicaSet {
	tpl := d.Spec.Template.DeepCopy()
	tpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	if image != "" {
		tpl.Spec.Containers[0].Image = image
	}
	return appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         d.Namespace,
			Name:              d.Name + "-" + hash,
			UID:               types.UID("rs-" + d.Namespace + "-" + d.Name + "-" + hash),
			Labels:            tpl.Labels,
			CreationTimestamp: metav1.NewTime(created),
			OwnerReferences:   controllerRef("Deployment", d.Name, d.UID),
		},
		Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: *tpl},
	}
}

// podState is how a test pod looks to the scheduler.
type podState int

const (
	running podState = iota
	pendingUnschedulable
	succeeded
	failed
)

// newPods returns n pods of rs in state; unschedulable ones have been so
// since testNow-age.
func newPods(rs appsv1.ReplicaSet, n int, state podState, age time.Duration) []corev1.Pod {
	pods := make([]corev1.Pod, 0, n)
	for i := range n {
		pod := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:       rs.Namespace,
				Name:            fmt.Sprintf("%s-%d-%d-%d", rs.Name, state, int(age.Seconds()), i),
				Labels:          rs.Spec.Template.Labels,
				OwnerReferences: controllerRef("ReplicaSet", rs.Name, rs.UID),
			},
		}
		unschedulable := corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			LastTransitionTime: metav1.NewTime(testNow.Add(-age)),
		}
		switch state {
		case running:
			pod.Status.Phase = corev1.PodRunning
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		case pendingUnschedulable:
			pod.Status.Phase = corev1.PodPending
			pod.Status.Conditions = []corev1.PodCondition{unschedulable}
		case succeeded:
			pod.Status.Phase = corev1.PodSucceeded
			pod.Status.Conditions = []corev1.PodCondition{unschedulable}
		case failed:
			pod.Status.Phase = corev1.PodFailed
			pod.Status.Conditions = []corev1.PodCondition{unschedulable}
		}
		pods = append(pods, pod)
	}
	return pods
}
