package estimator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/estimate"
	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

const benchNamespace = "estimator-bench"

// BenchmarkPlanCostWithEstimators measures plan on the default control
// plane (estimators on) after a failover of member1 and its recovery:
// ESTIMATOR_BENCH_WORKLOADS Deployments (300 by default) of 3 replicas
// divided by dynamic weights over the three members, so that every
// prediction needs the members' estimators. It prints the plan's wall time
// and API requests next to the bare lists of what it reads (the bindings,
// the clusters, each member's nodes and pods, through the same counting
// proxy), the verdicts, and how many placements of the real rebalance that
// follows are the predicted ones.
func BenchmarkPlanCostWithEstimators(b *testing.B) {
	cp := harness.Require(b)
	ctx := context.Background()
	c, err := fixtures.NewClients(cp.Karmada)
	require.NoError(b, err)
	n := 300
	if v := os.Getenv("ESTIMATOR_BENCH_WORKLOADS"); v != "" {
		n, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	b.StopTimer()
	setupFleet(b, ctx, c, n)
	failoverFleet(b, ctx, c, n)
	cache := b.TempDir()
	planOnce(b, cp, cache) // discovery cache, as any second kubectl command has it

	defer harness.MeasureLock(b)()
	proxy, err := cp.StartCountingProxy()
	require.NoError(b, err)
	defer proxy.Close()
	proxied, err := clientcmd.BuildConfigFromFlags("", proxy.Kubeconfig)
	require.NoError(b, err)
	var bareTook, planTook []time.Duration
	var bareCounts, planCounts map[string]int
	var report *rbprinters.Report
	for range 5 {
		took, counts := bareFleetLists(b, ctx, proxied)
		bareTook, bareCounts = append(bareTook, took), counts
		took, counts, r := planOnce(b, cp, cache)
		planTook, planCounts, report = append(planTook, took), counts, r
	}
	slices.Sort(bareTook)
	slices.Sort(planTook)
	verdicts := map[string]int{}
	for _, w := range report.Workloads {
		verdicts[w.Verdict+"/"+w.Reason]++
	}
	fmt.Fprintf(os.Stdout, "%d workloads after failover and recovery, estimators on\n", n)
	fmt.Fprintf(os.Stdout, "bare lists (deployments, bindings, clusters, member nodes and pods) via the proxy: median %s, requests %v\n", bareTook[2], bareCounts)
	fmt.Fprintf(os.Stdout, "kubectl rebalance plan deployments -l: median %s, requests %v, ratio %.2fx\n", planTook[2], planCounts, planTook[2].Seconds()/bareTook[2].Seconds())
	fmt.Fprintf(os.Stdout, "verdicts: %v\n", verdicts)

	// The real rebalance, each workload's placement held to the prediction
	// made just before its trigger.
	real := rebalanceFleet(b, cp, cache)
	matched := map[string]int{}
	for _, w := range real.Workloads {
		switch {
		case w.PredictionMatched == nil:
			matched["not predicted"]++
		case *w.PredictionMatched:
			matched["exact"]++
		default:
			matched["mismatch"]++
			fmt.Fprintf(os.Stdout, "mismatch %s: before %v predicted %v alternative %v after %v (%s)\n", w.Workload.Name,
				w.Placements.Before, w.Placements.Predicted, w.Placements.Alternative, w.Placements.After, w.Message)
		}
	}
	fmt.Fprintf(os.Stdout, "real rebalance of the %d: %v\n", len(real.Workloads), matched)
}

// rebalanceFleet rebalances the fleet for real and returns its report.
func rebalanceFleet(b *testing.B, cp *harness.ControlPlane, cache string) *rbprinters.Report {
	b.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}
	root := cmd.NewCmdRebalance(streams)
	root.SetArgs([]string{"--kubeconfig", cp.Kubeconfig, "--cache-dir", cache, "deployments", "-n", benchNamespace, "-l", "bench=estimator",
		"--kube-api-qps", "200", "--kube-api-burst", "400", "--timeout", "10m", "-o", "report-json"})
	code := cmd.Execute(root, streams)
	require.Equal(b, cmd.ExitOK, code, errOut.String())
	r := &rbprinters.Report{}
	require.NoError(b, json.Unmarshal(out.Bytes(), r))
	return r
}

