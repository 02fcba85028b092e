package deschedule

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// memberWorkload describes a Deployment in a member cluster by how many of
// its current pods are running and how many are unschedulable for an hour.
type memberWorkload struct {
	namespace, name        string
	running, unschedulable int
}

// memberCluster builds a fake member cluster holding the workloads.
func memberCluster(workloads ...memberWorkload) *fake.Clientset {
	var objects []runtime.Object
	for _, w := range workloads {
		d := newDeployment(w.namespace, w.name)
		rs := newReplicaSet(d, "cur", "", testNow.Add(-time.Hour))
		old := newReplicaSet(d, "old", "nginx:1.26", testNow.Add(-2*time.Hour))
		objects = append(objects, &d, &rs, &old)
		pods := newPods(rs, w.running, running, 0)
		pods = append(pods, newPods(rs, w.unschedulable, pendingUnschedulable, time.Hour)...)
		// Leftovers of the previous rollout must never be counted.
		pods = append(pods, newPods(old, 2, pendingUnschedulable, time.Hour)...)
		for i := range pods {
			objects = append(objects, &pods[i])
		}
	}
	return fake.NewClientset(objects...)
}

type passFixture struct {
	karmada   *karmadafake.Clientset
	kube      *fake.Clientset
	members   map[string]*fake.Clientset
	templates *templateStub
}

// templateStub serves the resource templates of a test from the Karmada
// fake: one per binding, with the labels and annotations set by
// "Kind/namespace/name".
type templateStub struct {
	karmada     *karmadafake.Clientset
	labels      map[string]labels.Set
	annotations map[string]map[string]string
	errs        map[schema.GroupKind]error
	calls       []schema.GroupVersionKind
}

func (s *templateStub) ListTemplates(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]metav1.PartialObjectMetadata, error) {
	s.calls = append(s.calls, gvk)
	if err := s.errs[gvk.GroupKind()]; err != nil {
		return nil, err
	}
	list, err := s.karmada.WorkV1alpha2().ResourceBindings(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []metav1.PartialObjectMetadata
	for _, rb := range list.Items {
		ref := rb.Spec.Resource
		if resourceKind(&rb).GroupKind() != gvk.GroupKind() {
			continue
		}
		key := ref.Kind + "/" + ref.Namespace + "/" + ref.Name
		if selector != nil && !selector.Matches(s.labels[key]) {
			continue
		}
		out = append(out, metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, Labels: s.labels[key], Annotations: s.annotations[key]},
		})
	}
	return out, nil
}

func newPassFixture(bindings []*workv1alpha2.ResourceBinding, members map[string]*fake.Clientset) *passFixture {
	objects := make([]runtime.Object, 0, len(bindings))
	for _, rb := range bindings {
		objects = append(objects, rb)
	}
	karmada := karmadafake.NewSimpleClientset(objects...)
	return &passFixture{karmada: karmada, kube: fake.NewClientset(), members: members, templates: &templateStub{karmada: karmada}}
}

func (f *passFixture) descheduler(t *testing.T, opts Options) *Descheduler {
	t.Helper()
	pods := NewClientPodSource(func(cluster string) (kubernetes.Interface, error) {
		m, ok := f.members[cluster]
		if !ok {
			return nil, fmt.Errorf("cluster %s unreachable", cluster)
		}
		return m, nil
	})
	events := NewEventClient(f.kube, EventComponent)
	events.now = func() time.Time { return testNow }
	if opts.Now == nil {
		opts.Now = func() time.Time { return testNow }
	}
	if opts.UnschedulableThreshold == 0 {
		opts.UnschedulableThreshold = DefaultUnschedulableThreshold
	}
	if opts.Templates == nil {
		opts.Templates = f.templates
	}
	d, err := New(f.karmada, pods, events, opts)
	require.NoError(t, err)
	return d
}

