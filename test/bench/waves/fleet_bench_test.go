// Package wavesbench measures kubectl rebalance on a fleet-sized batch on a
// real Karmada control plane: plan, a plain run and a waved run
// (--max-in-flight 200) over the same workloads, with wall time, API requests
// by verb and the process's peak RSS, next to the bare lists of what they
// read. Run it with
//
//	go test ./test/bench/waves -run '^$' -bench Fleet -benchtime 1x -timeout 120m
//
// REBALANCE_FLEET_WORKLOADS and REBALANCE_FLEET_NAMESPACES choose a smaller
// fleet (default 10,000 over 100); REBALANCE_FLEET_ROUNDS measures the
// scheduler's pace and the runs that many times from one setup,
// REBALANCE_FLEET_RUNS which runs a round holds (window, all, waves,
// qps50), and REBALANCE_FLEET_EVENTS=keep keeps the Events the benchmark
// otherwise deletes before every run.
package wavesbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// Three members with room for every one-replica Deployment's pod.
func TestMain(m *testing.M) {
	os.Exit(harness.RunBenchmarks(m, harness.Options{
		Members:        3,
		NodesPerMember: 2,
		NodePods:       "3000",
	}))
}

var members = []string{"member1", "member2", "member3"}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkFleet rebalances a fleet of one-replica Deployments, spread over
// namespaces: plan (as users run it, and with GOGC=100), the scheduler's own
// pace (bare triggers), every trigger at once (waiting for the scheduler's
// answers), then in waves of 200 with the defaults (readiness, no --timeout,
// default QPS) and with the former default, --kube-api-qps 50.
func BenchmarkFleet(b *testing.B) {
	cp := harness.Require(b)
	ctx := context.Background()
	c, err := fixtures.NewClients(cp.Karmada)
	require.NoError(b, err)
	workloads := envInt("REBALANCE_FLEET_WORKLOADS", 10000)
	namespaces := envInt("REBALANCE_FLEET_NAMESPACES", 100)
	// Each round measures the pace and the three runs again, for more than
	// one sample of each ratio from one setup.
	rounds := envInt("REBALANCE_FLEET_ROUNDS", 1)
	// Built first: the binary measured is the tree's as the run started.
	binary := build(b)
	setup(b, ctx, c, workloads, namespaces)
	defer harness.MeasureLock(b)()

	var report []string
	line := func(name string, took time.Duration, rss int64, counts map[string]int) {
		mem := "      -     "
		if rss > 0 {
			mem = fmt.Sprintf("%6.1f MiB", float64(rss)/1024)
		}
		report = append(report, fmt.Sprintf("%-58s %10s   peak RSS %s   %s", name, took.Round(100*time.Millisecond), mem, harness.FormatCounts(counts)))
	}
	// speeds holds how fast the machine ran during each run and pace, by
	// its report line's name (speed_test.go).
	speeds := map[string]speedReading{}
	probed := func(name string, timed func()) {
		probe := startSpeedProbe()
		timed()
		speeds[name] = probe.Stop()
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, speeds[name])
	}
	run := func(name string, env []string, args ...string) time.Duration {
		waitSettled(b, ctx, c)
		var (
			took   time.Duration
			counts map[string]int
			rss    int64
			stderr string
		)
		probed(name, func() { took, counts, rss, stderr = runBinary(b, cp, env, binary, args...) })
		line(name, took, rss, counts)
		// Each run's figures as it ends, for a benchmark cut short.
		fmt.Fprintf(os.Stderr, "%s\n", report[len(report)-1])
		// The first line is the command's announcement (what it is about to
		// do and, for a run all at once, how long the scheduler will take).
		fmt.Fprintf(os.Stderr, "%s: %s\n%s: %s\n", name, firstLine(stderr), name, lastLine(stderr))
		return took
	}
	// What a round measures after its pace, and in this order.
	subjects := []struct {
		key, name string
		args      []string
		target    bool
	}{
		{"all", "all at once (--timeout 60m)", []string{"--timeout", "60m"}, false},
		{"waves", "waves of 200 (--max-in-flight 200, defaults)", []string{"--max-in-flight", "200", "--quiet"}, true},
		// The former default rate, for the lever's effect in the same run.
		{"qps50", "the same with --kube-api-qps 50 (the default before a005e5b)", []string{"--max-in-flight", "200", "--quiet", "--kube-api-qps", "50"}, false},
	}
	wanted, err := fleetRuns(os.Getenv("REBALANCE_FLEET_RUNS"))
	require.NoError(b, err)
	var ratios []string
	for range b.N {
		bareTook, bareCounts := bareLists(b, ctx, cp)
		line("bare: LIST deployments + bindings + clusters (pages of 500)", bareTook, 0, bareCounts)
		planTook := run("plan deployments -A -l (-o report-json)", nil, "plan", "deployments", "-A", "-l", "bench=fleet", "-o", "report-json")
		// GOGC set turns off the soft memory limit the plugin sets itself
		// (pkg/memlimit): the collector as it was without it.
		planGOGC := run("the same with GOGC=100 (no soft memory limit)", []string{"GOGC=100"}, "plan", "deployments", "-A", "-l", "bench=fleet", "-o", "report-json")
		name := func(s string, round int) string {
			if rounds == 1 {
				return s
			}
			return fmt.Sprintf("%s, round %d", s, round)
		}
		// paces[r-1] is the pace measured at the start of round r; the
		// last one, after the last round. A run is set against the pace
		// before it (the ratio) and against the mean of that and
		// the next one: one pace can cost the control plane a fifth more
		// than the next for the same work (docs/performance.md, "The pace
		// on both sides of the runs"), so one reading alone can favour
		// either side.
		// bare measures a reference, not the subject: a failure to take
		// it is reported and the runs go on.
		bare := func(label string, measure func() (time.Duration, map[string]int, error)) time.Duration {
			before := readCPU()
			var (
				took   time.Duration
				counts map[string]int
				err    error
			)
			probed(label, func() { took, counts, err = measure() })
			fmt.Fprintf(os.Stderr, "%s: CPU seconds by process: %s\n", label, readCPU().spentSince(before))
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: not measured: %v\n", label, err)
				took = time.Duration(math.MaxInt64)
			}
			line(label, took, 0, counts)
			fmt.Fprintf(os.Stderr, "%s\n", report[len(report)-1])
			return took
		}
		var paces []time.Duration
		var paceNames []string
		pace := func(label string) {
			waitSettled(b, ctx, c)
			fmt.Fprintf(os.Stderr, "%s: control plane: %s; resident: %s\n", label, eventCount(ctx, c), residentByCommand())
			paces = append(paces, bare(label, func() (time.Duration, map[string]int, error) { return schedulerPace(ctx, cp, c) }))
			paceNames = append(paceNames, label)
		}
		type sample struct {
			name   string
			round  int
			took   time.Duration
			target bool
		}
		var samples []sample
		// windows[r-1] is the scheduler's pace in waves of 200 of round r:
		// the waved run's bare limit in its own shape (window_test.go).
		windows := make([]time.Duration, rounds)
		windowNames := make([]string, rounds)
		windowed := func(round int) {
			label := name("bare: scheduler's pace in waves of 200 (PATCH, at most 200 unanswered)", round)
			waitSettled(b, ctx, c)
			windows[round-1] = bare(label, func() (time.Duration, map[string]int, error) { return schedulerPaceInWaves(ctx, cp, c, 200) })
			windowNames[round-1] = label
		}
		for round := 1; round <= rounds; round++ {
			pace(name("bare: scheduler's pace (PATCH every trigger, until answered)", round))
			// The bare waves go first in odd rounds and last in even ones,
			// so that a control plane that grows slower over the rounds
			// favours neither side of the pair.
			if wanted["window"] && round%2 == 1 {
				windowed(round)
			}
			for _, s := range subjects {
				if !wanted[s.key] {
					continue
				}
				args := append([]string{"deployments", "-A", "-l", "bench=fleet", "-o", "name"}, s.args...)
				samples = append(samples, sample{s.name, round, run(name(s.name, round), nil, args...), s.target})
			}
			if wanted["window"] && round%2 == 0 {
				windowed(round)
			}
		}
		pace("bare: scheduler's pace after the last round")
		for r, p := range paces[:rounds] {
			ratios = append(ratios, fmt.Sprintf("%s: %.1f bindings/s, after the round %.1f", name("scheduler's pace", r+1), float64(workloads)/p.Seconds(), float64(workloads)/paces[r+1].Seconds()))
		}
		for _, s := range samples {
			before, after := paces[s.round-1], paces[s.round]
			target := ""
			if s.target {
				target = " (target <= 1.10)"
			}
			ratio := fmt.Sprintf("%s: %.2fx the pace before it%s, %.2fx the pace after the round, %.2fx their mean",
				name(s.name, s.round), s.took.Seconds()/before.Seconds(), target, s.took.Seconds()/after.Seconds(), 2*s.took.Seconds()/(before+after).Seconds())
			if w := windows[s.round-1]; w > 0 {
				ratio += fmt.Sprintf("; %.2fx the scheduler's pace in waves of 200 of its round", s.took.Seconds()/w.Seconds())
			}
			ratios = append(ratios, ratio)
			// The same ratios with each run's time divided by how slow the
			// machine ran during it.
			own := speeds[name(s.name, s.round)]
			ratio = fmt.Sprintf("%s, at the machine's speed: %s the pace before it, %s the pace after the round",
				name(s.name, s.round), speedRatio(s.took, own, before, speeds[paceNames[s.round-1]]), speedRatio(s.took, own, after, speeds[paceNames[s.round]]))
			if w := windows[s.round-1]; w > 0 {
				ratio += fmt.Sprintf(", %s the scheduler's pace in waves of 200 of its round", speedRatio(s.took, own, w, speeds[windowNames[s.round-1]]))
			}
			ratios = append(ratios, ratio)
		}
		ratios = append(ratios, fmt.Sprintf("plan / bare lists: %.2fx (with GOGC=100: %.2fx)", planTook.Seconds()/bareTook.Seconds(), planGOGC.Seconds()/bareTook.Seconds()))
	}
	fmt.Fprintf(os.Stdout, "\n%d one-replica Deployments over %d namespaces, 3 members:\n", workloads, namespaces)
	for _, l := range append(report, ratios...) {
		fmt.Fprintln(os.Stdout, l)
	}
}

