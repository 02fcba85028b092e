package cmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// BenchmarkPlanFleetMemoryWithEstimators is BenchmarkPlanFleetMemory on the
// shape plan meets on the default environment after a failover and
// recovery: every workload three replicas divided by dynamic weights
// (capacity-dependent, so plan computes each member's estimator answer),
// left where member1's failover put them ({member2:2, member3:1} or
// {member2:1, member3:2}), and `--scheduler-estimator=enabled`, so that plan
// also lists every member's nodes and active pods through the cluster proxy:
// at 10,000 workloads, 30,000 pods of the size a kube-apiserver returns.
// Run it with
//
//	go test ./pkg/cmd -run '^$' -bench PlanFleetMemoryWithEstimators -benchtime 3x
//
// The same environment variables as BenchmarkPlanFleetMemory choose the size.
func BenchmarkPlanFleetMemoryWithEstimators(b *testing.B) {
	workloads := envInt("REBALANCE_FLEET_WORKLOADS", 10000)
	namespaces := envInt("REBALANCE_FLEET_NAMESPACES", 100)
	fleet := &syntheticFleet{fakeServer: newFakeServer(b), workloads: workloads, namespaces: namespaces, recovery: &recoveryFleet{}}
	fleet.recovery.index(fleet)
	for _, m := range fleetMembers {
		proxy := "/apis/cluster.karmada.io/v1alpha1/clusters/" + m + "/proxy"
		fleet.on("GET "+proxy+"/api/v1/nodes", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"kind": "NodeList", "apiVersion": "v1",
				"metadata": map[string]any{"resourceVersion": "1000"}, "items": []any{fleetNode(m, 0), fleetNode(m, 1)}})
		})
		fleet.on("GET "+proxy+"/api/v1/pods", func(w http.ResponseWriter, r *http.Request) {
			fleet.recovery.podPage(w, r, fleet, m)
		})
	}
	newFleetRoutes(fleet)
	kubeconfig := kubeconfigFor(b, fleet.URL)
	args := []string{"--kubeconfig", kubeconfig, "--cache-dir", b.TempDir(), "plan", "deployments", "-A", "-l", "bench=fleet",
		"--scheduler-estimator=enabled", "-o", "report-json"}

	// Not one row may decline for want of the members: the benchmark is of
	// the reads the estimators need. (Rows declined because the batch's
	// timing decides them, BatchTiming, are plan's answer for a mass
	// trigger of capacity-dependent workloads; docs/plan.md.)
	code, out, errOut := runRebalanceCaptured(args...)
	require.Equal(b, 0, code, errOut)
	var report struct {
		Workloads []struct{ Verdict, Reason string }
		Summary   struct{ Verdicts map[string]int }
	}
	require.NoError(b, json.Unmarshal([]byte(out), &report))
	reasons := map[string]int{}
	for _, w := range report.Workloads {
		if w.Verdict == "CannotPredict" {
			reasons[w.Reason]++
		}
	}
	require.Zero(b, reasons["SchedulerEstimator"], "verdicts %v, declined %v; %s", report.Summary.Verdicts, reasons, errOut)
	fmt.Fprintf(os.Stderr, "verdicts of the %d workloads: %v; declined by reason: %v\n", workloads, report.Summary.Verdicts, reasons)

	runFleetMemory(b, args)
}

var fleetMembers = []string{"member1", "member2", "member3"}

// recoveryFleet is the failover-and-recovery shape of the synthetic fleet.
type recoveryFleet struct {
	// pods are, per member, the (workload, replica) of each pod it runs, in
	// the order its pod LIST returns them.
	pods map[string][][2]int
}

// split is where member1's failover left workload i.
func (recoveryFleet) split(i int) map[string]int {
	if i%2 == 0 {
		return map[string]int{"member2": 2, "member3": 1}
	}
	return map[string]int{"member2": 1, "member3": 2}
}

func (r *recoveryFleet) index(f *syntheticFleet) {
	r.pods = map[string][][2]int{}
	for i := range f.workloads {
		for _, m := range fleetMembers {
			for k := range r.split(i)[m] {
				r.pods[m] = append(r.pods[m], [2]int{i, k})
			}
		}
	}
}

var fleetRequests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}

func (recoveryFleet) shapeDeployment(d *appsv1.Deployment) {
	d.Spec.Replicas = ptr.To[int32](3)
	d.Spec.Template.Spec.Containers[0].Resources.Requests = fleetRequests
	d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = 3, 3, 3, 3
}