func (f *passFixture) clusters(t *testing.T, ns, name string) []workv1alpha2.TargetCluster {
	t.Helper()
	rb, err := f.karmada.WorkV1alpha2().ResourceBindings(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return rb.Spec.Clusters
}

type eventSummary struct{ namespace, kind, name, eventType, reason, message string }

func (f *passFixture) events(t *testing.T) []eventSummary {
	t.Helper()
	list, err := f.kube.CoreV1().Events(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []eventSummary
	for _, e := range list.Items {
		assert.Equal(t, EventComponent, e.Source.Component)
		out = append(out, eventSummary{e.Namespace, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Type, e.Reason, e.Message})
	}
	return out
}

// updates are the writes of bindings: the descheduler patches them, never
// updates them whole.
func updates(actions []k8stesting.Action) []k8stesting.PatchAction {
	var out []k8stesting.PatchAction
	for _, a := range actions {
		if a.GetVerb() == "update" && a.GetResource().Resource == "resourcebindings" {
			panic("a full update of a binding: " + a.GetSubresource())
		}
		if u, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "resourcebindings" {
			out = append(out, u)
		}
	}
	return out
}

func TestPassDeschedulesUnschedulableReplicas(t *testing.T) {
	web := newBinding("default", "web", cluster{"m1", 4, 1}, cluster{"m2", 2, 2})
	f := newPassFixture([]*workv1alpha2.ResourceBinding{web}, map[string]*fake.Clientset{
		"m1": memberCluster(memberWorkload{"default", "web", 1, 3}),
	})
	result, err := f.descheduler(t, Options{}).Pass(context.Background())
	require.NoError(t, err)

	msg := "Binding has been descheduled, 3 replica(s) in cluster(m1), 3 total descheduled replica(s)"
	require.Len(t, result.Bindings, 1)
	br := result.Bindings[0]
	assert.Equal(t, OutcomeDescheduled, br.Outcome)
	assert.Equal(t, int32(3), br.Evicted)
	assert.Equal(t, msg, br.Message)
	assert.Equal(t, []Action{ActionEvict, ActionReady}, []Action{br.Rows[0].Action, br.Rows[1].Action})
	assert.Equal(t, int32(3), br.Rows[0].Unschedulable, "old-ReplicaSet pods are not counted")
	assert.NoError(t, br.EventErr)
	assert.Equal(t, 1, result.Descheduled)
	assert.Equal(t, int32(3), result.EvictedReplicas)
	assert.NoError(t, result.Err())

	assert.Equal(t, []workv1alpha2.TargetCluster{{Name: "m1", Replicas: 1}, {Name: "m2", Replicas: 2}}, f.clusters(t, "default", "web-deployment"))
	assert.ElementsMatch(t, []eventSummary{
		{"default", "ResourceBinding", "web-deployment", corev1.EventTypeNormal, ReasonDescheduleSucceed, msg},
		{"default", "Deployment", "web", corev1.EventTypeNormal, ReasonDescheduleSucceed, msg},
	}, f.events(t))

	u := updates(f.karmada.Actions())
	require.Len(t, u, 1)
	assert.Equal(t, types.JSONPatchType, u[0].GetPatchType())
	assert.Contains(t, string(u[0].GetPatch()), `{"op":"replace","path":"/metadata/resourceVersion","value":"1"}`, "the patch carries the resourceVersion read")
	assert.Contains(t, result.Summary(), "1 binding(s) listed, 1 candidate(s), descheduled 1 binding(s) moving 3 replica(s)")
}

func TestPassSelectsBindings(t *testing.T) {
	web := newBinding("default", "web", cluster{"m1", 2, 0})
	sts := newBinding("default", "db", cluster{"m1", 2, 0})
	sts.Spec.Resource.Kind = "StatefulSet"
	excluded := newBinding("kube-system", "dns", cluster{"m1", 2, 0})
	otherNS := newBinding("team-a", "api", cluster{"m1", 2, 0})
	front := newBinding("default", "front", cluster{"m1", 2, 0})
	// A ConfigMap named like a selected Deployment must not be selected.
	sameName := newBinding("default", "front-config", cluster{"m1", 2, 0})
	sameName.Spec.Resource.APIVersion, sameName.Spec.Resource.Kind, sameName.Spec.Resource.Name = "v1", "ConfigMap", "front"
	// Templates in the Karmada apiserver: only the Deployment default/front
	// is labelled tier=front.
	labelled := map[string]labels.Set{"Deployment/default/front": {"tier": "front"}, "Deployment/default/web": {"tier": "back"}}

	tests := []struct {
		name        string
		opts        Options
		wantListed  int
		wantChanged []string
		wantBlocked []string
	}{
		{
			name:        "all namespaces minus excluded ones",
			opts:        Options{ExcludedNamespaces: []string{"kube-system"}},
			wantListed:  5,
			wantChanged: []string{"default/front-deployment", "default/web-deployment", "team-a/api-deployment"},
			wantBlocked: []string{"default/db-deployment", "default/front-config-deployment"},
		},
		{
			name:        "kinds",
			opts:        Options{Kinds: []schema.GroupKind{statefulSetKind, {Kind: "ConfigMap"}}},
			wantListed:  2,
			wantBlocked: []string{"default/db-deployment", "default/front-config-deployment"},
		},
		{
			name:        "one namespace",
			opts:        Options{Namespace: "team-a"},
			wantListed:  1,
			wantChanged: []string{"team-a/api-deployment"},
		},
		{
			name:        "workload label selector",
			opts:        Options{WorkloadSelector: "tier=front"},
			wantListed:  1,
			wantChanged: []string{"default/front-deployment"},
		},
		{
			name:       "workload label selector matching nothing",
			opts:       Options{WorkloadSelector: "tier=none"},
			wantListed: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPassFixture([]*workv1alpha2.ResourceBinding{web.DeepCopy(), sts.DeepCopy(), excluded.DeepCopy(), otherNS.DeepCopy(), front.DeepCopy(), sameName.DeepCopy()},
				map[string]*fake.Clientset{"m1": memberCluster(
					memberWorkload{"default", "web", 0, 2}, memberWorkload{"default", "front", 0, 2},
					memberWorkload{"kube-system", "dns", 0, 2}, memberWorkload{"team-a", "api", 0, 2},
				)})
			f.templates.labels = labelled
			result, err := f.descheduler(t, tt.opts).Pass(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.wantListed, result.Listed)
			assert.Empty(t, result.Skipped)
			var changed, blocked []string
			for _, br := range result.Bindings {
				switch br.Outcome {
				case OutcomeDescheduled:
					changed = append(changed, br.Namespace+"/"+br.Name)
				case OutcomeBlocked:
					// Kinds the members do not hold: nothing to count.
					blocked = append(blocked, br.Namespace+"/"+br.Name)
				}
			}
			assert.Equal(t, tt.wantChanged, changed)
			assert.Equal(t, tt.wantBlocked, blocked)
		})
	}
}

func TestPassDryRun(t *testing.T) {
	tests := []struct {
		name        string
		dryRun      DryRun
		wantUpdates int
	}{
		{name: "client", dryRun: DryRunClient, wantUpdates: 0},
		{name: "server", dryRun: DryRunServer, wantUpdates: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			web := newBinding("default", "web", cluster{"m1", 3, 1})
			f := newPassFixture([]*workv1alpha2.ResourceBinding{web}, map[string]*fake.Clientset{
				"m1": memberCluster(memberWorkload{"default", "web", 1, 2}),
			})
			// The fake tracker would persist a dry-run update; the API server does not.
			f.karmada.PrependReactor("patch", "resourcebindings", func(a k8stesting.Action) (bool, runtime.Object, error) {
				u := a.(k8stesting.PatchActionImpl)
				assert.Equal(t, []string{metav1.DryRunAll}, u.PatchOptions.DryRun)
				current, err := f.karmada.Tracker().Get(a.GetResource(), u.GetNamespace(), u.GetName())
				return true, current, err
			})
			result, err := f.descheduler(t, Options{DryRun: tt.dryRun}).Pass(context.Background())
			require.NoError(t, err)

			require.Len(t, result.Bindings, 1)
			assert.Equal(t, OutcomeDryRun, result.Bindings[0].Outcome)
			assert.Equal(t, int32(1), result.Bindings[0].Rows[0].New)
			assert.Equal(t, int32(2), result.EvictedReplicas)
			assert.Len(t, updates(f.karmada.Actions()), tt.wantUpdates)
			assert.Equal(t, int32(3), f.clusters(t, "default", "web-deployment")[0].Replicas)
			assert.Empty(t, f.events(t), "a dry run records no events")
			assert.Contains(t, result.Summary(), "would deschedule 1 binding(s) moving 2 replica(s)")
			assert.Contains(t, result.Summary(), "(dry run: "+string(tt.dryRun)+")")
		})
	}
}