// bareLists is the floor of what plan and the waved run read: the
// Deployments, the bindings and the clusters, in pages of 500, in process,
// nothing kept.
func bareLists(b *testing.B, ctx context.Context, cp *harness.ControlPlane) (time.Duration, map[string]int) {
	b.Helper()
	counter := harness.NewRequestCounter()
	cfg := counter.Wrap(cp.Karmada)
	cfg.QPS, cfg.Burst = 50, 100
	c, err := fixtures.NewClients(cfg)
	require.NoError(b, err)
	start := time.Now()
	opts := metav1.ListOptions{Limit: 500, LabelSelector: "bench=fleet"}
	for {
		list, err := c.Kube.AppsV1().Deployments("").List(ctx, opts)
		require.NoError(b, err)
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	opts = metav1.ListOptions{Limit: 500}
	for {
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings("").List(ctx, opts)
		require.NoError(b, err)
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	_, err = c.Karmada.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{Limit: 500})
	require.NoError(b, err)
	return time.Since(start), counter.Counts()
}

// schedulerPace is the bare limit of a waved run: how long karmada-scheduler
// takes to answer a trigger on every binding when nothing else stands in
// the way. A watch over all namespaces starts before the writes; the
// triggers go out from 16 goroutines at QPS 200 (names known, one server
// second for all, nothing read or checked); the time runs from the first
// write until the watch has shown every binding rescheduled after its
// trigger. Should the watch end first, the bindings are listed until the
// rest are answered.
func schedulerPace(ctx context.Context, cp *harness.ControlPlane, c *fixtures.Clients) (time.Duration, map[string]int, error) {
	keys, err := bindingKeys(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	head, err := c.Karmada.WorkV1alpha2().ResourceBindings("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, nil, err
	}
	w, err := c.Karmada.WorkV1alpha2().ResourceBindings("").Watch(ctx, metav1.ListOptions{ResourceVersion: head.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		return 0, nil, err
	}
	defer w.Stop()

	counter, writer, err := paceWriter(cp)
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	at := metav1.NewTime(start.Truncate(time.Second))
	answeredAfter := func(rb *workv1alpha2.ResourceBinding) bool {
		s := rb.Status
		return s.LastScheduledTime != nil && !s.LastScheduledTime.Before(&at) && s.SchedulerObservedGeneration >= rb.Generation
	}
	var (
		mu       sync.Mutex
		answered = map[string]bool{}
		last     time.Time
	)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			rb, ok := ev.Object.(*workv1alpha2.ResourceBinding)
			if !ok || !answeredAfter(rb) {
				continue
			}
			key := rb.Namespace + "/" + rb.Name
			mu.Lock()
			if keys[key] && !answered[key] {
				answered[key], last = true, time.Now()
				if n := len(answered); n%1000 == 0 || n == len(keys) {
					fmt.Fprintf(os.Stderr, "scheduler's pace: %d of %d triggers answered (%s)\n", n, len(keys), time.Since(start).Round(time.Second))
				}
			}
			done := len(answered) == len(keys)
			mu.Unlock()
			if done {
				return
			}
		}
	}()
	items := make([]string, 0, len(keys))
	for k := range keys {
		items = append(items, k)
	}
	patch := []byte(fmt.Sprintf(`{"spec":{"rescheduleTriggeredAt":%q}}`, at.UTC().Format(time.RFC3339)))
	err = parallel(items, 16, func(key string) error {
		ns, name := filepath.Split(key)
		_, err := writer.Karmada.WorkV1alpha2().ResourceBindings(ns[:len(ns)-1]).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	counts := counter.Counts()
	if err != nil {
		return 0, counts, err
	}
	select {
	case <-watched:
	case <-time.After(60 * time.Minute):
		return 0, counts, errors.New("the scheduler did not answer every trigger within an hour")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answered) == len(keys) {
		fmt.Fprintf(os.Stderr, "scheduler's pace: %s\n", timeline(ctx, c, counter, start, last))
		return last.Sub(start), counts, nil
	}
	// The watch ended early: list until the rest are answered, and take
	// the latest lastScheduledTime (second precision, the last second whole).
	fmt.Fprintf(os.Stderr, "scheduler's pace: the watch ended after %d answers; listing\n", len(answered))
	err = wait.PollUntilContextTimeout(ctx, 5*time.Second, 60*time.Minute, true, func(ctx context.Context) (bool, error) {
		opts := metav1.ListOptions{Limit: 1000}
		for {
			list, err := c.Karmada.WorkV1alpha2().ResourceBindings("").List(ctx, opts)
			if err != nil {
				return false, err
			}
			for i := range list.Items {
				rb := &list.Items[i]
				if key := rb.Namespace + "/" + rb.Name; keys[key] && !answered[key] && answeredAfter(rb) {
					answered[key] = true
					if t := rb.Status.LastScheduledTime.Add(time.Second); t.After(last) {
						last = t
					}
				}
			}
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
		return len(answered) == len(keys), nil
	})
	return last.Sub(start), counts, err
}

// setup creates the namespaces, one PropagationPolicy each (static weights
// 1:1:1 over three members: a fresh reschedule lands where the last one
// did, so no pod moves and the runs measure the rebalance), the
// Deployments, and waits until every binding is scheduled and its replica
// ready.
func setup(b testing.TB, ctx context.Context, c *fixtures.Clients, workloads, namespaces int) {
	b.Helper()
	start := time.Now()
	per := workloads / namespaces
	var items []string
	for n := range namespaces {
		ns := fmt.Sprintf("fleet-%03d", n)
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(b, err)
		policy := fixtures.DynamicWeightPolicy(ns, "fleet", "apps/v1", "Deployment", nil, members)
		policy.Spec.Placement.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{}
		for _, m := range members {
			policy.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList = append(
				policy.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList,
				policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{m}}, Weight: 1})
		}
		policy.Spec.ResourceSelectors = []policyv1alpha1.ResourceSelector{{
			APIVersion: "apps/v1", Kind: "Deployment",
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "fleet"}},
		}}
		_, err = c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
		require.NoError(b, err)
		for i := range per {
			items = append(items, ns+"/app-"+strconv.Itoa(i))
		}
	}
	err := parallel(items, 16, func(item string) error {
		ns, name := filepath.Split(item)
		d := fixtures.Deployment(ns[:len(ns)-1], name, 1)
		d.Labels["bench"] = "fleet"
		_, err := c.Kube.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
		return err
	})
	require.NoError(b, err)
	// Every count lists all the bindings, seconds of the API server's CPU at
	// 10,000: counted more often, the count itself slowed the setup it waited
	// for (about 80 bindings ready a minute when counted every 5 s).
	err = wait.PollUntilContextTimeout(ctx, 30*time.Second, 90*time.Minute, true, func(ctx context.Context) (bool, error) {
		ready, total, err := countReady(ctx, c)
		if err != nil {
			return false, err
		}
		fmt.Fprintf(os.Stderr, "setup: %d of %d bindings scheduled with their replica ready (%s)\n", ready, len(items), time.Since(start).Round(time.Second))
		return total == len(items) && ready == total, nil
	})
	require.NoError(b, err)
	fmt.Fprintf(os.Stderr, "created, scheduled and started %d Deployments in %d namespaces in %s\n", len(items), namespaces, time.Since(start).Round(time.Second))
}

