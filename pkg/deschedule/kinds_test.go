package deschedule

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

var flinkKind = schema.GroupVersionKind{Group: "flink.apache.org", Version: "v1beta1", Kind: "FlinkDeployment"}

func TestParseKinds(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(flinkKind, meta.RESTScopeNamespace)

	got, err := ParseKinds([]string{"deployments.apps", "sts", "Job", "jobs.batch", "flinkdeployments.flink.apache.org"}, mapper)
	require.NoError(t, err)
	assert.Equal(t, []schema.GroupKind{deploymentKind, statefulSetKind, jobKind, flinkKind.GroupKind()}, got)

	got, err = ParseKinds([]string{"FlinkDeployment.flink.apache.org"}, mapper)
	require.NoError(t, err)
	assert.Equal(t, []schema.GroupKind{flinkKind.GroupKind()}, got)

	got, err = ParseKinds([]string{"deploy", "*"}, nil)
	require.NoError(t, err)
	assert.Nil(t, got, "* is every kind")

	got, err = ParseKinds(DefaultKinds, nil)
	require.NoError(t, err, "the default needs no discovery")
	assert.Equal(t, []schema.GroupKind{deploymentKind, statefulSetKind, jobKind}, got)

	_, err = ParseKinds([]string{"widgets.example.com"}, mapper)
	assert.ErrorContains(t, err, `unknown kind "widgets.example.com"`)
	_, err = ParseKinds([]string{""}, nil)
	assert.ErrorContains(t, err, "no kind given")
}

func newStatefulSet(ns, name, updateRevision string) appsv1.StatefulSet {
	return appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("sts-" + ns + "-" + name)},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
		Status:     appsv1.StatefulSetStatus{UpdateRevision: updateRevision},
	}
}

// ownedPods returns n pods controlled by the owner, unschedulable for an
// hour, with labels.
func ownedPods(owner metav1.OwnerReference, prefix string, n int, l map[string]string) []corev1.Pod {
	owner.Controller = ptr.To(true)
	var pods []corev1.Pod
	for i := range n {
		pods = append(pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: prefix + "-" + string(rune('a'+i)), UID: types.UID(prefix + "-" + string(rune('a'+i))),
				Labels: l, OwnerReferences: []metav1.OwnerReference{owner}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				LastTransitionTime: metav1.NewTime(testNow.Add(-time.Hour)),
			}}},
		})
	}
	return pods
}

// ordinalPods names pods as a StatefulSet set does, from ordinal from up.
func ordinalPods(pods []corev1.Pod, set string, from int) []corev1.Pod {
	for i := range pods {
		pods[i].Name = fmt.Sprintf("%s-%d", set, from+i)
	}
	return pods
}

// TestCountUnschedulableStatefulSetOrdinals: lowering a StatefulSet's
// replicas deletes its highest ordinals, so only unschedulable pods at the
// top count; one below a running pod leaves the StatefulSet alone, saying why.
func TestCountUnschedulableStatefulSetOrdinals(t *testing.T) {
	sts := newStatefulSet("default", "db", "db-v2")
	sts.Spec.Replicas = ptr.To[int32](4)
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: sts.UID}
	l := map[string]string{appsv1.ControllerRevisionHashLabelKey: "db-v2"}
	running := func(pods []corev1.Pod) []corev1.Pod {
		for i := range pods {
			pods[i].Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}
		}
		return pods
	}
	count := func(pods []corev1.Pod) (int32, error) {
		for i := range pods {
			pods[i].UID = types.UID(pods[i].Name)
		}
		ix := NewClusterIndex("m1", &ClusterObjects{StatefulSets: []appsv1.StatefulSet{sts}, Pods: pods})
		return ix.CountUnschedulable(statefulSetKind, "default", "db", time.Minute, testNow)
	}
	// db-0, db-1 running; db-2, db-3 pending: both can go.
	got, err := count(append(ordinalPods(running(ownedPods(ref, "r", 2, l)), "db", 0), ordinalPods(ownedPods(ref, "p", 2, l), "db", 2)...))
	require.NoError(t, err)
	assert.Equal(t, int32(2), got)
	// OrderedReady: db-2 pending, db-3 not created: handing back 2 deletes no running pod.
	got, err = count(append(ordinalPods(running(ownedPods(ref, "r", 2, l)), "db", 0), ordinalPods(ownedPods(ref, "p", 1, l), "db", 2)...))
	require.NoError(t, err)
	assert.Equal(t, int32(2), got)
	// db-1 pending below running db-2 and db-3: left alone.
	pods := ordinalPods(running(ownedPods(ref, "r", 4, l)), "db", 0)
	pods[1] = ordinalPods(ownedPods(ref, "p", 1, l), "db", 1)[0]
	got, err = count(pods)
	assert.ErrorIs(t, err, ErrStatefulSetOrder)
	assert.ErrorContains(t, err, "db-1")
	assert.Equal(t, int32(0), got)
	// db-1 and db-3 pending, db-2 running: only db-3 can go.
	pods = ordinalPods(running(ownedPods(ref, "r", 4, l)), "db", 0)
	pods[1] = ordinalPods(ownedPods(ref, "p", 1, l), "db", 1)[0]
	pods[3] = ordinalPods(ownedPods(ref, "q", 1, l), "db", 3)[0]
	got, err = count(pods)
	require.NoError(t, err)
	assert.Equal(t, int32(1), got)
}

