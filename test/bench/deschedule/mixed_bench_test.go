package deschedulebench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	pkgruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

const (
	mixedNamespace = "bench-mixed"
	// Per member and kind: stuck workloads whose pod stays Unschedulable
	// and running ones, each of one pod.
	mixedStuck   = 20
	mixedRunning = 80
	// Bindings per kind; every tenth points at a stuck workload.
	mixedBindingsPerKind = 500
)

// The custom kind of the mixed run: a Gadget whose pods the benchmark
// creates itself, controlled by the Gadget (no controller runs it).
var (
	gadgetGVR = schema.GroupVersionResource{Group: "bench.kubectl-rebalance.io", Version: "v1alpha1", Resource: "gadgets"}
	gadgetGVK = gadgetGVR.GroupVersion().WithKind("Gadget")
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// mixedKinds are the template kinds of the mixed run, as the pass sees them.
var mixedKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	gadgetGVK,
}

// BenchmarkDeschedulePassMixedKinds measures one pass over 1,500 candidate
// bindings of three kinds (Deployments, StatefulSets and a custom resource
// with pods, 150 descheduled) against the bare cost of listing what a pass
// must read: bindings, the templates of each kind, and per member the pods
// and each kind between them and the templates.
func BenchmarkDeschedulePassMixedKinds(b *testing.B) {
	cp := harness.Require(b)
	ctx := context.Background()
	setupMixed(b, ctx, cp)

	var report []measurement
	run := func(name string, op func(b *testing.B, counter *requestCounter)) {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				counter := newRequestCounter()
				m := measure(name, counter, func() { op(b, counter) })
				report = append(report, m)
				b.ReportMetric(float64(m.total()), "requests/op")
				b.ReportMetric(float64(m.peakHeap)/(1<<20), "peak-heap-MiB")
			}
		})
	}
	run("bare-list", func(b *testing.B, counter *requestCounter) {
		bareListMixed(b, ctx, counter.wrap(benchConfig(cp.Karmada)))
	})
	run("pass-dry-run-client", func(b *testing.B, counter *requestCounter) {
		config := counter.wrap(benchConfig(cp.Karmada))
		karmada, err := karmadaclient.NewForConfig(config)
		require.NoError(b, err)
		meta, err := metadata.NewForConfig(config)
		require.NoError(b, err)
		disco, err := discovery.NewDiscoveryClientForConfig(config)
		require.NoError(b, err)
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
		var kinds []schema.GroupKind
		for _, k := range mixedKinds {
			kinds = append(kinds, k.GroupKind())
		}
		d, err := deschedule.New(karmada, deschedule.NewProxyPodSource(config), nil, deschedule.Options{
			Namespace: mixedNamespace, Kinds: kinds, DryRun: deschedule.DryRunClient,
			Templates: deschedule.NewMetadataTemplateLister(meta, mapper),
		})
		require.NoError(b, err)
		result, err := d.Pass(ctx)
		require.NoError(b, err)
		require.NoError(b, result.Err())
		require.Len(b, result.Bindings, len(mixedKinds)*mixedBindingsPerKind)
		require.Equal(b, len(mixedKinds)*mixedBindingsPerKind/descheduledEvery, result.Descheduled)
	})

	fmt.Fprintf(os.Stdout, "\ndeschedule pass over %d candidate bindings of %d kinds (Deployment, StatefulSet, custom Gadget), %d members with %d workloads and pods each, %d bindings descheduled:\n",
		len(mixedKinds)*mixedBindingsPerKind, len(mixedKinds), len(members), len(mixedKinds)*(mixedStuck+mixedRunning), len(mixedKinds)*mixedBindingsPerKind/descheduledEvery)
	fmt.Fprintf(os.Stdout, "%-26s %9s %10s %11s   %s\n", "operation", "wall", "peak heap", "allocated", "API requests")
	for _, m := range report {
		fmt.Fprintf(os.Stdout, "%-26s %9s %7.1f MiB %7.1f MiB   %s\n", m.name, m.took.Round(time.Millisecond),
			float64(m.peakHeap)/(1<<20), float64(m.alloc)/(1<<20), formatCounts(m.requests))
	}
}