// countReady counts the bindings scheduled and ready, page by page.
func countReady(ctx context.Context, c *fixtures.Clients) (ready, total int, err error) {
	opts := metav1.ListOptions{Limit: 1000}
	for {
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings("").List(ctx, opts)
		if err != nil {
			return 0, 0, err
		}
		for _, rb := range list.Items {
			total++
			if scheduledAndReady(&rb) {
				ready++
			}
		}
		if list.Continue == "" {
			return ready, total, nil
		}
		opts.Continue = list.Continue
	}
}

func scheduledAndReady(rb *workv1alpha2.ResourceBinding) bool {
	return rb.Status.SchedulerObservedGeneration == rb.Generation && rb.Status.LastScheduledTime != nil &&
		rebalance.CheckReady(rb.Spec, rb.Status).Ready
}

// fleetRuns reads REBALANCE_FLEET_RUNS, the runs a round measures after its
// pace (window: the scheduler's pace in waves of 200; all, waves, qps50:
// the plugin's runs; comma-separated): all four when empty. Fewer
// runs a round give more rounds, and so more samples of one ratio, in the
// same time.
func fleetRuns(v string) (map[string]bool, error) {
	if v == "" {
		v = "window,all,waves,qps50"
	}
	out := map[string]bool{}
	for _, k := range strings.Split(v, ",") {
		switch k = strings.TrimSpace(k); k {
		case "window", "all", "waves", "qps50":
			out[k] = true
		default:
			return nil, fmt.Errorf("REBALANCE_FLEET_RUNS: unknown run %q (window, all, waves, qps50)", k)
		}
	}
	return out, nil
}

