package deschedulebench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"slices"
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
	pkgruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

const (
	benchNamespace = "bench"
	// candidates is the number of ResourceBindings, all of them candidates.
	candidates = 5000
	// Every member runs the same Deployments: stuckPerMember whose pod
	// stays Unschedulable and runningPerMember whose pod runs.
	stuckPerMember   = 100
	runningPerMember = 400
	// Every tenth binding points at a stuck Deployment in its short cluster
	// and is descheduled; the others point at running ones.
	descheduledEvery = 10
	// The rate limit of the measured clients: the one the harness gives
	// Karmada's own components. "pass at the default qps" uses the
	// command's defaults (karmada-descheduler's 40/60) instead.
	benchQPS   = 200
	benchBurst = 400
)

var members = []string{"member1", "member2", "member3"}

// measurement is one measured operation.
type measurement struct {
	name     string
	took     time.Duration
	requests map[string]int
	peakHeap uint64
	alloc    uint64
}

// BenchmarkDeschedulePass5000 measures one pass over 5,000 candidate
// bindings (500 of which are descheduled) against the bare cost of listing
// what a pass lists.
func BenchmarkDeschedulePass5000(b *testing.B) {
	cp := harness.Require(b)
	ctx := context.Background()
	setup(b, ctx, cp)

	var report []measurement
	run := func(name string, restore bool, op func(b *testing.B, counter *requestCounter)) {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				counter := newRequestCounter()
				m := measure(name, counter, func() { op(b, counter) })
				report = append(report, m)
				b.ReportMetric(float64(m.total()), "requests/op")
				b.ReportMetric(float64(m.peakHeap)/(1<<20), "peak-heap-MiB")
				if restore {
					b.StopTimer()
					restoreBindings(b, ctx, cp)
					b.StartTimer()
				}
			}
		})
	}

	run("bare-list-bindings", false, func(b *testing.B, counter *requestCounter) {
		client, err := karmadaclient.NewForConfig(counter.wrap(benchConfig(cp.Karmada)))
		require.NoError(b, err)
		n := listEach(b, ctx, func(ctx context.Context, o metav1.ListOptions) (pkgruntime.Object, error) {
			return client.WorkV1alpha2().ResourceBindings(metav1.NamespaceAll).List(ctx, o)
		}, metav1.ListOptions{})
		require.Equal(b, candidates, n)
	})
	run("bare-list-members", false, func(b *testing.B, counter *requestCounter) {
		listMembers(b, ctx, benchConfig(counter.wrap(cp.Karmada)))
	})
	run("pass-dry-run-client", false, func(b *testing.B, counter *requestCounter) {
		result := pass(b, ctx, counter.wrap(benchConfig(cp.Karmada)), deschedule.DryRunClient)
		require.Equal(b, candidates/descheduledEvery, result.Descheduled)
	})
	run("pass", true, func(b *testing.B, counter *requestCounter) {
		result := pass(b, ctx, counter.wrap(benchConfig(cp.Karmada)), deschedule.DryRunNone)
		require.Equal(b, candidates/descheduledEvery, result.Descheduled)
		require.NoError(b, result.Err())
	})
	run("pass-default-qps", true, func(b *testing.B, counter *requestCounter) {
		config := rest.CopyConfig(cp.Karmada)
		config.QPS, config.Burst = 40, 60
		result := pass(b, ctx, counter.wrap(config), deschedule.DryRunNone)
		require.Equal(b, candidates/descheduledEvery, result.Descheduled)
	})
	run("command-dry-run-client", false, func(b *testing.B, counter *requestCounter) {
		runCommand(b, cp, counter)
	})

	fmt.Fprintf(os.Stdout, "\ndeschedule pass over %d candidate bindings, %d members with %d Deployments and %d pods each, %d bindings descheduled:\n",
		candidates, len(members), stuckPerMember+runningPerMember, stuckPerMember+runningPerMember, candidates/descheduledEvery)
	fmt.Fprintf(os.Stdout, "%-26s %9s %10s %11s   %s\n", "operation", "wall", "peak heap", "allocated", "API requests")
	for _, m := range report {
		fmt.Fprintf(os.Stdout, "%-26s %9s %7.1f MiB %7.1f MiB   %s\n", m.name, m.took.Round(time.Millisecond),
			float64(m.peakHeap)/(1<<20), float64(m.alloc)/(1<<20), formatCounts(m.requests))
	}
}

