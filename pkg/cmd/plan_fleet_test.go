package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
)

// BenchmarkPlanFleetMemory measures the memory of `kubectl rebalance plan
// deployments -A -l bench=fleet -o report-json` over a synthetic fleet of the
// shape test/bench/waves builds (one-replica Deployments spread over
// namespaces, each binding divided by static weights 1:1:1 over three
// members, scheduled where a fresh reschedule would put it, its replica
// ready), served by a fake API server that makes each page of 500 when it is
// asked for, so that the server holds nothing between requests. The objects
// carry imitations of what Karmada writes on them (managed fields, the
// policy's labels and annotations, the applied placement, the members'
// aggregated status). It reports, in process, the peak of the Go heap and the
// bytes allocated, and, for the binary built as releases are (no cgo) and run
// as its own process under /usr/bin/time, its peak RSS and wall time, as
// users run it and with GOGC=100. Run it with
//
//	go test ./pkg/cmd -run '^$' -bench PlanFleetMemory -benchtime 3x
//
// REBALANCE_FLEET_WORKLOADS and REBALANCE_FLEET_NAMESPACES choose the size
// (default 10,000 over 100). For diagnostics, PLAN_FLEET_HEAPPROFILE=PATH
// writes heap profiles of the in-process run as its peak grows,
// PLAN_FLEET_STDOUT=FILE keeps the binary's plan and PLAN_FLEET_STDERR=1
// shows its stderr. It proves nothing about the real control plane
// (test/bench/waves does); it makes the plugin's own memory repeatable
// without one.
func BenchmarkPlanFleetMemory(b *testing.B) {
	workloads := envInt("REBALANCE_FLEET_WORKLOADS", 10000)
	namespaces := envInt("REBALANCE_FLEET_NAMESPACES", 100)
	fleet := newSyntheticFleet(b, workloads, namespaces)
	kubeconfig := kubeconfigFor(b, fleet.URL)
	args := []string{"--kubeconfig", kubeconfig, "--cache-dir", b.TempDir(), "plan", "deployments", "-A", "-l", "bench=fleet", "-o", "report-json"}
	fleet.settle(b, args)
	runFleetMemory(b, args)
}

// runFleetMemory measures one plan command line over a synthetic fleet, in
// process and as the built binary.
func runFleetMemory(b *testing.B, args []string) {
	b.Run("in-process", func(b *testing.B) {
		var peak, allocated uint64
		for range b.N {
			runtime.GC()
			sampler := startHeapSampler()
			code, _, errOut := runRebalanceQuiet(args...)
			p, a := sampler.stop()
			require.Equal(b, 0, code, errOut)
			peak, allocated = max(peak, p), max(allocated, a)
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(allocated)/(1<<20), "alloc-MiB")
	})
	// The binary as users run it, and with GOGC=100 set, which turns off the
	// soft memory limit it sets itself (pkg/memlimit): the collector as it
	// was before. The two alternate, so that the machine's load falls on both.
	b.Run("binary", func(b *testing.B) {
		binary := buildPlugin(b)
		var peak, peakGOGC, inherited int64
		var took, tookGOGC time.Duration
		for range b.N {
			rss, wall, wait4 := peakRSS(b, nil, binary, args...)
			peak, inherited, took = max(peak, rss), max(inherited, wait4), took+wall
			rss, wall, _ = peakRSS(b, []string{"GOGC=100"}, binary, args...)
			peakGOGC, tookGOGC = max(peakGOGC, rss), tookGOGC+wall
		}
		b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
		b.ReportMetric(took.Seconds()/float64(b.N), "s/plan")
		b.ReportMetric(float64(peakGOGC)/1024, "GOGC=100-peak-RSS-MiB")
		b.ReportMetric(tookGOGC.Seconds()/float64(b.N), "GOGC=100-s/plan")
		b.ReportMetric(float64(inherited)/1024, "wait4-maxrss-MiB")
	})
}

