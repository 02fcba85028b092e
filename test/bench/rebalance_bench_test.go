package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

const (
	benchNamespace = "bench"
	benchWorkloads = 2000
	// Every client in the comparison gets the same rate limit, the one
	// karmada-controller-manager runs with in the harness.
	benchQPS   = 200
	benchBurst = 400
)

// BenchmarkRebalance2000 rebalances 2,000 Deployments three ways on the same
// control plane and prints wall time and API requests by verb for each.
func BenchmarkRebalance2000(b *testing.B) {
	cp := harness.Require(b)
	ctx := context.Background()
	c, err := fixtures.NewClients(cp.Karmada)
	require.NoError(b, err)
	names := setupDeployments(b, ctx, c, benchWorkloads)

	var report []string
	line := func(name string, took time.Duration, counts map[string]int) {
		report = append(report, fmt.Sprintf("%-44s %10s   %s", name, took.Round(time.Millisecond), harness.FormatCounts(counts)))
	}

	b.Run("kubectl-rebalance", func(b *testing.B) {
		for range b.N {
			waitSettled(b, ctx, c)
			took, counts := runPlugin(b, cp, "--wait=false")
			line("kubectl rebalance --wait=false", took, counts)
			b.ReportMetric(float64(sum(counts)), "requests/op")
		}
	})
	b.Run("kubectl-rebalance-wait", func(b *testing.B) {
		for range b.N {
			waitSettled(b, ctx, c)
			took, counts := runPlugin(b, cp, "--wait=true", "--timeout=10m")
			line("kubectl rebalance (waits for the scheduler)", took, counts)
			b.ReportMetric(float64(sum(counts)), "requests/op")
		}
	})
	b.Run("bare-merge-patch", func(b *testing.B) {
		for range b.N {
			waitSettled(b, ctx, c)
			took, counts := bareMergePatch(b, ctx, cp, names)
			line("bare limit: concurrent merge PATCH", took, counts)
			b.ReportMetric(float64(sum(counts)), "requests/op")
		}
	})
	b.Run("workloadrebalancer-controller", func(b *testing.B) {
		for range b.N {
			waitSettled(b, ctx, c)
			took, counts := controllerRebalance(b, ctx, cp, c, names)
			line("karmada workloadRebalancer controller", took, counts)
			b.ReportMetric(float64(sum(counts)), "requests/op")
		}
	})

	fmt.Fprintf(os.Stdout, "\nrebalance of %d Deployments (qps %d, burst %d):\n", benchWorkloads, benchQPS, benchBurst)
	for _, l := range report {
		fmt.Fprintln(os.Stdout, l)
	}
}

// setupDeployments creates n one-replica Deployments and a policy dividing
// them over the members by static weights, and waits until every binding is
// scheduled. With static weights a fresh reschedule lands where the last one
// did, so runs measure the rebalance itself rather than pods moving between
// members.
func setupDeployments(b *testing.B, ctx context.Context, c *fixtures.Clients, n int) []string {
	b.Helper()
	start := time.Now()
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{})
	if err != nil {
		// A second benchmark run in the same process reuses the workloads.
		return deploymentNames(n)
	}
	members := []string{"member1", "member2", "member3"}
	policy := fixtures.DynamicWeightPolicy(benchNamespace, "bench", "apps/v1", "Deployment", nil, members)
	policy.Spec.Placement.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{}
	for _, m := range members {
		policy.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList = append(
			policy.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList,
			policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{m}}, Weight: 1})
	}
	policy.Spec.ResourceSelectors = []policyv1alpha1.ResourceSelector{{
		APIVersion: "apps/v1", Kind: "Deployment",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "rebalance"}},
	}}
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(benchNamespace).Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(b, err)

	names := deploymentNames(n)
	err = parallel(names, 16, func(name string) error {
		d := fixtures.Deployment(benchNamespace, name, 1)
		d.Labels["bench"] = "rebalance"
		_, err := c.Kube.AppsV1().Deployments(benchNamespace).Create(ctx, d, metav1.CreateOptions{})
		return err
	})
	require.NoError(b, err)
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings(benchNamespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		scheduled := 0
		for _, rb := range list.Items {
			if len(rb.Spec.Clusters) > 0 {
				scheduled++
			}
		}
		return scheduled == n, nil
	})
	require.NoError(b, err)
	fmt.Fprintf(os.Stderr, "created and scheduled %d Deployments in %s\n", n, time.Since(start).Round(time.Second))
	return names
}

func deploymentNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "bench-" + strconv.Itoa(i)
	}
	return names
}

// waitSettled waits until the scheduler has seen every binding's latest
// spec, so that one run's rescheduling does not slow the next run down.
func waitSettled(b *testing.B, ctx context.Context, c *fixtures.Clients) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings(benchNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, rb := range list.Items {
			if rb.Status.SchedulerObservedGeneration != rb.Generation {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(b, err)
	// Triggers are compared at one-second precision: start in a new second.
	time.Sleep(1100 * time.Millisecond)
}

// runPlugin runs `kubectl rebalance` in process through the counting proxy.
func runPlugin(b *testing.B, cp *harness.ControlPlane, extra ...string) (time.Duration, map[string]int) {
	b.Helper()
	proxy, err := cp.StartCountingProxy()
	require.NoError(b, err)
	defer proxy.Close()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}
	root := cmd.NewCmdRebalance(streams)
	args := append([]string{
		"--kubeconfig", proxy.Kubeconfig, "deployments", "-n", benchNamespace, "-l", "bench=rebalance",
		"-o", "name", "--kube-api-qps", strconv.Itoa(benchQPS), "--kube-api-burst", strconv.Itoa(benchBurst),
	}, extra...)
	root.SetArgs(args)
	start := time.Now()
	code := cmd.Execute(root, streams)
	took := time.Since(start)
	require.Equal(b, cmd.ExitOK, code, "kubectl rebalance %v: %s", args, errOut.String())
	return took, proxy.Counter.Counts()
}

// bareMergePatch is the floor: the same triggers as plain concurrent merge
// PATCHes, names known in advance, nothing read, nothing checked.
func bareMergePatch(b *testing.B, ctx context.Context, cp *harness.ControlPlane, names []string) (time.Duration, map[string]int) {
	b.Helper()
	counter := harness.NewRequestCounter()
	cfg := counter.Wrap(cp.Karmada)
	cfg.QPS, cfg.Burst = benchQPS, benchBurst
	client, err := karmadaclient.NewForConfig(cfg)
	require.NoError(b, err)
	patch := []byte(fmt.Sprintf(`{"spec":{"rescheduleTriggeredAt":%q}}`, time.Now().UTC().Format(time.RFC3339)))
	start := time.Now()
	err = parallel(names, 16, func(name string) error {
		_, err := client.WorkV1alpha2().ResourceBindings(benchNamespace).Patch(ctx, name+"-deployment", types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	took := time.Since(start)
	require.NoError(b, err)
	return took, counter.Counts()
}

// controllerRebalance creates one WorkloadRebalancer listing every workload
// and waits for karmada-controller-manager to finish it; the requests are
// the controller's own, read from its metrics.
func controllerRebalance(b *testing.B, ctx context.Context, cp *harness.ControlPlane, c *fixtures.Clients, names []string) (time.Duration, map[string]int) {
	b.Helper()
	before, err := cp.ComponentRequests("karmada-controller-manager")
	require.NoError(b, err)
	wr := &appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"}}
	for _, n := range names {
		wr.Spec.Workloads = append(wr.Spec.Workloads, appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: benchNamespace, Name: n})
	}
	start := time.Now()
	created, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Create(ctx, wr, metav1.CreateOptions{})
	require.NoError(b, err)
	var took time.Duration
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.FinishTime == nil {
			return false, nil
		}
		took = time.Since(start)
		return true, nil
	})
	require.NoError(b, err)
	after, err := cp.ComponentRequests("karmada-controller-manager")
	require.NoError(b, err)
	// The controller-manager runs other controllers too; the delta over the
	// run is an upper bound of what the rebalancer controller sent.
	delta := map[string]int{}
	for verb, n := range after {
		if d := n - before[verb]; d > 0 {
			delta[verb] = d
		}
	}
	return took, delta
}

// parallel calls fn for every item from a few goroutines and returns the
// first error.
func parallel(items []string, workers int, fn func(string) error) error {
	ch := make(chan string)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				if err := fn(it); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
	return first
}

func sum(counts map[string]int) int {
	total := 0
	for _, n := range counts {
		total += n
	}
	return total
}