func (m measurement) total() int {
	n := 0
	for _, v := range m.requests {
		n += v
	}
	return n
}

// benchConfig is config with the benchmark's rate limit.
func benchConfig(config *rest.Config) *rest.Config {
	c := rest.CopyConfig(config)
	c.QPS, c.Burst = benchQPS, benchBurst
	return c
}

// pass runs one engine pass over every namespace, as the daemon with -A.
func pass(b *testing.B, ctx context.Context, config *rest.Config, dryRun deschedule.DryRun) *deschedule.PassResult {
	b.Helper()
	karmada, err := karmadaclient.NewForConfig(config)
	require.NoError(b, err)
	kube, err := kubernetes.NewForConfig(config)
	require.NoError(b, err)
	meta, err := metadata.NewForConfig(config)
	require.NoError(b, err)
	d, err := deschedule.New(karmada, deschedule.NewProxyPodSource(config), deschedule.NewEventClient(kube, deschedule.EventComponent),
		deschedule.Options{DryRun: dryRun, Templates: deschedule.NewMetadataTemplateLister(meta, nil)})
	require.NoError(b, err)
	result, err := d.Pass(ctx)
	require.NoError(b, err)
	require.Len(b, result.Bindings, candidates)
	require.Empty(b, result.ClusterErrors)
	return result
}

// runCommand runs `kubectl rebalance deschedule -A --dry-run=client` in
// process, its table going nowhere, through a counting HTTP proxy.
func runCommand(b *testing.B, cp *harness.ControlPlane, counter *requestCounter) {
	b.Helper()
	proxy := counter.serve(b, cp.Karmada)
	var errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: io.Discard, ErrOut: &errOut}
	root := cmd.NewCmdRebalance(streams)
	root.SetArgs([]string{"deschedule", "--kubeconfig", proxy, "-A", "--dry-run=client", "--unschedulable-threshold=0s",
		"--kube-api-qps", strconv.Itoa(benchQPS), "--kube-api-burst", strconv.Itoa(benchBurst)})
	code := cmd.Execute(root, streams)
	require.Equal(b, cmd.ExitOK, code, errOut.String())
	require.Contains(b, errOut.String(), fmt.Sprintf("would deschedule %d binding(s)", candidates/descheduledEvery))
}

// listMembers lists what a pass lists in each member, concurrently: the
// Deployments, ReplicaSets and active Pods of the namespace, in pages.
func listMembers(b *testing.B, ctx context.Context, karmada *rest.Config) {
	b.Helper()
	var wg sync.WaitGroup
	counts := make([]int, len(members))
	for i, m := range members {
		client, err := kubernetes.NewForConfig(deschedule.ClusterProxyConfig(karmada, m))
		require.NoError(b, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts[i] += listEach(b, ctx, func(ctx context.Context, o metav1.ListOptions) (pkgruntime.Object, error) {
				return client.AppsV1().Deployments(benchNamespace).List(ctx, o)
			}, metav1.ListOptions{})
			counts[i] += listEach(b, ctx, func(ctx context.Context, o metav1.ListOptions) (pkgruntime.Object, error) {
				return client.AppsV1().ReplicaSets(benchNamespace).List(ctx, o)
			}, metav1.ListOptions{})
			counts[i] += listEach(b, ctx, func(ctx context.Context, o metav1.ListOptions) (pkgruntime.Object, error) {
				return client.CoreV1().Pods(benchNamespace).List(ctx, o)
			}, metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
		}()
	}
	wg.Wait()
	for i := range members {
		require.Equal(b, 3*(stuckPerMember+runningPerMember), counts[i])
	}
}

// listEach pages through a LIST as the engine does and counts the items.
func listEach(b *testing.B, ctx context.Context, list pager.ListPageFunc, opts metav1.ListOptions) int {
	p := pager.New(list)
	p.PageSize = 500
	n := 0
	err := p.EachListItem(ctx, opts, func(pkgruntime.Object) error { n++; return nil })
	require.NoError(b, err)
	return n
}

// measure runs op once, after a GC, sampling the heap for its peak.
func measure(name string, counter *requestCounter, op func()) measurement {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := before.HeapInuse
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(5 * time.Millisecond)
		defer ticker.Stop()
		var s runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-ticker.C:
				runtime.ReadMemStats(&s)
				peak = max(peak, s.HeapInuse)
			}
		}
	}()
	start := time.Now()
	op()
	took := time.Since(start)
	close(stop)
	<-done
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	peak = max(peak, after.HeapInuse)
	return measurement{name: name, took: took, requests: counter.counts(), peakHeap: peak, alloc: after.TotalAlloc - before.TotalAlloc}
}