// eventCount says how many Events the Karmada API server holds (every
// scheduling and sync writes some; they live an hour).
func eventCount(ctx context.Context, c *fixtures.Clients) string {
	list, err := c.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return "events: " + err.Error()
	}
	n := int64(len(list.Items))
	if list.RemainingItemCount != nil {
		n += *list.RemainingItemCount
	}
	return fmt.Sprintf("%d events", n)
}

// clearEvents deletes the Events the Karmada API server holds, namespace by
// namespace. Karmada's components record through client-go's correlator,
// which counts repeats of an event in place only while it remembers the
// event (4,096 of them): at 2,000 workloads the store stops growing after
// the first round, at 10,000 it grew by about 58,000 a round (session 41's
// log). Events live an hour: kept, they grow the API server's store round
// by round, and those written an hour back expire in the middle of a later
// run. Deleted before every run, each run starts from the same store and
// pays only for its own.
func clearEvents(ctx context.Context, c *fixtures.Clients) string {
	start := time.Now()
	before := eventCount(ctx, c)
	list, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "events not deleted: " + err.Error()
	}
	names := make([]string, 0, len(list.Items))
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	err = parallel(names, 4, func(ns string) error {
		return c.Kube.CoreV1().Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	if err != nil {
		return fmt.Sprintf("events not all deleted (%s before): %v", before, err)
	}
	return fmt.Sprintf("deleted %s in %s (REBALANCE_FLEET_EVENTS=keep keeps them)", before, time.Since(start).Round(100*time.Millisecond))
}

// waitSettled waits until every binding is scheduled at its latest spec and
// ready, deletes the Events (clearEvents), waits until the machine has gone
// quiet (waitQuiet: less than one CPU of two busy, at most 5 minutes), then
// starts a new second (triggers compare at one-second precision).
func waitSettled(b testing.TB, ctx context.Context, c *fixtures.Clients) {
	b.Helper()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		ready, total, err := countReady(ctx, c)
		return err == nil && ready == total, err
	})
	require.NoError(b, err)
	if os.Getenv("REBALANCE_FLEET_EVENTS") != "keep" {
		fmt.Fprintf(os.Stderr, "before the next run: %s\n", clearEvents(ctx, c))
	}
	fmt.Fprintf(os.Stderr, "before the next run: %s\n", waitQuiet(float64(runtime.NumCPU())/2, 5*time.Minute))
	time.Sleep(1100 * time.Millisecond)
}