func TestPassConflict(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "work.karmada.io", Resource: "resourcebindings"}, "web-deployment",
		errors.New("the object has been modified"))
	tests := []struct {
		name        string
		conflicts   int
		wantOutcome Outcome
		wantNew     int32
		wantEvent   eventSummary
	}{
		{
			name:        "re-read and recompute once",
			conflicts:   1,
			wantOutcome: OutcomeDescheduled,
			// The scheduler raised m1 to 5 meanwhile: 5 - 3 unschedulable.
			wantNew: 2,
			wantEvent: eventSummary{"default", "ResourceBinding", "web-deployment", corev1.EventTypeNormal, ReasonDescheduleSucceed,
				"Binding has been descheduled, 3 replica(s) in cluster(m1), 3 total descheduled replica(s)"},
		},
		{
			name:        "second conflict fails the binding",
			conflicts:   2,
			wantOutcome: OutcomeFailed,
			wantNew:     5,
			wantEvent:   eventSummary{"default", "ResourceBinding", "web-deployment", corev1.EventTypeWarning, ReasonDescheduleFailed, conflict.Error()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			web := newBinding("default", "web", cluster{"m1", 4, 1})
			f := newPassFixture([]*workv1alpha2.ResourceBinding{web}, map[string]*fake.Clientset{
				"m1": memberCluster(memberWorkload{"default", "web", 1, 3}),
			})
			seen := 0
			f.karmada.PrependReactor("patch", "resourcebindings", func(a k8stesting.Action) (bool, runtime.Object, error) {
				seen++
				if seen > tt.conflicts {
					return false, nil, nil
				}
				if seen == 1 {
					// Simulate the scheduler writing in between.
					changed := web.DeepCopy()
					changed.ResourceVersion = "2"
					changed.Spec.Clusters[0].Replicas = 5
					require.NoError(t, f.karmada.Tracker().Update(a.GetResource(), changed, "default"))
				}
				return true, nil, conflict
			})
			result, err := f.descheduler(t, Options{}).Pass(context.Background())
			require.NoError(t, err)

			br := result.Bindings[0]
			assert.True(t, br.Retried)
			assert.Equal(t, tt.wantOutcome, br.Outcome)
			assert.Equal(t, tt.wantNew, f.clusters(t, "default", "web-deployment")[0].Replicas)
			assert.Contains(t, f.events(t), tt.wantEvent)
			if tt.wantOutcome == OutcomeFailed {
				assert.Equal(t, 1, result.Failed)
				assert.ErrorContains(t, result.Err(), "cannot update resourcebinding default/web-deployment")
				assert.True(t, apierrors.IsConflict(errors.Unwrap(br.Err)))
			}
		})
	}
}