// setupFleet creates n Deployments divided by dynamic weights over the three
// members and waits until each is scheduled.
func setupFleet(b *testing.B, ctx context.Context, c *fixtures.Clients, n int) {
	b.Helper()
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{})
	require.NoError(b, err)
	label := map[string]string{"bench": "estimator"}
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(benchNamespace).Create(ctx, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: "dyn"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{MatchLabels: label}}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2", "member3"}},
				ClusterTolerations: []corev1.Toleration{{Key: fixtures.RebalanceTaintKey, Operator: corev1.TolerationOpEqual, Value: "test",
					Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](0)}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas},
				},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(b, err)
	names := make(chan string)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				d := fixtures.Deployment(benchNamespace, name, 3)
				d.Labels = label
				if _, err := c.Kube.AppsV1().Deployments(benchNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		names <- "w-" + strconv.Itoa(i)
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
	waitFleet(b, ctx, c, n, func(targetsMember1 bool) bool { return true })
}

// waitFleet waits until n bindings are scheduled for their latest spec,
// none being evicted, and ok accepts each (by whether it targets member1).
func waitFleet(b *testing.B, ctx context.Context, c *fixtures.Clients, n int, ok func(targetsMember1 bool) bool) {
	b.Helper()
	err := wait.PollUntilContextTimeout(ctx, 3*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings(benchNamespace).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) < n {
			return false, nil
		}
		for _, rb := range list.Items {
			if len(rb.Spec.Clusters) == 0 || rb.Status.SchedulerObservedGeneration != rb.Generation || len(rb.Spec.GracefulEvictionTasks) > 0 || !ok(rb.Spec.TargetContains("member1")) {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(b, err)
}

// failoverFleet taints member1 until no binding is left on it, removes the
// taint, and gives the members two status updates to report the moves.
func failoverFleet(b *testing.B, ctx context.Context, c *fixtures.Clients, n int) {
	b.Helper()
	require.NoError(b, c.SetClusterTaint(ctx, "member1", true))
	waitFleet(b, ctx, c, n, func(targetsMember1 bool) bool { return !targetsMember1 })
	require.NoError(b, c.SetClusterTaint(ctx, "member1", false))
	time.Sleep(25 * time.Second)
}

// bareFleetLists lists, in pages of 500, what a plan of the fleet reads:
// the Deployments selected, the bindings, the clusters, and each member's nodes and active pods
// through the Karmada cluster proxy.
func bareFleetLists(b *testing.B, ctx context.Context, server *rest.Config) (time.Duration, map[string]int) {
	b.Helper()
	counter := harness.NewRequestCounter()
	cfg := counter.Wrap(server)
	cfg.QPS, cfg.Burst = 1000, 1000
	k, err := karmadaclient.NewForConfig(cfg)
	require.NoError(b, err)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(b, err)
	start := time.Now()
	// The templates, which plan -l lists first (as metadata).
	opts := metav1.ListOptions{Limit: 500, LabelSelector: "bench=estimator"}
	for {
		list, err := kube.AppsV1().Deployments(benchNamespace).List(ctx, opts)
		require.NoError(b, err)
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	opts = metav1.ListOptions{Limit: 500}
	for {
		list, err := k.WorkV1alpha2().ResourceBindings(benchNamespace).List(ctx, opts)
		require.NoError(b, err)
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	_, err = k.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{Limit: 500})
	require.NoError(b, err)
	for _, member := range []string{"member1", "member2", "member3"} {
		kube, err := kubernetes.NewForConfig(estimate.ProxyConfig(cfg, member))
		require.NoError(b, err)
		_, err = kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 500})
		require.NoError(b, err)
		opts := metav1.ListOptions{Limit: 500, FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"}
		for {
			list, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
			require.NoError(b, err)
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
	}
	return time.Since(start), counter.Counts()
}

// planOnce runs plan over the fleet through a counting proxy.
func planOnce(b *testing.B, cp *harness.ControlPlane, cache string) (time.Duration, map[string]int, *rbprinters.Report) {
	b.Helper()
	proxy, err := cp.StartCountingProxy()
	require.NoError(b, err)
	defer proxy.Close()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}
	root := cmd.NewCmdRebalance(streams)
	root.SetArgs([]string{"--kubeconfig", proxy.Kubeconfig, "--cache-dir", cache, "plan", "deployments", "-n", benchNamespace, "-l", "bench=estimator", "-o", "report-json"})
	start := time.Now()
	code := cmd.Execute(root, streams)
	took := time.Since(start)
	require.Equal(b, cmd.ExitOK, code, errOut.String())
	r := &rbprinters.Report{}
	require.NoError(b, json.Unmarshal(out.Bytes(), r))
	return took, proxy.Counter.Counts(), r
}
