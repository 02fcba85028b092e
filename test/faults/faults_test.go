package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

const (
	namespace = "faults"
	workloads = 500
	faultRate = 0.25
)

// BenchmarkFaults rebalances 500 Deployments through a proxy that fails a
// quarter of the requests, restarting the Karmada apiserver in the middle of
// each run: once plain, once recorded as a WorkloadRebalancer (and, when
// something was left pending, once more without faults to finish it).
func BenchmarkFaults(b *testing.B) {
	cp := harness.Require(b)
	ctx := context.Background()
	c, err := fixtures.NewClients(cp.Karmada)
	require.NoError(b, err)
	setup(b, ctx, c)

	var report []string
	b.Run("plain", func(b *testing.B) {
		for i := range b.N {
			waitSettled(b, ctx, c)
			r := runWithFaults(b, ctx, cp, uint64(100+i), afterTriggers, "deployments", "--all", "-n", namespace, "--wait=false", "--timeout=5m", "--max-unavailable=100%", "-o", "json")
			rb := decodeRebalancer(b, r.stdout)
			successful, pending := checkRun(b, ctx, c, r, rb)
			report = append(report, r.line("plain", successful, pending))
		}
	})
	b.Run("recorded", func(b *testing.B) {
		for i := range b.N {
			waitSettled(b, ctx, c)
			name := fmt.Sprintf("faults-rec-%d-%d", time.Now().Unix(), i)
			// Karmada's workloadRebalancer controller triggers the record's
			// workloads at its creationTimestamp, mostly before the run's
			// own writes (which then find the trigger in place): the
			// apiserver is restarted once the run sent 300 requests, while
			// it reads the bindings and writes the status.
			r := runWithFaults(b, ctx, cp, uint64(200+i), afterRequests, "deployments", "--all", "-n", namespace, "--name", name, "--wait=false", "--timeout=5m", "--max-unavailable=100%", "-o", "json")
			recorded, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Get(ctx, name, metav1.GetOptions{})
			require.NoError(b, err, "the record exists: %s", r.stderr)
			successful, pending := checkRun(b, ctx, c, r, recorded)
			report = append(report, r.line("recorded", successful, pending))
			if pending > 0 {
				// Finish it without faults: only the pending entries are
				// triggered, and no binding gets a second trigger.
				again := runWithFaults(b, ctx, cp, 0, nil, "workloadrebalancer/"+name, "--wait=false", "--timeout=5m", "-o", "json")
				recorded, err = c.Karmada.AppsV1alpha1().WorkloadRebalancers().Get(ctx, name, metav1.GetOptions{})
				require.NoError(b, err)
				for key, n := range again.writes {
					r.writes[key] += n
				}
				s, p := checkRun(b, ctx, c, r, recorded)
				assert.Equal(b, 0, p, "nothing pending after a pass without faults")
				report = append(report, again.line("recorded, second pass without faults", s, p))
			}
		}
	})

	b.Run("waved", func(b *testing.B) {
		for i := range b.N {
			waitSettled(b, ctx, c)
			r := runWithFaults(b, ctx, cp, uint64(300+i), afterTriggers, "deployments", "--all", "-n", namespace,
				"--max-in-flight=100", "--wait-ready=false", "--progress-deadline=5m", "--timeout=10m", "--max-unavailable=100%", "-o", "json")
			logUnanswered(b, ctx, c)
			rb := decodeRebalancer(b, r.stdout)
			r.perWorkloadTime = true // each workload is triggered when its turn comes
			successful, pending := checkRun(b, ctx, c, r, rb)
			report = append(report, r.line("waved (--max-in-flight 100, one write)", successful, pending))
		}
	})

	fmt.Fprintf(os.Stdout, "\nrebalance of %d Deployments through a proxy failing %.0f%% of the requests, Karmada apiserver restarted mid-run:\n", workloads, 100*faultRate)
	for _, l := range report {
		fmt.Fprintln(os.Stdout, l)
	}
}

// run is one command run through the fault proxy.
type run struct {
	code           int
	stdout, stderr string
	took           time.Duration
	stats          harness.FaultStats
	writes         map[string]int
	restarted      bool
	// perWorkloadTime: a waved run triggers each workload at its own time.
	perWorkloadTime bool
}