func (r recoveryFleet) shapeBinding(rb *workv1alpha2.ResourceBinding, i int) {
	rb.Spec.Replicas = 3
	rb.Spec.ReplicaRequirements.ResourceRequest = fleetRequests
	rb.Spec.Placement.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}
	applied, _ := json.Marshal(rb.Spec.Placement)
	rb.Annotations["policy.karmada.io/applied-placement"] = string(applied)
	rb.Spec.Clusters, rb.Status.AggregatedStatus = nil, nil
	for _, m := range fleetMembers {
		n := r.split(i)[m]
		if n == 0 {
			continue
		}
		rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: m, Replicas: int32(n)})
		raw, _ := json.Marshal(map[string]any{"replicas": n, "readyReplicas": n, "updatedReplicas": n, "availableReplicas": n,
			"observedGeneration": 2, "generation": 2, "resourceTemplateGeneration": 1})
		rb.Status.AggregatedStatus = append(rb.Status.AggregatedStatus, workv1alpha2.AggregatedStatusItem{ClusterName: m,
			Status: &k8sruntime.RawExtension{Raw: raw}, Applied: true, Health: workv1alpha2.ResourceHealthy})
	}
}

// podPage answers one page of a member's pod LIST.
func (r *recoveryFleet) podPage(w http.ResponseWriter, req *http.Request, f *syntheticFleet, member string) {
	all := r.pods[member]
	limit, _ := strconv.Atoi(req.URL.Query().Get("limit"))
	if limit <= 0 {
		limit = len(all)
	}
	from, _ := strconv.Atoi(req.URL.Query().Get("continue"))
	to := min(from+limit, len(all))
	items := make([]any, 0, to-from)
	for n := from; n < to; n++ {
		items = append(items, fleetPod(f, member, all[n][0], all[n][1]))
	}
	meta := map[string]any{"resourceVersion": "1000"}
	if to < len(all) {
		meta["continue"] = strconv.Itoa(to)
		meta["remainingItemCount"] = len(all) - to
	}
	writeJSON(w, http.StatusOK, map[string]any{"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items})
}

func fleetNode(member string, n int) *corev1.Node {
	name := fmt.Sprintf("%s-node-%d", member, n)
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("n-" + name), ResourceVersion: "800", Labels: map[string]string{"kubernetes.io/hostname": name, "type": "kwok"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2000"), corev1.ResourceMemory: resource.MustParse("4000Gi"), corev1.ResourcePods: resource.MustParse("20000")},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2000"), corev1.ResourceMemory: resource.MustParse("4000Gi"), corev1.ResourcePods: resource.MustParse("20000")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: fleetTime, LastTransitionTime: fleetTime}},
		},
	}
}

// fleetPod is a running pod as a member's kube-apiserver returns it: the
// labels, owner, managed fields, default tolerations and status a
// Deployment's pod carries.
func fleetPod(f *syntheticFleet, member string, i, k int) *corev1.Pod {
	ns, name := f.names(i)
	hash := fmt.Sprintf("%08x", i)
	podName := fmt.Sprintf("%s-%s-%05d", name, hash, k)
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: fleetTime}}
	var conditions []corev1.PodCondition
	for _, c := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		conditions = append(conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: fleetTime})
	}
	var mf strings.Builder
	mf.WriteString(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: podName, GenerateName: name + "-" + hash + "-", UID: types.UID(fmt.Sprintf("p0000000-%04d-4000-8000-%012d", k, i)),
			ResourceVersion: strconv.Itoa(90000 + 3*i + k), CreationTimestamp: fleetTime,
			Labels: map[string]string{"app": name, "pod-template-hash": hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-" + hash,
				UID: types.UID(fmt.Sprintf("r0000000-0000-4000-8000-%012d", i)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &fleetTime, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(mf.String())}},
				{Manager: "kwok", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &fleetTime, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{},"f:startTime":{}}}`)}},
			},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: fleetRequests},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}},
			NodeName: fmt.Sprintf("%s-node-%d", member, (i+k)%2), RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
			SchedulerName: "default-scheduler", TerminationGracePeriodSeconds: ptr.To[int64](30), EnableServiceLinks: ptr.To(true),
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, Conditions: conditions, HostIP: "10.0.0.1", PodIP: fmt.Sprintf("10.%d.%d.%d", 1+i%200, (i/200)%250, k), StartTime: &fleetTime,
			QOSClass:          corev1.PodQOSBurstable,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Started: ptr.To(true), Image: "registry.k8s.io/pause:3.10", ImageID: "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a", State: running}},
		},
	}
}