// bareListMixed lists, without any processing, what a mixed pass reads:
// the bindings and the templates of each kind in Karmada, and per member the
// active pods, Deployments, ReplicaSets, StatefulSets and Gadgets (metadata).
func bareListMixed(b *testing.B, ctx context.Context, karmada *rest.Config) {
	b.Helper()
	kc, err := karmadaclient.NewForConfig(karmada)
	require.NoError(b, err)
	listEach(b, ctx, func(ctx context.Context, o metav1.ListOptions) (pkgruntime.Object, error) {
		return kc.WorkV1alpha2().ResourceBindings(mixedNamespace).List(ctx, o)
	}, metav1.ListOptions{})
	meta, err := metadata.NewForConfig(karmada)
	require.NoError(b, err)
	for _, gvr := range []schema.GroupVersionResource{{Group: "apps", Version: "v1", Resource: "deployments"}, {Group: "apps", Version: "v1", Resource: "statefulsets"}, gadgetGVR} {
		listEach(b, ctx, func(ctx context.Context, o metav1.ListOptions) (pkgruntime.Object, error) {
			return meta.Resource(gvr).Namespace(mixedNamespace).List(ctx, o)
		}, metav1.ListOptions{})
	}
	var wg sync.WaitGroup
	for _, m := range members {
		config := deschedule.ClusterProxyConfig(karmada, m)
		client, err := kubernetes.NewForConfig(config)
		require.NoError(b, err)
		mm, err := metadata.NewForConfig(config)
		require.NoError(b, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			listEach(b, ctx, func(ctx context.Context, o metav1.ListOptions) (pkgruntime.Object, error) {
				return client.CoreV1().Pods(mixedNamespace).List(ctx, o)
			}, metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
			listEach(b, ctx, func(ctx context.Context, o metav1.ListOptions) (pkgruntime.Object, error) {
				return client.AppsV1().Deployments(mixedNamespace).List(ctx, o)
			}, metav1.ListOptions{})
			listEach(b, ctx, func(ctx context.Context, o metav1.ListOptions) (pkgruntime.Object, error) {
				return client.AppsV1().ReplicaSets(mixedNamespace).List(ctx, o)
			}, metav1.ListOptions{})
			listEach(b, ctx, func(ctx context.Context, o metav1.ListOptions) (pkgruntime.Object, error) {
				return client.AppsV1().StatefulSets(mixedNamespace).List(ctx, o)
			}, metav1.ListOptions{})
			listEach(b, ctx, func(ctx context.Context, o metav1.ListOptions) (pkgruntime.Object, error) {
				return mm.Resource(gadgetGVR).Namespace(mixedNamespace).List(ctx, o)
			}, metav1.ListOptions{})
		}()
	}
	wg.Wait()
}

var setupMixedOnce sync.Once

// setupMixed creates, once, the Gadget CRD everywhere, the member
// workloads and their pods, and the templates and bindings in Karmada.
func setupMixed(b *testing.B, ctx context.Context, cp *harness.ControlPlane) {
	b.Helper()
	setupMixedOnce.Do(func() {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(members)+1)
		for i, m := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = setupMixedMember(ctx, cp.Member(m).Config)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[len(members)] = setupMixedKarmada(ctx, cp.Karmada)
		}()
		wg.Wait()
		for _, err := range errs {
			require.NoError(b, err)
		}
		fmt.Fprintf(os.Stderr, "set up %d mixed bindings and %d member workloads in %s\n",
			len(mixedKinds)*mixedBindingsPerKind, len(members)*len(mixedKinds)*(mixedStuck+mixedRunning), time.Since(start).Round(time.Second))
	})
}

// mixedName is the i-th workload of a kind: stuck ones first.
func mixedName(i int) string {
	if i < mixedStuck {
		return "stuck-" + strconv.Itoa(i)
	}
	return "running-" + strconv.Itoa(i-mixedStuck)
}

// installGadgets installs the Gadget CRD and waits until it is served.
func installGadgets(ctx context.Context, config *rest.Config, namespace string) (dynamic.Interface, error) {
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": gadgetGVR.Resource + "." + gadgetGVR.Group},
		"spec": map[string]any{
			"group": gadgetGVR.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
			"versions": []any{map[string]any{"name": gadgetGVR.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{"spec": open}}}}},
		},
	}}
	if _, err := client.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	return client, wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.Resource(gadgetGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
}

func gadget(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gadgetGVK.GroupVersion().String(), "kind": gadgetGVK.Kind,
		"metadata": map[string]any{"namespace": mixedNamespace, "name": name},
		"spec":     map[string]any{"replicas": int64(1)},
	}}
}