func TestCountUnschedulableStatefulSetRevisions(t *testing.T) {
	sts := newStatefulSet("default", "db", "db-v2")
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: sts.UID}
	pods := ordinalPods(ownedPods(ref, "current", 2, map[string]string{"app": "db", appsv1.ControllerRevisionHashLabelKey: "db-v2"}), "db", 1)
	pods = append(pods, ownedPods(ref, "old", 3, map[string]string{"app": "db", appsv1.ControllerRevisionHashLabelKey: "db-v1"})...)
	ix := NewClusterIndex("m1", &ClusterObjects{StatefulSets: []appsv1.StatefulSet{sts}, Pods: pods})
	got, err := ix.CountUnschedulable(statefulSetKind, "default", "db", time.Minute, testNow)
	require.NoError(t, err)
	assert.Equal(t, int32(2), got, "only pods of the update revision count")

	fresh := newStatefulSet("default", "db", "")
	fresh.Spec.Replicas = ptr.To[int32](5)
	ix = NewClusterIndex("m1", &ClusterObjects{StatefulSets: []appsv1.StatefulSet{fresh}, Pods: ordinalPods(pods, "db", 0)})
	got, err = ix.CountUnschedulable(statefulSetKind, "default", "db", time.Minute, testNow)
	require.NoError(t, err)
	assert.Equal(t, int32(5), got, "no update revision observed yet: every pod counts")

	_, err = ix.CountUnschedulable(statefulSetKind, "default", "web", time.Minute, testNow)
	assert.ErrorIs(t, err, ErrWorkloadNotFound)
}

func partial(gvk schema.GroupVersionKind, name string, owner *metav1.OwnerReference) metav1.PartialObjectMetadata {
	m := metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(gvk.Kind + "-" + name)},
	}
	if owner != nil {
		o := *owner
		o.Controller = ptr.To(true)
		m.OwnerReferences = []metav1.OwnerReference{o}
	}
	return m
}