func (r run) line(name string, successful, pending int) string {
	restart := "no restart"
	if r.restarted {
		restart = "apiserver restarted"
	}
	return fmt.Sprintf("%-40s exit %d in %6s, %s; %d successful, %d pending; %d trigger writes reached the server\n    %s",
		name, r.code, r.took.Round(100*time.Millisecond), restart, successful, pending, sum(r.writes), r.stats)
}

// restartWhen says when, during a run, to restart the Karmada apiserver,
// and what the log line says about it.
type restartWhen func(p *harness.FaultProxy) (bool, string)

// afterTriggers restarts the apiserver once 150 of the run's trigger writes
// reached it.
func afterTriggers(p *harness.FaultProxy) (bool, string) {
	n := sum(p.TriggerWrites())
	return n >= 150, fmt.Sprintf("%d trigger writes", n)
}

// afterRequests restarts it once the run sent 300 requests.
func afterRequests(p *harness.FaultProxy) (bool, string) {
	n := p.Stats().Requests
	return n >= 300, fmt.Sprintf("%d requests", n)
}

// runWithFaults runs kubectl rebalance in process through a fault proxy
// (seed 0: no faults, no restart). The Karmada apiserver is restarted once
// restart says so.
func runWithFaults(b *testing.B, ctx context.Context, cp *harness.ControlPlane, seed uint64, restart restartWhen, args ...string) run {
	b.Helper()
	rate := faultRate
	if seed == 0 {
		rate = 0
	}
	proxy, err := cp.StartFaultProxy(harness.FaultOptions{Rate: rate, Seed: seed})
	require.NoError(b, err)
	defer proxy.Close()

	restartCtx, stopRestart := context.WithCancel(ctx)
	defer stopRestart()
	var restarted bool
	var wg sync.WaitGroup
	if seed != 0 && restart != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var when string
			err := wait.PollUntilContextCancel(restartCtx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
				due, what := restart(proxy)
				when = what
				return due, nil
			})
			if err != nil {
				return
			}
			fmt.Fprintf(os.Stderr, "restarting the Karmada apiserver after %s\n", when)
			if err := cp.RestartKarmadaAPIServer(ctx); err != nil {
				b.Errorf("restart: %v", err)
				return
			}
			restarted = true
		}()
	}

	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}
	root := cmd.NewCmdRebalance(streams)
	root.SetArgs(append([]string{"--kubeconfig", proxy.Kubeconfig, "--cache-dir", b.TempDir()}, args...))
	start := time.Now()
	code := cmd.Execute(root, streams)
	took := time.Since(start)
	stopRestart()
	wg.Wait()
	fmt.Fprintf(os.Stderr, "kubectl rebalance %v: exit %d in %s\n%s", args, code, took.Round(time.Millisecond), tail(errOut.String(), 5))
	return run{code: code, stdout: out.String(), stderr: errOut.String(), took: took, stats: proxy.Stats(), writes: proxy.TriggerWrites(), restarted: restarted}
}

// checkRun checks a run against the bindings as the server holds them, and
// returns how many workloads ended Successful and pending.
func checkRun(b *testing.B, ctx context.Context, c *fixtures.Clients, r run, rb *appsv1alpha1.WorkloadRebalancer) (successful, pending int) {
	b.Helper()
	require.Contains(b, []int{cmd.ExitOK, cmd.ExitPending}, r.code, "stderr:\n%s", r.stderr)
	require.Len(b, rb.Status.ObservedWorkloads, workloads, "every workload has its entry")
	bindings, err := c.Karmada.WorkV1alpha2().ResourceBindings(namespace).List(ctx, metav1.ListOptions{})
	require.NoError(b, err)
	trigger := map[string]*metav1.Time{}
	for i := range bindings.Items {
		trigger[bindings.Items[i].Name] = bindings.Items[i].Spec.RescheduleTriggeredAt
	}
	var at *metav1.Time
	for _, entry := range rb.Status.ObservedWorkloads {
		key := namespace + "/" + entry.Workload.Name + "-deployment"
		switch entry.Result {
		case appsv1alpha1.RebalanceSuccessful:
			successful++
			assert.LessOrEqual(b, r.writes[key], 1, "%s: at most one trigger write", key)
			got := trigger[entry.Workload.Name+"-deployment"]
			if assert.NotNil(b, got, key) {
				if at == nil {
					at = got
				}
				if !r.perWorkloadTime {
					assert.True(b, at.Equal(got), "%s holds trigger %s, another binding %s: one trigger time per run", key, got, at)
				}
			}
		case "":
			pending++
			assert.LessOrEqual(b, r.writes[key], 1, "%s: a pending workload got at most one write (its answer lost)", key)
		default:
			b.Errorf("%s: result %s %s, a binding exists for every workload", key, entry.Result, entry.Reason)
		}
	}
	for key, n := range r.writes {
		assert.Equal(b, 1, n, "%s: exactly one trigger write reached the server", key)
	}
	return successful, pending
}