// TestPassLostAnswer: a binding update whose answer was lost after the
// server applied it (a reset, a timeout, a 5xx from something between) is
// the pass's one write: the binding is read again, found holding the
// evictions record sent, and reported descheduled with its Succeed event;
// nothing is written twice. An answer refusing the write is believed, and a
// lost answer of a write that did not land leaves the binding failed.
func TestPassLostAnswer(t *testing.T) {
	gr := schema.GroupResource{Group: "work.karmada.io", Resource: "resourcebindings"}
	tests := []struct {
		name        string
		err         error
		land        bool
		wantOutcome Outcome
		wantReads   int
	}{
		{"reset after the write landed", errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"), true, OutcomeDescheduled, 1},
		{"timeout after the write landed", fmt.Errorf("put: %w", context.DeadlineExceeded), true, OutcomeDescheduled, 1},
		{"502 after the write landed", apierrors.NewGenericServerResponse(502, "PUT", gr, "web-deployment", "bad gateway", 0, true), true, OutcomeDescheduled, 1},
		{"reset before the write landed", errors.New("connection reset by peer"), false, OutcomeFailed, 1},
		{"refused by a webhook", apierrors.NewForbidden(gr, "web-deployment", errors.New("denied")), true, OutcomeFailed, 0},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), false, OutcomeFailed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			web := newBinding("default", "web", cluster{"m1", 4, 1})
			f := newPassFixture([]*workv1alpha2.ResourceBinding{web}, map[string]*fake.Clientset{
				"m1": memberCluster(memberWorkload{"default", "web", 1, 3}),
			})
			writes := 0
			f.karmada.PrependReactor("patch", "resourcebindings", func(a k8stesting.Action) (bool, runtime.Object, error) {
				writes++
				if tt.land {
					_, _, err := k8stesting.ObjectReaction(f.karmada.Tracker())(a)
					require.NoError(t, err)
				}
				return true, nil, tt.err
			})
			reads := 0
			f.karmada.PrependReactor("get", "resourcebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
				reads++
				return false, nil, nil
			})
			result, err := f.descheduler(t, Options{}).Pass(context.Background())
			require.NoError(t, err)

			br := result.Bindings[0]
			assert.Equal(t, tt.wantOutcome, br.Outcome, "%v", br.Err)
			assert.Equal(t, 1, writes, "one write, never repeated")
			assert.Equal(t, tt.wantReads, reads)
			if tt.wantOutcome == OutcomeDescheduled {
				assert.Equal(t, 1, result.Descheduled)
				assert.Equal(t, int32(3), br.Evicted)
				assert.Contains(t, f.events(t), eventSummary{"default", "ResourceBinding", "web-deployment", corev1.EventTypeNormal, ReasonDescheduleSucceed,
					"Binding has been descheduled, 3 replica(s) in cluster(m1), 3 total descheduled replica(s)"})
				return
			}
			assert.Equal(t, 1, result.Failed)
			assert.ErrorIs(t, br.Err, tt.err)
		})
	}
}