// build compiles the plugin so that it runs as its own process, with its
// own peak RSS.
func build(b *testing.B) string {
	b.Helper()
	binary, err := harness.BuildPlugin(b.TempDir())
	require.NoError(b, err)
	return binary
}

// runBinary runs `kubectl rebalance ARGS` through a counting proxy, with env
// added to its environment, and returns its wall time, requests, peak RSS in KiB and stderr.
func runBinary(b *testing.B, cp *harness.ControlPlane, env []string, binary string, args ...string) (time.Duration, map[string]int, int64, string) {
	b.Helper()
	proxy, err := cp.StartCountingProxy()
	require.NoError(b, err)
	defer proxy.Close()
	var stdout, stderr bytes.Buffer
	// The plugin runs under /usr/bin/time, which reports its peak RSS: Go
	// starts a child with CLONE_VM|CLONE_VFORK, so the child runs in this
	// process's address space until it execs, and Linux carries that
	// address space's high-water mark into the child's ru_maxrss. Started
	// directly from this benchmark (which has listed the fleet in process),
	// the plugin would report the benchmark's peak whenever that is higher.
	// /usr/bin/time forks its child from its own small address space.
	rssFile := filepath.Join(b.TempDir(), "rss")
	plugin := append([]string{binary, "--kubeconfig", proxy.Kubeconfig, "--cache-dir", b.TempDir()}, args...)
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M %U %S", "-o", rssFile}, plugin...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	before := readCPU()
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	fmt.Fprintf(os.Stderr, "%s: CPU seconds by process: %s\n", strings.Join(args, " "), readCPU().spentSince(before))
	if c, cerr := fixtures.NewClients(cp.Karmada); cerr == nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", strings.Join(args, " "), timeline(context.Background(), c, proxy.Counter, start, start.Add(took)))
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		require.Failf(b, "kubectl rebalance failed", "exit %d: %s", exit.ExitCode(), tail(stderr.String()))
	}
	require.NoError(b, err)
	text, err := os.ReadFile(rssFile)
	require.NoError(b, err)
	fields := strings.Fields(string(text))
	require.NotEmpty(b, fields, "/usr/bin/time wrote %q", text)
	if len(fields) == 3 {
		fmt.Fprintf(os.Stderr, "%s: the plugin's CPU: user %s s, system %s s\n", strings.Join(args, " "), fields[1], fields[2])
	}
	rss, err := strconv.ParseInt(fields[0], 10, 64)
	require.NoError(b, err, "/usr/bin/time wrote %q", text)
	return took, proxy.Counter.Counts(), rss, stderr.String()
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

