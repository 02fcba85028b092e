package deschedule

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"
)

// Widget is the test's own workload kind: a custom resource whose
// member-side controller (widgetController, in this test) runs
// spec.replicas pods from spec.template and reports status.readyReplicas.
var (
	widgetGVR = schema.GroupVersionResource{Group: "e2e.kubectl-rebalance.io", Version: "v1alpha1", Resource: "widgets"}
	widgetGVK = widgetGVR.GroupVersion().WithKind("Widget")
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// widgetCRD is the Widget CustomResourceDefinition, with a status subresource.
func widgetCRD() *unstructured.Unstructured {
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": widgetGVR.Resource + "." + widgetGVR.Group},
		"spec": map[string]any{
			"group": widgetGVR.Group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": widgetGVR.Version, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "properties": map[string]any{"spec": open, "status": open},
				}},
			}},
		},
	}}
}

// widgetInterpreter tells Karmada how to divide Widgets: replicas and pod
// requirements from the template, a member's share written back to
// spec.replicas, and readyReplicas reflected from the member's status.
var widgetInterpreter = configv1alpha1.ResourceInterpreterCustomization{
	ObjectMeta: metav1.ObjectMeta{Name: "e2e-widgets"},
	Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
		Target: configv1alpha1.CustomizationTarget{APIVersion: widgetGVK.GroupVersion().String(), Kind: widgetGVK.Kind},
		Customizations: configv1alpha1.CustomizationRules{
			ReplicaResource: &configv1alpha1.ReplicaResourceRequirement{LuaScript: `
local kube = require("kube")
function GetReplicas(obj)
  local requirement = kube.accuratePodRequirements(obj.spec.template)
  return obj.spec.replicas, requirement
end`},
			ReplicaRevision: &configv1alpha1.ReplicaRevision{LuaScript: `
function ReviseReplica(obj, desiredReplica)
  obj.spec.replicas = desiredReplica
  return obj
end`},
			StatusReflection: &configv1alpha1.StatusReflection{LuaScript: `
function ReflectStatus(observedObj)
  local status = {}
  if observedObj == nil or observedObj.status == nil then
    return status
  end
  status.replicas = observedObj.status.replicas
  status.readyReplicas = observedObj.status.readyReplicas
  return status
end`},
			HealthInterpretation: &configv1alpha1.HealthInterpretation{LuaScript: `
function InterpretHealth(observedObj)
  return observedObj.status ~= nil and observedObj.status.readyReplicas == observedObj.spec.replicas
end`},
		},
	},
}

// installWidgets installs the Widget CRD in Karmada and every member, and
// the interpreter in Karmada; they are left in place for later runs.
func (e *env) installWidgets() {
	e.T.Helper()
	configs := []*rest.Config{e.CP.Karmada}
	for _, m := range e.CP.Members {
		configs = append(configs, m.Config)
	}
	for _, config := range configs {
		client, err := dynamic.NewForConfig(config)
		require.NoError(e.T, err)
		if _, err := client.Resource(crdGVR).Create(e.Ctx, widgetCRD(), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			require.NoError(e.T, err)
		}
		e.Eventually("widgets served at "+config.Host, func() (bool, string) {
			_, err := client.Resource(widgetGVR).Namespace(e.NS).List(e.Ctx, metav1.ListOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
	// Karmada schedules a Widget only to members whose status lists the
	// kind (status.apiEnablements, refreshed by the cluster status
	// controller every few seconds); a Widget created before that fails
	// its first scheduling with "did not have the API resource" and
	// karmada-scheduler parks it, as it would for an operator who did not
	// wait either.
	for _, m := range e.CP.Members {
		e.Eventually("karmada sees widgets in "+m.Name, func() (bool, string) {
			cluster, err := e.C.Karmada.ClusterV1alpha1().Clusters().Get(e.Ctx, m.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, enabled := range cluster.Status.APIEnablements {
				if enabled.GroupVersion != widgetGVK.GroupVersion().String() {
					continue
				}
				for _, r := range enabled.Resources {
					if r.Kind == widgetGVK.Kind {
						return true, "listed"
					}
				}
			}
			return false, "not in status.apiEnablements yet"
		})
	}
	interpreter := widgetInterpreter.DeepCopy()
	if _, err := e.C.Karmada.ConfigV1alpha1().ResourceInterpreterCustomizations().Create(e.Ctx, interpreter, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		require.NoError(e.T, err)
	}
}

// widget is a Widget of replicas nginx pods of 2 CPUs each, labelled app=NAME.
func widget(ns, name string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgetGVK.GroupVersion().String(),
		"kind":       widgetGVK.Kind,
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"replicas": replicas,
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "nginx", "image": "nginx", "resources": map[string]any{"requests": map[string]any{"cpu": "2"}},
				}}},
			},
		},
	}}
}

// widgetController runs, in every member, the Widgets of the test's
// namespace: pods NAME-0..NAME-(replicas-1), controlled by their Widget, and
// status.readyReplicas. It stops when the test ends.
func (e *env) widgetController() {
	e.T.Helper()
	ctx, stop := context.WithCancel(e.Ctx)
	var wg sync.WaitGroup
	e.T.Cleanup(func() {
		stop()
		wg.Wait()
	})
	for _, m := range e.CP.Members {
		client, err := dynamic.NewForConfig(m.Config)
		require.NoError(e.T, err)
		kube := e.Member(m.Name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = wait.PollUntilContextCancel(ctx, 300*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				widgets, err := client.Resource(widgetGVR).Namespace(e.NS).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, nil
				}
				for i := range widgets.Items {
					syncWidget(ctx, client, kube.CoreV1().Pods(e.NS), &widgets.Items[i])
				}
				return false, nil
			})
		}()
	}
}

type podClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// syncWidget makes one member Widget's pods match its spec and reports them.
func syncWidget(ctx context.Context, client dynamic.Interface, pods podClient, w *unstructured.Unstructured) {
	replicas, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas")
	rawTemplate, _, _ := unstructured.NestedMap(w.Object, "spec", "template")
	var template corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rawTemplate, &template); err != nil {
		return
	}
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "widget=" + w.GetName()})
	if err != nil {
		return
	}
	have := map[int64]bool{}
	var ready int64
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		i, _ := strconv.ParseInt(p.Labels["widget-index"], 10, 64)
		if i >= replicas {
			_ = pods.Delete(ctx, p.Name, metav1.DeleteOptions{})
			continue
		}
		have[i] = true
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	for i := range replicas {
		if have[i] {
			continue
		}
		pod := &corev1.Pod{ObjectMeta: *template.ObjectMeta.DeepCopy(), Spec: *template.Spec.DeepCopy()}
		pod.Name, pod.Namespace = fmt.Sprintf("%s-%d", w.GetName(), i), w.GetNamespace()
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels["widget"], pod.Labels["widget-index"] = w.GetName(), strconv.FormatInt(i, 10)
		pod.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: widgetGVK.GroupVersion().String(), Kind: widgetGVK.Kind, Name: w.GetName(), UID: w.GetUID(), Controller: ptr.To(true),
		}}
		_, _ = pods.Create(ctx, pod, metav1.CreateOptions{})
	}
	status := map[string]any{"replicas": replicas, "readyReplicas": ready}
	if old, _, _ := unstructured.NestedMap(w.Object, "status"); fmt.Sprint(old) == fmt.Sprint(status) {
		return
	}
	w = w.DeepCopy()
	w.Object["status"] = status
	_, _ = client.Resource(widgetGVR).Namespace(w.GetNamespace()).UpdateStatus(ctx, w, metav1.UpdateOptions{})
}

// TestDescheduleSeedExampleCustomResource is the seed's descheduler example
// with a custom resource: Karmada divides the Widget's replicas through its
// ResourceInterpreterCustomization, the member-side controller runs its
// pods, member1 is cordoned and its pod deleted, and one pass finds the
// unschedulable pod through its controller owner reference (pod -> the
// member's Widget) and moves the replica to another member.
func TestDescheduleSeedExampleCustomResource(t *testing.T) {
	// Not parallel: cordoning member1 must not disturb the other tests.
	e := namespacedEnv(t, "seed-widget")
	const name, binding = "web", "web-widget"
	e.installWidgets()
	e.widgetController()

	e.kindPolicy(widgetGVK.GroupVersion().String(), widgetGVK.Kind, name, deschedtest.DynamicWeight("member1", "member2", "member3"))
	karmada, err := dynamic.NewForConfig(e.CP.Karmada)
	require.NoError(t, err)
	_, err = karmada.Resource(widgetGVR).Namespace(e.NS).Create(e.Ctx, widget(e.NS, name, 3), metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = karmada.Resource(widgetGVR).Namespace(e.NS).Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	before := e.settledBinding(binding)
	t.Logf("%s placed %v", name, before)
	require.GreaterOrEqual(t, before["member1"], int32(1), "the example starts with a replica in member1")
	for member, n := range before {
		e.WaitPods(member, name, podCounts{Ready: int(n), Total: int(n)})
	}

	e.cordonAll("member1")
	e.deletePods("member1", name)
	want := int(before["member1"])
	// The Widget controller recreates the pod, which member1 cannot place.
	e.WaitPods("member1", name, podCounts{Unschedulable: want, Total: want})
	// Karmada reflects the member's readyReplicas through the interpreter.
	e.Eventually("no ready widget replicas in member1", func() (bool, string) {
		rb, err := e.C.Karmada.WorkV1alpha2().ResourceBindings(e.NS).Get(e.Ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready, known := rebalance.ReadyReplicas(rb.Spec, rb.Status)["member1"]
		return known && ready == 0, fmt.Sprintf("ready=%d known=%t", ready, known)
	})
	time.Sleep(2 * time.Second) // past the one-second threshold of the pass

	kinds := "widgets." + widgetGVR.Group
	code, stdout, stderr := e.Run("-n", e.NS, "--unschedulable-threshold", "1s", "--kinds", kinds)
	require.Equal(t, cmd.ExitOK, code, stderr)
	assert.Regexp(t, fmt.Sprintf(`%s\s+member1\s+%d\s+0\s+%d\s+0\s+evict`, binding, want, want), stdout)
	assert.Contains(t, stderr, fmt.Sprintf("descheduled 1 binding(s) moving %d replica(s)", want))

	e.movedOffMember1(binding, name, e.WaitPods)

	// Not among the default kinds: out of scope unless named.
	code, report := e.RunJSON("--unschedulable-threshold", "1s")
	require.Equal(t, cmd.ExitOK, code)
	assert.Zero(t, report.Summary.Listed)
	code, report = e.RunJSON("--unschedulable-threshold", "1s", "--kinds", "*")
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, 1, report.Summary.Listed)
	assert.Zero(t, report.Summary.EvictedReplicas, "nothing bounced back")
}