// peakRSS runs binary with args under /usr/bin/time, its environment and
// env, and returns its peak RSS in KiB, its wall time, and, for comparison,
// the ru_maxrss wait4 reports for /usr/bin/time itself. Go starts a child
// with CLONE_VM|CLONE_VFORK: the child runs in the parent's address space
// until it execs, and Linux carries that address space's high-water mark
// into the child's ru_maxrss. Started directly from a process as big as this
// benchmark, a small child reports the benchmark's peak. /usr/bin/time forks
// its child the ordinary way, from its own small address space, so what it
// reports is the plugin's own.
func peakRSS(b *testing.B, env []string, binary string, args ...string) (int64, time.Duration, int64) {
	b.Helper()
	out := filepath.Join(b.TempDir(), "rss")
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", out, binary}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if path := os.Getenv("PLAN_FLEET_STDOUT"); path != "" {
		// Diagnostics: the plan itself.
		f, err := os.Create(path)
		require.NoError(b, err)
		defer f.Close()
		cmd.Stdout = f
	}
	start := time.Now()
	require.NoError(b, cmd.Run(), errOut.String())
	took := time.Since(start)
	if os.Getenv("PLAN_FLEET_STDERR") != "" {
		fmt.Fprint(os.Stderr, errOut.String())
	}
	text, err := os.ReadFile(out)
	require.NoError(b, err)
	rss, err := strconv.ParseInt(strings.TrimSpace(string(text)), 10, 64)
	require.NoError(b, err, "/usr/bin/time wrote %q", text)
	return rss, took, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// runRebalanceCaptured runs the command in process and returns its exit
// code, standard output and standard error.
func runRebalanceCaptured(args ...string) (int, string, string) {
	var out, errOut strings.Builder
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	root := NewCmdRebalance(streams)
	root.SetArgs(args)
	return Execute(root, streams), out.String(), errOut.String()
}

// runRebalanceQuiet runs the command in process, its output discarded.
func runRebalanceQuiet(args ...string) (int, string, string) {
	var errOut strings.Builder
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: &errOut}
	root := NewCmdRebalance(streams)
	root.SetArgs(args)
	return Execute(root, streams), "", errOut.String()
}

// heapSampler follows the Go heap while a run goes on: the highest heap
// (objects live or not yet swept) and the bytes allocated.
type heapSampler struct {
	done      chan struct{}
	finished  sync.WaitGroup
	peak      uint64
	allocated uint64
}

var heapSamples = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}

func startHeapSampler() *heapSampler {
	s := &heapSampler{done: make(chan struct{})}
	samples := append([]metrics.Sample(nil), heapSamples...)
	metrics.Read(samples)
	start := samples[1].Value.Uint64()
	s.finished.Add(1)
	go func() {
		defer s.finished.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		profiled := uint64(0)
		for {
			metrics.Read(samples)
			s.peak = max(s.peak, samples[0].Value.Uint64())
			if path := os.Getenv("PLAN_FLEET_HEAPPROFILE"); path != "" && s.peak > profiled+16<<20 {
				// Diagnostics: the live heap each time the peak grew by 16 MiB.
				profiled = s.peak
				runtime.GC()
				if f, err := os.Create(fmt.Sprintf("%s.%d", path, profiled>>20)); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					_ = f.Close()
				}
			}
			s.allocated = samples[1].Value.Uint64() - start
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) stop() (peak, allocated uint64) {
	close(s.done)
	s.finished.Wait()
	return s.peak, s.allocated
}

// buildPlugin builds the plugin as releases are built, without cgo.
func buildPlugin(b *testing.B) string {
	b.Helper()
	binary, err := harness.BuildPlugin(b.TempDir())
	require.NoError(b, err)
	return binary
}

// syntheticFleet serves a fleet's Deployments, bindings and clusters.
type syntheticFleet struct {
	*fakeServer
	workloads, namespaces int
	// settled is the member of each binding once the fleet settled; before
	// that, binding i is on member i%3.
	settled map[string]string
	// recovery, when set, makes the fleet of BenchmarkPlanFleetMemoryWithEstimators:
	// three replicas divided by dynamic weights, left where a failover of
	// member1 put them, and members whose nodes and pods are served through
	// the cluster proxy.
	recovery *recoveryFleet
}

// settle puts every binding where a fresh reschedule would put it, as the
// real fleet is once karmada-scheduler has placed it: plan's own prediction.
func (f *syntheticFleet) settle(b *testing.B, args []string) {
	b.Helper()
	var out strings.Builder
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: io.Discard}
	root := NewCmdRebalance(streams)
	root.SetArgs(args)
	require.Equal(b, 0, Execute(root, streams))
	var report struct {
		Workloads []struct {
			Workload   struct{ Namespace, Name string }
			Placements struct{ Predicted map[string]int }
		}
	}
	require.NoError(b, json.Unmarshal([]byte(out.String()), &report))
	settled := map[string]string{}
	for _, w := range report.Workloads {
		for member := range w.Placements.Predicted {
			settled[w.Workload.Namespace+"/"+w.Workload.Name] = member
		}
	}
	f.settled = settled
}