// requestCounter counts requests by target (the Karmada apiserver, or a
// member through the cluster proxy) and verb, LIST being a GET of a
// collection.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func newRequestCounter() *requestCounter { return &requestCounter{n: map[string]int{}} }

func (c *requestCounter) wrap(config *rest.Config) *rest.Config {
	out := rest.CopyConfig(config)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{c, rt} })
	return out
}

// serve starts an HTTP proxy to the Karmada apiserver that counts, and
// returns a kubeconfig file pointing at it.
func (c *requestCounter) serve(b *testing.B, karmada *rest.Config) string {
	b.Helper()
	transport, err := rest.TransportFor(karmada)
	require.NoError(b, err)
	target, err := url.Parse(karmada.Host)
	require.NoError(b, err)
	forward := httputil.NewSingleHostReverseProxy(target)
	forward.Transport = transport
	server := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.add(r)
		forward.ServeHTTP(w, r)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	go func() { _ = server.Serve(l) }()
	b.Cleanup(func() { _ = server.Close() })
	path := b.TempDir() + "/kubeconfig"
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: karmada, cluster: {server: "http://%s"}}]
users: [{name: admin, user: {}}]
contexts: [{name: karmada-apiserver, context: {cluster: karmada, user: admin}}]
current-context: karmada-apiserver
`, l.Addr().String())
	require.NoError(b, os.WriteFile(path, []byte(kubeconfig), 0o600))
	return path
}

func (c *requestCounter) add(r *http.Request) {
	target, path := "karmada", r.URL.Path
	if strings.HasPrefix(path, "/apis/cluster.karmada.io/") {
		if i := strings.Index(path, "/proxy/"); i >= 0 {
			target, path = "member", path[i+len("/proxy"):]
		}
	}
	verb := r.Method
	if verb == http.MethodGet && isCollection(path) {
		verb = "LIST"
	}
	c.mu.Lock()
	c.n[target+" "+verb]++
	c.mu.Unlock()
}

func (c *requestCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

type countingTransport struct {
	c  *requestCounter
	rt http.RoundTripper
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.c.add(r)
	return t.rt.RoundTrip(r)
}

// isCollection reports whether an API path names a collection.
func isCollection(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	return len(parts) == 1
}

func formatCounts(counts map[string]int) string {
	var parts []string
	total := 0
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
		total += counts[k]
	}
	return fmt.Sprintf("%s (total %d)", strings.Join(parts, " "), total)
}

var setupOnce sync.Once

// setup creates the member Deployments and the 5,000 bindings once.
func setup(b *testing.B, ctx context.Context, cp *harness.ControlPlane) {
	b.Helper()
	setupOnce.Do(func() {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(members)+1)
		for i, m := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = setupMember(ctx, cp.Member(m).Config)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[len(members)] = setupBindings(ctx, cp.Karmada)
		}()
		wg.Wait()
		for _, err := range errs {
			require.NoError(b, err)
		}
		fmt.Fprintf(os.Stderr, "set up %d bindings and %d member Deployments in %s\n",
			candidates, len(members)*(stuckPerMember+runningPerMember), time.Since(start).Round(time.Second))
	})
}

// setupMember creates the member's Deployments directly and waits until
// every pod runs or is reported Unschedulable by the member's scheduler.
func setupMember(ctx context.Context, config *rest.Config) error {
	client, err := kubernetes.NewForConfig(benchConfig(config))
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	var deployments []*appsv1.Deployment
	for i := range stuckPerMember {
		d := fixtures.Deployment(benchNamespace, "stuck-"+strconv.Itoa(i), 1)
		d.Spec.Template.Spec.NodeSelector = map[string]string{"bench/nowhere": "true"}
		deployments = append(deployments, d)
	}
	for i := range runningPerMember {
		deployments = append(deployments, fixtures.Deployment(benchNamespace, "running-"+strconv.Itoa(i), 1))
	}
	if err := parallel(len(deployments), 16, func(i int) error {
		_, err := client.AppsV1().Deployments(benchNamespace).Create(ctx, deployments[i], metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 3*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{})
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
		return running == runningPerMember && unschedulable == stuckPerMember, nil
	})
}

// bindingSpec is the scheduling result every binding starts from.
var bindingClusters = []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 2}, {Name: "member3", Replicas: 2}}

// setupBindings creates the bindings as Karmada's scheduler would leave
// them: the applied-placement annotation of a dynamic-weight policy, a
// scheduling result over the three members and an aggregated status in which
// one cluster (by turns) misses one ready replica. A scheduler name nobody
// answers to keeps the karmada-scheduler away from them.
func setupBindings(ctx context.Context, config *rest.Config) error {
	client, err := karmadaclient.NewForConfig(benchConfig(config))
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The templates the bindings point at: a pass reads their opt-out
	// annotation. No policy selects them, so Karmada leaves them alone.
	if err := parallel(stuckPerMember+runningPerMember, 16, func(i int) error {
		name := "running-" + strconv.Itoa(i)
		if i >= runningPerMember {
			name = "stuck-" + strconv.Itoa(i-runningPerMember)
		}
		_, err := kube.AppsV1().Deployments(benchNamespace).Create(ctx, fixtures.Deployment(benchNamespace, name, 1), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	placement := fixtures.DynamicWeightPolicy(benchNamespace, "bench", "apps/v1", "Deployment", nil, members).Spec.Placement
	placement.ClusterTolerations = nil
	applied, err := json.Marshal(placement)
	if err != nil {
		return err
	}
	return parallel(candidates, 32, func(i int) error {
		short := members[i%len(members)]
		target := "running-" + strconv.Itoa(i%runningPerMember)
		if i%descheduledEvery == 0 {
			target = "stuck-" + strconv.Itoa((i/descheduledEvery)%stuckPerMember)
		}
		rb := &workv1alpha2.ResourceBinding{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   benchNamespace,
				Name:        fmt.Sprintf("b-%05d", i),
				Annotations: map[string]string{deschedule.AppliedPlacementAnnotation: string(applied)},
			},
			Spec: workv1alpha2.ResourceBindingSpec{
				Resource: workv1alpha2.ObjectReference{
					APIVersion: "apps/v1", Kind: "Deployment", Namespace: benchNamespace, Name: target, UID: types.UID("bench-" + strconv.Itoa(i)),
				},
				Replicas:      6,
				Placement:     &placement,
				SchedulerName: "bench-nobody",
				Clusters:      slices.Clone(bindingClusters),
			},
		}
		created, err := client.WorkV1alpha2().ResourceBindings(benchNamespace).Create(ctx, rb, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create binding %s: %w", rb.Name, err)
		}
		for _, m := range members {
			ready := 2
			if m == short {
				ready = 1
			}
			created.Status.AggregatedStatus = append(created.Status.AggregatedStatus, workv1alpha2.AggregatedStatusItem{
				ClusterName: m,
				Status:      &pkgruntime.RawExtension{Raw: []byte(fmt.Sprintf(`{"replicas":2,"readyReplicas":%d}`, ready))},
				Applied:     true,
			})
		}
		_, err = client.WorkV1alpha2().ResourceBindings(benchNamespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
}

// restoreBindings undoes a pass: every binding gets its scheduling result back.
func restoreBindings(b *testing.B, ctx context.Context, cp *harness.ControlPlane) {
	b.Helper()
	client, err := karmadaclient.NewForConfig(benchConfig(cp.Karmada))
	require.NoError(b, err)
	list, err := client.WorkV1alpha2().ResourceBindings(benchNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(b, err)
	var changed []workv1alpha2.ResourceBinding
	for _, rb := range list.Items {
		if !slices.Equal(rb.Spec.Clusters, bindingClusters) {
			changed = append(changed, rb)
		}
	}
	require.NoError(b, parallel(len(changed), 32, func(i int) error {
		rb := &changed[i]
		rb.Spec.Clusters = slices.Clone(bindingClusters)
		_, err := client.WorkV1alpha2().ResourceBindings(benchNamespace).Update(ctx, rb, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return fmt.Errorf("binding %s changed while restoring, nothing else should write it: %w", rb.Name, err)
		}
		return err
	}))
}

// parallel runs fn for 0..n-1 on workers goroutines and returns the first error.
func parallel(n, workers int, fn func(int) error) error {
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for i := range n {
		select {
		case next <- i:
		case first = <-errs:
		}
		if first != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		select {
		case first = <-errs:
		default:
		}
	}
	return first
}