func TestPassConflictBindingNoLongerCandidate(t *testing.T) {
	web := newBinding("default", "web", cluster{"m1", 4, 1})
	f := newPassFixture([]*workv1alpha2.ResourceBinding{web}, map[string]*fake.Clientset{
		"m1": memberCluster(memberWorkload{"default", "web", 1, 3}),
	})
	f.karmada.PrependReactor("patch", "resourcebindings", func(a k8stesting.Action) (bool, runtime.Object, error) {
		changed := web.DeepCopy()
		changed.ResourceVersion = "2"
		changed.Annotations[AppliedPlacementAnnotation] = `{}`
		require.NoError(t, f.karmada.Tracker().Update(a.GetResource(), changed, "default"))
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "resourcebindings"}, "web-deployment", errors.New("modified"))
	})
	result, err := f.descheduler(t, Options{}).Pass(context.Background())
	require.NoError(t, err)
	assert.Equal(t, OutcomeSkipped, result.Bindings[0].Outcome)
	assert.Contains(t, result.Bindings[0].Message, "replica scheduling is Duplicated")
	assert.Empty(t, f.events(t))
}

func TestPassUnreachableClusterBlocksBinding(t *testing.T) {
	web := newBinding("default", "web", cluster{"m1", 3, 1}, cluster{"m2", 3, 0})
	api := newBinding("default", "api", cluster{"m1", 3, 1})
	f := newPassFixture([]*workv1alpha2.ResourceBinding{web, api}, map[string]*fake.Clientset{
		"m1": memberCluster(memberWorkload{"default", "web", 1, 2}, memberWorkload{"default", "api", 1, 2}),
	})
	result, err := f.descheduler(t, Options{}).Pass(context.Background())
	require.NoError(t, err)

	byName := map[string]BindingResult{}
	for _, br := range result.Bindings {
		byName[br.Name] = br
	}
	web2 := byName["web-deployment"]
	assert.Equal(t, OutcomeBlocked, web2.Outcome)
	assert.Equal(t, []Action{ActionBlocked, ActionCountFailed}, []Action{web2.Rows[0].Action, web2.Rows[1].Action})
	assert.Contains(t, web2.Message, "cluster m2 could not be counted")
	assert.Equal(t, OutcomeDescheduled, byName["api-deployment"].Outcome, "other bindings are not held back")
	assert.Equal(t, int32(3), f.clusters(t, "default", "web-deployment")[0].Replicas)
	assert.Contains(t, result.ClusterErrors, "m2")
	assert.ErrorContains(t, result.Err(), "cluster m2 unreachable")
	assert.Contains(t, result.Summary(), "1 blocked")
	assert.Contains(t, result.Summary(), "1 member cluster(s) unreachable")
}