func TestCountUnschedulableThroughOwnerChains(t *testing.T) {
	// A custom resource that runs its pods directly, and one that runs them
	// through a Deployment of its own: only the current ReplicaSet counts.
	direct := partial(flinkKind, "direct", nil)
	viaDeploy := partial(flinkKind, "via", nil)
	d := newDeployment("default", "via-jobmanager")
	d.OwnerReferences = []metav1.OwnerReference{{APIVersion: flinkKind.GroupVersion().String(), Kind: flinkKind.Kind, Name: "via", UID: viaDeploy.UID, Controller: ptr.To(true)}}
	current := newReplicaSet(d, "cur", "", testNow.Add(-time.Hour))
	old := newReplicaSet(d, "old", "nginx:1.26", testNow.Add(-2*time.Hour))
	job := partial(jobKind.WithVersion("v1"), "batch", nil)

	var pods []corev1.Pod
	pods = append(pods, ownedPods(metav1.OwnerReference{APIVersion: flinkKind.GroupVersion().String(), Kind: flinkKind.Kind, Name: "direct", UID: direct.UID}, "direct", 2, nil)...)
	pods = append(pods, newPods(current, 3, pendingUnschedulable, time.Hour)...)
	pods = append(pods, newPods(old, 4, pendingUnschedulable, time.Hour)...)
	pods = append(pods, ownedPods(metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "batch", UID: job.UID}, "batch", 1, nil)...)
	objs := &ClusterObjects{
		Deployments: []appsv1.Deployment{d},
		ReplicaSets: []appsv1.ReplicaSet{current, old},
		Others:      []metav1.PartialObjectMetadata{direct, viaDeploy, job},
		Pods:        pods,
	}
	ix := NewClusterIndex("m1", objs)
	count := func(kind schema.GroupKind, name string) int32 {
		t.Helper()
		n, err := ix.CountUnschedulable(kind, "default", name, time.Minute, testNow)
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, int32(2), count(flinkKind.GroupKind(), "direct"))
	assert.Equal(t, int32(3), count(flinkKind.GroupKind(), "via"), "pods of the old ReplicaSet do not count")
	assert.Equal(t, int32(3), count(deploymentKind, "via-jobmanager"))
	assert.Equal(t, int32(1), count(jobKind, "batch"))

	// An owner kind that could not be listed may hide pods of a custom
	// workload: it cannot be counted. Built-in kinds are not affected.
	objs.Pods = append(objs.Pods, ownedPods(metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w", UID: "widget"}, "widget", 1, nil)...)
	objs.KindErrors = map[schema.GroupKind]error{{Group: "example.com", Kind: "Widget"}: errors.New("forbidden")}
	ix = NewClusterIndex("m1", objs)
	_, err := ix.CountUnschedulable(flinkKind.GroupKind(), "default", "direct", time.Minute, testNow)
	assert.ErrorContains(t, err, "cannot tell which pods belong to FlinkDeployment.flink.apache.org default/direct in cluster m1")
	assert.ErrorContains(t, err, "controlled by Widget.example.com w, which could not be listed: forbidden")
	assert.Equal(t, int32(1), count(jobKind, "batch"))
}

func TestClientPodSourceFollowsOwners(t *testing.T) {
	cr := partial(flinkKind, "direct", nil)
	d := newDeployment("default", "web")
	rs := newReplicaSet(d, "cur", "", testNow)
	pods := ownedPods(metav1.OwnerReference{APIVersion: flinkKind.GroupVersion().String(), Kind: flinkKind.Kind, Name: "direct", UID: cr.UID}, "direct", 1, nil)
	pods = append(pods, newPods(rs, 1, pendingUnschedulable, time.Hour)...)
	var objects []runtime.Object
	for i := range pods {
		objects = append(objects, &pods[i])
	}
	objects = append(objects, &d, &rs)
	kube := fake.NewClientset(objects...)
	scheme := metadatafake.NewTestScheme()
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	meta1 := metadatafake.NewSimpleMetadataClient(scheme, &cr)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(flinkKind, meta.RESTScopeNamespace)
	src := NewMemberPodSource(func(string) (*MemberClients, error) {
		return &MemberClients{Kube: kube, Metadata: meta1, Mapper: resettable{mapper}}, nil
	})
	listed := func() []string {
		var out []string
		for _, a := range kube.Actions() {
			out = append(out, a.GetResource().Resource)
		}
		for _, a := range meta1.Actions() {
			out = append(out, a.GetResource().Resource)
		}
		kube.ClearActions()
		meta1.ClearActions()
		return out
	}

	// Deployments only: pods, deployments, and the replicasets unschedulable
	// pods lead to; the custom resource's pods are not followed.
	objs, err := src.ListClusterObjects(context.Background(), "m1", ListRequest{Workloads: []schema.GroupVersionKind{deploymentKind.WithVersion("v1")}})
	require.NoError(t, err)
	assert.Equal(t, []string{"pods", "deployments", "replicasets"}, listed())
	assert.Empty(t, objs.KindErrors)

	objs, err = src.ListClusterObjects(context.Background(), "m1", ListRequest{Workloads: []schema.GroupVersionKind{flinkKind}})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"pods", "flinkdeployments", "replicasets", "deployments"}, listed())
	require.Len(t, objs.Others, 1)
	assert.Equal(t, flinkKind, objs.Others[0].GroupVersionKind())
	n, err := NewClusterIndex("m1", objs).CountUnschedulable(flinkKind.GroupKind(), "default", "direct", 0, testNow)
	require.NoError(t, err)
	assert.Equal(t, int32(1), n)

	// A kind the member does not serve is an error of that kind only.
	kube.PrependReactor("list", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	objs, err = src.ListClusterObjects(context.Background(), "m1", ListRequest{Workloads: []schema.GroupVersionKind{statefulSetKind.WithVersion("v1"), {Group: "example.com", Version: "v1", Kind: "Widget"}}})
	require.NoError(t, err)
	assert.ErrorContains(t, objs.KindErrors[statefulSetKind], "cannot list statefulsets in all namespaces of member cluster m1: forbidden")
	assert.ErrorContains(t, objs.KindErrors[schema.GroupKind{Group: "example.com", Kind: "Widget"}], "cannot find the resource of kind Widget.example.com")
}

// resettable makes a static mapper a ResettableRESTMapper.
type resettable struct{ meta.RESTMapper }

func (resettable) Reset() {}