// setupMixedMember creates the member's Deployments, StatefulSets and
// Gadgets with one pod each, and waits until every pod runs or is reported
// Unschedulable.
func setupMixedMember(ctx context.Context, config *rest.Config) error {
	client, err := kubernetes.NewForConfig(benchConfig(config))
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mixedNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	dyn, err := installGadgets(ctx, benchConfig(config), mixedNamespace)
	if err != nil {
		return err
	}
	const n = mixedStuck + mixedRunning
	err = parallel(n, 16, func(i int) error {
		name := mixedName(i)
		d := fixtures.Deployment(mixedNamespace, name, 1)
		if i < mixedStuck {
			d.Spec.Template.Spec.NodeSelector = map[string]string{"bench/nowhere": "true"}
		}
		if _, err := client.AppsV1().Deployments(mixedNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return err
		}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: mixedNamespace, Name: name},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), ServiceName: name, Selector: d.Spec.Selector,
				Template: *d.Spec.Template.DeepCopy()},
		}
		if _, err := client.AppsV1().StatefulSets(mixedNamespace).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			return err
		}
		g, err := dyn.Resource(gadgetGVR).Namespace(mixedNamespace).Create(ctx, gadget(name), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: mixedNamespace, Name: "gadget-" + name, Labels: map[string]string{"gadget": name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: gadgetGVK.GroupVersion().String(), Kind: gadgetGVK.Kind, Name: name, UID: g.GetUID(), Controller: ptr.To(true)}}},
			Spec: *d.Spec.Template.Spec.DeepCopy(),
		}
		_, err = client.CoreV1().Pods(mixedNamespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 3*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(mixedNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running, unschedulable := 0, 0
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					running++
				}
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		return running == len(mixedKinds)*mixedRunning && unschedulable == len(mixedKinds)*mixedStuck, nil
	})
}

// setupMixedKarmada creates the templates (no policy selects them) and the
// bindings of every kind, as karmada-scheduler would leave them.
func setupMixedKarmada(ctx context.Context, config *rest.Config) error {
	kube, err := kubernetes.NewForConfig(benchConfig(config))
	if err != nil {
		return err
	}
	karmada, err := karmadaclient.NewForConfig(benchConfig(config))
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mixedNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	dyn, err := installGadgets(ctx, benchConfig(config), mixedNamespace)
	if err != nil {
		return err
	}
	if err := parallel(mixedStuck+mixedRunning, 16, func(i int) error {
		name := mixedName(i)
		d := fixtures.Deployment(mixedNamespace, name, 1)
		if _, err := kube.AppsV1().Deployments(mixedNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return err
		}
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: mixedNamespace, Name: name},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), ServiceName: name, Selector: d.Spec.Selector, Template: d.Spec.Template}}
		if _, err := kube.AppsV1().StatefulSets(mixedNamespace).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := dyn.Resource(gadgetGVR).Namespace(mixedNamespace).Create(ctx, gadget(name), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	placement := fixtures.DynamicWeightPolicy(mixedNamespace, "bench", "apps/v1", "Deployment", nil, members).Spec.Placement
	placement.ClusterTolerations = nil
	applied, err := json.Marshal(placement)
	if err != nil {
		return err
	}
	return parallel(len(mixedKinds)*mixedBindingsPerKind, 32, func(j int) error {
		kind, i := mixedKinds[j%len(mixedKinds)], j/len(mixedKinds)
		short := members[i%len(members)]
		target := "running-" + strconv.Itoa(i%mixedRunning)
		if i%descheduledEvery == 0 {
			target = "stuck-" + strconv.Itoa((i/descheduledEvery)%mixedStuck)
		}
		rb := &workv1alpha2.ResourceBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: mixedNamespace, Name: fmt.Sprintf("%s-%05d", strings.ToLower(kind.Kind), i),
				Annotations: map[string]string{deschedule.AppliedPlacementAnnotation: string(applied)}},
			Spec: workv1alpha2.ResourceBindingSpec{
				Resource: workv1alpha2.ObjectReference{APIVersion: kind.GroupVersion().String(), Kind: kind.Kind, Namespace: mixedNamespace,
					Name: target, UID: types.UID(fmt.Sprintf("bench-%s-%d", kind.Kind, i))},
				Replicas: 6, Placement: &placement, SchedulerName: "bench-nobody", Clusters: append([]workv1alpha2.TargetCluster{}, bindingClusters...),
			},
		}
		created, err := karmada.WorkV1alpha2().ResourceBindings(mixedNamespace).Create(ctx, rb, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create binding %s: %w", rb.Name, err)
		}
		for _, m := range members {
			ready := 2
			if m == short {
				ready = 1
			}
			created.Status.AggregatedStatus = append(created.Status.AggregatedStatus, workv1alpha2.AggregatedStatusItem{
				ClusterName: m, Applied: true,
				Status: &pkgruntime.RawExtension{Raw: fmt.Appendf(nil, `{"replicas":2,"readyReplicas":%d}`, ready)},
			})
		}
		_, err = karmada.WorkV1alpha2().ResourceBindings(mixedNamespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
}