func newSyntheticFleet(b *testing.B, workloads, namespaces int) *syntheticFleet {
	f := &syntheticFleet{fakeServer: newFakeServer(b), workloads: workloads, namespaces: namespaces}
	newFleetRoutes(f)
	return f
}

// newFleetRoutes answers the LISTs of the fleet's Deployments, bindings and
// Clusters. Routes match by prefix in order: a caller's more specific ones
// (a cluster's proxy) go first.
func newFleetRoutes(f *syntheticFleet) {
	f.on("GET /apis/apps/v1/deployments", func(w http.ResponseWriter, r *http.Request) {
		f.page(w, r, "DeploymentList", "apps/v1", func(i int) any { return f.deployment(i) })
	})
	f.on("GET /apis/work.karmada.io/v1alpha2/resourcebindings", func(w http.ResponseWriter, r *http.Request) {
		f.page(w, r, "ResourceBindingList", "work.karmada.io/v1alpha2", func(i int) any { return f.binding(i) })
	})
	f.on("GET /apis/cluster.karmada.io/v1alpha1/clusters", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"kind": "ClusterList", "apiVersion": "cluster.karmada.io/v1alpha1",
			"metadata": map[string]any{"resourceVersion": "1000"}, "items": []any{fleetCluster("member1"), fleetCluster("member2"), fleetCluster("member3")}})
	})
}

// page answers one page of a LIST: limit items from the continue token on.
func (f *syntheticFleet) page(w http.ResponseWriter, r *http.Request, kind, apiVersion string, item func(int) any) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 {
		limit = f.workloads
	}
	from, _ := strconv.Atoi(r.URL.Query().Get("continue"))
	to := min(from+limit, f.workloads)
	items := make([]any, 0, to-from)
	for i := from; i < to; i++ {
		items = append(items, item(i))
	}
	meta := map[string]any{"resourceVersion": "1000"}
	if to < f.workloads {
		meta["continue"] = strconv.Itoa(to)
		meta["remainingItemCount"] = f.workloads - to
	}
	writeJSON(w, http.StatusOK, map[string]any{"kind": kind, "apiVersion": apiVersion, "metadata": meta, "items": items})
}

func (f *syntheticFleet) names(i int) (namespace, name string) {
	per := f.workloads / f.namespaces
	return fmt.Sprintf("fleet-%03d", i/per), "app-" + strconv.Itoa(i%per)
}

var fleetTime = metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))

// managedFields are entries of the size and number the fleet's objects
// carry: each manager's field set, a few hundred bytes to a few KiB.
func managedFields(managers ...string) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for n, m := range managers {
		var fields strings.Builder
		fields.WriteString(`{"f:metadata":{"f:labels":{".":{}`)
		for k := range 6 + 4*n {
			fmt.Fprintf(&fields, `,"f:%s.karmada.io/field-%d":{}`, m, k)
		}
		fields.WriteString(`}},"f:spec":{"f:clusters":{},"f:placement":{".":{},"f:clusterAffinity":{".":{},"f:clusterNames":{}},"f:replicaScheduling":{".":{},"f:replicaDivisionPreference":{},"f:replicaSchedulingType":{},"f:weightPreference":{".":{},"f:staticWeightList":{}}}},"f:replicaRequirements":{".":{},"f:resourceRequest":{".":{},"f:cpu":{}}}}}`)
		out = append(out, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "work.karmada.io/v1alpha2",
			Time: &fleetTime, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields.String())}})
	}
	return out
}

func fleetPolicyID(namespace string) string {
	return "0f9c6a4e-" + strings.TrimPrefix(namespace, "fleet-") + "0-4c1e-9a55-5d1f0c3b7e21"
}

func fleetPlacement() *policyv1alpha1.Placement {
	p := &policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2", "member3"}},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference:          &policyv1alpha1.ClusterPreferences{},
		},
	}
	for _, m := range []string{"member1", "member2", "member3"} {
		p.ReplicaScheduling.WeightPreference.StaticWeightList = append(p.ReplicaScheduling.WeightPreference.StaticWeightList,
			policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{m}}, Weight: 1})
	}
	return p
}

func (f *syntheticFleet) deployment(i int) *appsv1.Deployment {
	ns, name := f.names(i)
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("d0000000-0000-4000-8000-%012d", i)),
			ResourceVersion: strconv.Itoa(5000 + i), Generation: 1, CreationTimestamp: fleetTime,
			Labels: map[string]string{"app": name, "bench": "fleet", policyv1alpha1.PropagationPolicyPermanentIDLabel: fleetPolicyID(ns)},
			Annotations: map[string]string{
				policyv1alpha1.PropagationPolicyNameAnnotation:      "fleet",
				policyv1alpha1.PropagationPolicyNamespaceAnnotation: ns,
				"resourcetemplate.karmada.io/generation":            "1",
			},
			ManagedFields: managedFields("fleet.test", "karmada-controller-manager"),
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1},
	}
	if f.recovery != nil {
		f.recovery.shapeDeployment(d)
	}
	return d
}