func TestPassCountsEveryKind(t *testing.T) {
	sts := newBinding("default", "db", cluster{"m1", 3, 1})
	sts.Name, sts.Spec.Resource.Kind = "db-statefulset", "StatefulSet"
	job := newBinding("default", "batch", cluster{"m1", 2, -1})
	job.Name, job.Spec.Resource.APIVersion, job.Spec.Resource.Kind = "batch-job", "batch/v1", "Job"
	// Karmada reflects no ready count for Jobs: active is not ready.
	job.Status.AggregatedStatus = []workv1alpha2.AggregatedStatusItem{{ClusterName: "m1", Status: &runtime.RawExtension{Raw: []byte(`{"active":2}`)}}}
	skipped := newBinding("default", "web", cluster{"m1", 2, 0})

	statefulSet := newStatefulSet("default", "db", "db-v2")
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: statefulSet.UID}
	objects := []runtime.Object{&statefulSet}
	for _, p := range ordinalPods(ownedPods(ref, "db", 2, map[string]string{appsv1.ControllerRevisionHashLabelKey: "db-v2"}), "db", 1) {
		objects = append(objects, &p)
	}
	jobMeta := partial(jobKind.WithVersion("v1"), "batch", nil)
	for _, p := range ownedPods(metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "batch", UID: jobMeta.UID}, "batch", 1, nil) {
		objects = append(objects, &p)
	}
	kube := fake.NewClientset(objects...)
	scheme := metadatafake.NewTestScheme()
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	metaClient := metadatafake.NewSimpleMetadataClient(scheme, &jobMeta)

	f := newPassFixture([]*workv1alpha2.ResourceBinding{sts, job, skipped}, nil)
	f.templates.annotations = map[string]map[string]string{"Deployment/default/web": {SkipAnnotation: "true"}}
	d := f.descheduler(t, Options{})
	d.pods = NewMemberPodSource(func(string) (*MemberClients, error) { return &MemberClients{Kube: kube, Metadata: metaClient}, nil })
	result, err := d.Pass(context.Background())
	require.NoError(t, err)
	require.NoError(t, result.Err())

	assert.Equal(t, []SkippedBinding{{Namespace: "default", Name: "web-deployment", Code: SkipOptedOut,
		Reason: "opted out: the template has deschedule.kubectl-rebalance.io/skip=true"}}, result.Skipped)
	require.Len(t, result.Bindings, 2)
	byName := map[string]BindingResult{}
	for _, br := range result.Bindings {
		byName[br.Name] = br
	}
	assert.Equal(t, OutcomeDescheduled, byName["db-statefulset"].Outcome)
	assert.Equal(t, int32(1), byName["db-statefulset"].Rows[0].New, "3 - 2 unschedulable, never below the 1 ready")
	assert.Equal(t, OutcomeDescheduled, byName["batch-job"].Outcome)
	assert.Nil(t, byName["batch-job"].Rows[0].Ready)
	assert.Equal(t, int32(1), byName["batch-job"].Rows[0].New)
	assert.Equal(t, []schema.GroupVersionKind{deploymentKind.WithVersion("v1"), statefulSetKind.WithVersion("v1"), jobKind.WithVersion("v1")},
		sortedGVKs(f.templates.calls), "one template LIST per kind")
}

func sortedGVKs(in []schema.GroupVersionKind) []schema.GroupVersionKind {
	order := map[schema.GroupKind]int{deploymentKind: 0, statefulSetKind: 1, jobKind: 2}
	out := make([]schema.GroupVersionKind, len(in))
	copy(out, in)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if order[out[j].GroupKind()] < order[out[i].GroupKind()] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestPassTemplateErrors(t *testing.T) {
	web := newBinding("default", "web", cluster{"m1", 2, 0})
	f := newPassFixture([]*workv1alpha2.ResourceBinding{web}, nil)
	f.templates.errs = map[schema.GroupKind]error{deploymentKind: errors.New("forbidden")}
	result, err := f.descheduler(t, Options{}).Pass(context.Background())
	require.NoError(t, err)
	require.Len(t, result.Skipped, 1)
	assert.Equal(t, SkipTemplateUnlisted, result.Skipped[0].Code)
	assert.ErrorContains(t, result.Err(), "cannot list the Deployment.apps templates in all namespaces of the Karmada apiserver")
	assert.Contains(t, result.Summary(), "templates of 1 kind(s) unreadable")
	require.Len(t, result.Report().TemplateErrors, 1)

	// With a selector the scope itself is unknown: the pass fails.
	_, err = f.descheduler(t, Options{WorkloadSelector: "app=web"}).Pass(context.Background())
	assert.ErrorContains(t, err, `cannot select workloads matching "app=web"`)
}

func TestReadyField(t *testing.T) {
	job := newBinding("default", "batch", cluster{"m1", 2, 1})
	job.Spec.Resource.APIVersion, job.Spec.Resource.Kind = "batch/v1", "Job"
	assert.Empty(t, rebalance.ReadyReplicas(job.Spec, job.Status), "a Job's readyReplicas is not its ready count")
	job.Status.AggregatedStatus[0].Status.Raw = []byte(`{"active":2,"ready":1}`)
	assert.Equal(t, map[string]int32{"m1": 1}, rebalance.ReadyReplicas(job.Spec, job.Status))
}