// logUnanswered logs the bindings whose trigger the scheduler has not
// answered (or that stay suspended), for a run that left one in flight.
func logUnanswered(b *testing.B, ctx context.Context, c *fixtures.Clients) {
	b.Helper()
	list, err := c.Karmada.WorkV1alpha2().ResourceBindings(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Logf("cannot list the bindings: %v", err)
		return
	}
	for _, rb := range list.Items {
		trigger, last := rb.Spec.RescheduleTriggeredAt, rb.Status.LastScheduledTime
		suspended := rb.Spec.Suspension != nil && rb.Spec.Suspension.Scheduling != nil && *rb.Spec.Suspension.Scheduling
		if trigger != nil && last != nil && !last.Before(trigger) && rb.Status.SchedulerObservedGeneration >= rb.Generation && !suspended {
			continue
		}
		b.Logf("unanswered: %s trigger %v last scheduled %v generation %d observed %d suspended %v annotations %v conditions %+v",
			rb.Name, trigger, last, rb.Generation, rb.Status.SchedulerObservedGeneration, suspended, rb.Annotations, rb.Status.Conditions)
	}
}

func decodeRebalancer(b *testing.B, out string) *appsv1alpha1.WorkloadRebalancer {
	b.Helper()
	var rb appsv1alpha1.WorkloadRebalancer
	require.NoError(b, json.Unmarshal([]byte(out), &rb), "stdout:\n%s", out)
	return &rb
}

// setup creates the Deployments and a static-weight policy dividing them over
// the members, and waits until every binding is scheduled.
func setup(b *testing.B, ctx context.Context, c *fixtures.Clients) {
	b.Helper()
	start := time.Now()
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	require.NoError(b, err)
	members := []string{"member1", "member2", "member3"}
	policy := fixtures.DynamicWeightPolicy(namespace, "faults", "apps/v1", "Deployment", nil, members)
	policy.Spec.Placement.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{}
	for _, m := range members {
		policy.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList = append(
			policy.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList,
			policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{m}}, Weight: 1})
	}
	policy.Spec.ResourceSelectors = []policyv1alpha1.ResourceSelector{{
		APIVersion: "apps/v1", Kind: "Deployment",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"faults": "yes"}},
	}}
	_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(namespace).Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(b, err)

	names := make(chan string)
	errs := make(chan error, workloads)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				d := fixtures.Deployment(namespace, name, 1)
				d.Labels["faults"] = "yes"
				_, err := c.Kube.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{})
				errs <- err
			}
		}()
	}
	for i := range workloads {
		names <- "w-" + strconv.Itoa(i)
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		scheduled := 0
		for _, rb := range list.Items {
			if len(rb.Spec.Clusters) > 0 && rb.Status.LastScheduledTime != nil {
				scheduled++
			}
		}
		return scheduled == workloads, nil
	})
	require.NoError(b, err)
	fmt.Fprintf(os.Stderr, "created and scheduled %d Deployments in %s\n", workloads, time.Since(start).Round(time.Second))
}

// waitSettled waits until the scheduler has seen every binding's latest
// spec, then starts in a new second.
func waitSettled(b *testing.B, ctx context.Context, c *fixtures.Clients) {
	b.Helper()
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, rb := range list.Items {
			if rb.Status.SchedulerObservedGeneration != rb.Generation {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(b, err)
	time.Sleep(1100 * time.Millisecond)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func tail(s string, lines int) string {
	parts := bytes.Split([]byte(s), []byte("\n"))
	if len(parts) > lines+1 {
		parts = parts[len(parts)-lines-1:]
	}
	return string(bytes.Join(parts, []byte("\n")))
}