func TestPassMissingMemberDeploymentBlocksBinding(t *testing.T) {
	web := newBinding("default", "web", cluster{"m1", 3, 1})
	f := newPassFixture([]*workv1alpha2.ResourceBinding{web}, map[string]*fake.Clientset{"m1": memberCluster()})
	result, err := f.descheduler(t, Options{}).Pass(context.Background())
	require.NoError(t, err)
	assert.Equal(t, OutcomeBlocked, result.Bindings[0].Outcome)
	assert.ErrorIs(t, result.Bindings[0].Rows[0].Err, ErrWorkloadNotFound)
	assert.Empty(t, updates(f.karmada.Actions()))
}

func TestPassLimits(t *testing.T) {
	tests := []struct {
		name         string
		opts         Options
		wantNew      map[string][]int32
		wantOutcomes map[string]Outcome
		wantEvicted  int32
	}{
		{
			name:         "no limits",
			wantNew:      map[string][]int32{"a-deployment": {0, 0}, "b-deployment": {0}},
			wantOutcomes: map[string]Outcome{"a-deployment": OutcomeDescheduled, "b-deployment": OutcomeDescheduled},
			wantEvicted:  9,
		},
		{
			name:         "per pass, in binding order",
			opts:         Options{MaxReplicasPerPass: 4},
			wantNew:      map[string][]int32{"a-deployment": {0, 2}, "b-deployment": {3}},
			wantOutcomes: map[string]Outcome{"a-deployment": OutcomeDescheduled, "b-deployment": OutcomeLimited},
			wantEvicted:  4,
		},
		{
			name:         "per cluster",
			opts:         Options{MaxReplicasPerCluster: 2},
			wantNew:      map[string][]int32{"a-deployment": {1, 1}, "b-deployment": {3}},
			wantOutcomes: map[string]Outcome{"a-deployment": OutcomeDescheduled, "b-deployment": OutcomeLimited},
			wantEvicted:  4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newBinding("default", "a", cluster{"m1", 3, 0}, cluster{"m2", 3, 0})
			b := newBinding("default", "b", cluster{"m1", 3, 0})
			f := newPassFixture([]*workv1alpha2.ResourceBinding{b, a}, map[string]*fake.Clientset{
				"m1": memberCluster(memberWorkload{"default", "a", 0, 3}, memberWorkload{"default", "b", 0, 3}),
				"m2": memberCluster(memberWorkload{"default", "a", 0, 3}),
			})
			result, err := f.descheduler(t, tt.opts).Pass(context.Background())
			require.NoError(t, err)
			for _, br := range result.Bindings {
				var got []int32
				for _, tc := range f.clusters(t, "default", br.Name) {
					got = append(got, tc.Replicas)
				}
				assert.Equal(t, tt.wantNew[br.Name], got, br.Name)
				assert.Equal(t, tt.wantOutcomes[br.Name], br.Outcome, br.Name)
			}
			assert.Equal(t, tt.wantEvicted, result.EvictedReplicas)
		})
	}
}