func (f *syntheticFleet) binding(i int) *workv1alpha2.ResourceBinding {
	ns, name := f.names(i)
	member := []string{"member1", "member2", "member3"}[i%3]
	if m, ok := f.settled[ns+"/"+name]; ok {
		member = m
	}
	placement := fleetPlacement()
	applied, _ := json.Marshal(placement)
	raw, _ := json.Marshal(map[string]any{"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1,
		"observedGeneration": 2, "generation": 2, "resourceTemplateGeneration": 1})
	rb := &workv1alpha2.ResourceBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "work.karmada.io/v1alpha2", Kind: "ResourceBinding"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name + "-deployment", UID: types.UID(fmt.Sprintf("b0000000-0000-4000-8000-%012d", i)),
			ResourceVersion: strconv.Itoa(20000 + i), Generation: 3, CreationTimestamp: fleetTime,
			Labels: map[string]string{
				policyv1alpha1.PropagationPolicyPermanentIDLabel: fleetPolicyID(ns),
				workv1alpha2.ResourceBindingPermanentIDLabel:     fmt.Sprintf("e0000000-0000-4000-8000-%012d", i),
			},
			Annotations: map[string]string{
				policyv1alpha1.PropagationPolicyNameAnnotation:      "fleet",
				policyv1alpha1.PropagationPolicyNamespaceAnnotation: ns,
				"policy.karmada.io/applied-placement":               string(applied),
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name,
				UID: types.UID(fmt.Sprintf("d0000000-0000-4000-8000-%012d", i)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			Finalizers:    []string{"karmada.io/binding-controller"},
			ManagedFields: managedFields("karmada-controller-manager", "karmada-scheduler", "karmada-controller-manager-status"),
		},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name,
				UID: types.UID(fmt.Sprintf("d0000000-0000-4000-8000-%012d", i)), ResourceVersion: strconv.Itoa(5000 + i)},
			ReplicaRequirements: &workv1alpha2.ReplicaRequirements{ResourceRequest: corev1.ResourceList{}},
			Replicas:            1,
			Clusters:            []workv1alpha2.TargetCluster{{Name: member, Replicas: 1}},
			Placement:           placement,
			SchedulerName:       "default-scheduler",
			ConflictResolution:  policyv1alpha1.ConflictAbort,
		},
		Status: workv1alpha2.ResourceBindingStatus{
			SchedulerObservedGeneration: 3,
			LastScheduledTime:           &fleetTime,
			Conditions: []metav1.Condition{
				{Type: "Scheduled", Status: metav1.ConditionTrue, Reason: "Success", Message: "Binding has been scheduled successfully.", LastTransitionTime: fleetTime},
				{Type: "FullyApplied", Status: metav1.ConditionTrue, Reason: "FullyAppliedSuccess", Message: "All works have been successfully applied", LastTransitionTime: fleetTime},
			},
			AggregatedStatus: []workv1alpha2.AggregatedStatusItem{{ClusterName: member, Status: &k8sruntime.RawExtension{Raw: raw}, Applied: true, Health: workv1alpha2.ResourceHealthy}},
		},
	}
	if f.recovery != nil {
		f.recovery.shapeBinding(rb, i)
	}
	return rb
}

func fleetCluster(name string) *clusterv1alpha1.Cluster {
	return &clusterv1alpha1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.karmada.io/v1alpha1", Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("c-" + name), ResourceVersion: "900"},
		Spec:       clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Push, APIEndpoint: "https://" + name},
		Status: clusterv1alpha1.ClusterStatus{
			KubernetesVersion: "v1.35.3",
			APIEnablements: []clusterv1alpha1.APIEnablement{{GroupVersion: "apps/v1", Resources: []clusterv1alpha1.APIResource{
				{Name: "deployments", Kind: "Deployment"}, {Name: "replicasets", Kind: "ReplicaSet"}, {Name: "statefulsets", Kind: "StatefulSet"}}}},
			Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue, Reason: "ClusterReady", LastTransitionTime: fleetTime}},
			ResourceSummary: &clusterv1alpha1.ResourceSummary{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("6000")},
				Allocated:   corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3334")},
			},
		},
	}
}