func firstLine(s string) string {
	first, _, _ := bytes.Cut(bytes.TrimSpace([]byte(s)), []byte("\n"))
	return string(first)
}

func lastLine(s string) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	return string(lines[len(lines)-1])
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

// timeline breaks a run's wall time down, in seconds from its start: when
// its first and last trigger (PATCH) went out, when the scheduler answered
// the last binding (lastScheduledTime, one-second precision), and when the
// run ended; then how many bindings the scheduler answered in each 20 s of
// the run. It says where a run loses time against the scheduler's pace:
// before its first write, between its writes, or after the last answer.
func timeline(ctx context.Context, c *fixtures.Clients, counter *harness.RequestCounter, start, end time.Time) string {
	first, last, ok := counter.Span("PATCH")
	if !ok {
		return "timeline: no PATCH"
	}
	from := metav1.NewTime(start.Truncate(time.Second))
	var buckets []int
	var lastAnswer time.Time
	opts := metav1.ListOptions{Limit: 1000}
	for {
		list, err := c.Karmada.WorkV1alpha2().ResourceBindings("").List(ctx, opts)
		if err != nil {
			return "timeline: " + err.Error()
		}
		for _, rb := range list.Items {
			at := rb.Status.LastScheduledTime
			if at == nil || at.Before(&from) {
				continue
			}
			if at.After(lastAnswer) {
				lastAnswer = at.Time
			}
			i := int(at.Sub(from.Time) / (20 * time.Second))
			for len(buckets) <= i {
				buckets = append(buckets, 0)
			}
			buckets[i]++
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	secs := func(t time.Time) string { return fmt.Sprintf("%.1f", t.Sub(start).Seconds()) }
	return fmt.Sprintf("timeline (s from start): first PATCH %s, last PATCH %s, last answer %s (+1 s precision), end %s; answers per 20 s: %v",
		secs(first), secs(last), secs(lastAnswer), secs(end), buckets)
}