func TestPassStopsBetweenWrites(t *testing.T) {
	a := newBinding("default", "a", cluster{"m1", 3, 0})
	b := newBinding("default", "b", cluster{"m1", 3, 0})
	f := newPassFixture([]*workv1alpha2.ResourceBinding{a, b}, map[string]*fake.Clientset{
		"m1": memberCluster(memberWorkload{"default", "a", 0, 3}, memberWorkload{"default", "b", 0, 3}),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.karmada.PrependReactor("patch", "resourcebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
		// The stop request arrives while the first write is in flight.
		cancel()
		return false, nil, nil
	})
	result, err := f.descheduler(t, Options{}).Pass(ctx)
	require.NoError(t, err)

	assert.True(t, result.Stopped)
	assert.Equal(t, OutcomeDescheduled, result.Bindings[0].Outcome, "the write in flight completes")
	assert.NoError(t, result.Bindings[0].EventErr, "and so do its events")
	assert.Equal(t, OutcomeStopped, result.Bindings[1].Outcome)
	assert.Equal(t, int32(0), f.clusters(t, "default", "a-deployment")[0].Replicas)
	assert.Equal(t, int32(3), f.clusters(t, "default", "b-deployment")[0].Replicas)
	assert.Len(t, f.events(t), 2)
	assert.Contains(t, result.Summary(), "stopped early")
}

func TestNewRejectsBadOptions(t *testing.T) {
	karmada := karmadafake.NewSimpleClientset()
	pods := NewClientPodSource(func(string) (kubernetes.Interface, error) { return nil, nil })
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{name: "dry run", opts: Options{DryRun: "always"}, want: `invalid dry-run value "always"`},
		{name: "selector", opts: Options{WorkloadSelector: "a in (b"}, want: "invalid workload label selector"},
		{name: "no template lister", opts: Options{}, want: "needs a TemplateLister"},
		{name: "limits", opts: Options{MaxReplicasPerPass: -1}, want: "replica limits"},
		{name: "namespace both ways", opts: Options{Namespace: "x", ExcludedNamespaces: []string{"x"}}, want: "both selected and excluded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name != "no template lister" {
				tt.opts.Templates = &templateStub{karmada: karmada}
			}
			_, err := New(karmada, pods, nil, tt.opts)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestPassStoppedWhileListingMembers(t *testing.T) {
	web := newBinding("default", "web", cluster{"m1", 3, 1})
	f := newPassFixture([]*workv1alpha2.ResourceBinding{web}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	d := f.descheduler(t, Options{})
	d.pods = podSourceFunc(func(ctx context.Context, _ string, _ ListRequest) (*ClusterObjects, error) {
		cancel()
		return nil, ctx.Err()
	})
	result, err := d.Pass(ctx)
	require.NoError(t, err)
	assert.True(t, result.Stopped)
	assert.Equal(t, OutcomeStopped, result.Bindings[0].Outcome)
	assert.Empty(t, result.ClusterErrors, "a stop request is not reported as an unreachable cluster")
	assert.Empty(t, updates(f.karmada.Actions()))
}

func TestPassOverSpecIsLeftAlone(t *testing.T) {
	web := newBinding("default", "web", cluster{"m1", 2, 0})
	f := newPassFixture([]*workv1alpha2.ResourceBinding{web}, map[string]*fake.Clientset{
		"m1": memberCluster(memberWorkload{"default", "web", 0, 3}),
	})
	result, err := f.descheduler(t, Options{}).Pass(context.Background())
	require.NoError(t, err)
	br := result.Bindings[0]
	assert.Equal(t, OutcomeUnchanged, br.Outcome)
	assert.Equal(t, ActionOverSpec, br.Rows[0].Action)
	assert.Contains(t, br.Message, "more unschedulable pods than assigned")
	assert.Empty(t, updates(f.karmada.Actions()))
}

type podSourceFunc func(ctx context.Context, cluster string, req ListRequest) (*ClusterObjects, error)

func (f podSourceFunc) ListClusterObjects(ctx context.Context, cluster string, req ListRequest) (*ClusterObjects, error) {
	return f(ctx, cluster, req)
}
