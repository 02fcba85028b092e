package withcontroller

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	rt "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/recorded/recordtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// eventLog collects the events of a watch until the test ends.
type eventLog struct {
	mu     sync.Mutex
	events []watch.Event
}

func record(t *testing.T, w watch.Interface) *eventLog {
	l := &eventLog{}
	go func() {
		for ev := range w.ResultChan() {
			l.mu.Lock()
			l.events = append(l.events, ev)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return l
}

func (l *eventLog) all() []watch.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]watch.Event(nil), l.events...)
}

// triggerChanges returns, per binding, the successive values its
// spec.rescheduleTriggeredAt took.
func (l *eventLog) triggerChanges() map[string][]string {
	last := map[string]string{}
	changes := map[string][]string{}
	for _, ev := range l.all() {
		rb, ok := ev.Object.(*workv1alpha2.ResourceBinding)
		if !ok {
			continue
		}
		value := "<none>"
		if rb.Spec.RescheduleTriggeredAt != nil {
			value = rb.Spec.RescheduleTriggeredAt.UTC().Format(time.RFC3339)
		}
		if prev, seen := last[rb.Name]; !seen || prev != value {
			if seen {
				changes[rb.Name] = append(changes[rb.Name], value)
			}
			last[rb.Name] = value
		}
	}
	return changes
}

func watchRebalancer(ctx context.Context, t *testing.T, c *fixtures.Clients, name string) *eventLog {
	t.Helper()
	w, err := c.Karmada.AppsV1alpha1().WorkloadRebalancers().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	require.NoError(t, err)
	return record(t, w)
}

func watchBindings(ctx context.Context, t *testing.T, c *fixtures.Clients, ns string) *eventLog {
	t.Helper()
	// Start from now: the initial ADDED events carry the values before the run.
	w, err := c.Karmada.WorkV1alpha2().ResourceBindings(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	return record(t, w)
}

// TestCoexistWithTheController records a run with a ttl while Karmada's
// controller handles the same object: one consistent status, one trigger
// per binding, one deletion, and the command ends cleanly whoever deletes.
func TestCoexistWithTheController(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	// A fresh name each run, so that -count=N repeats the race.
	ns := "co-ttl-" + utilrand.String(5)
	name := ns
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, "web", "api")
	rt.DeleteRebalancerAfter(t, c, name)
	rebalancerEvents := watchRebalancer(ctx, t, c, name)
	bindingEvents := watchBindings(ctx, t, c, ns)

	res := rt.Rebalance(t, cp, "deploy/web", "deploy/api", "-n", ns, "--name", name, "--ttl", "3")
	require.Equal(t, cmd.ExitOK, res.Code)
	assert.Contains(t, res.Stderr, "2 workloads: 2 successful, 0 failed, 0 pending; 2 rescheduled, 0 ignored\n")
	deletedByUs := strings.Contains(res.Stderr, "workloadrebalancer.apps.karmada.io/"+name+" deleted")
	deletedByController := strings.Contains(res.Stderr, "workloadrebalancer "+name+" was deleted by someone else")
	// The controller wrote the record (its managedFields say so): the
	// command leaves the deletion to it and returns.
	leftToController := strings.Contains(res.Stderr, "workloadrebalancer "+name+" is complete; Karmada's workloadRebalancer controller, which handles it, deletes it at ")
	reported := 0
	for _, r := range []bool{deletedByUs, deletedByController, leftToController} {
		if r {
			reported++
		}
	}
	assert.Equal(t, 1, reported, "exactly one deleter reported:\n%s", res.Stderr)
	require.Eventually(t, func() bool { return rt.Rebalancer(ctx, t, c, name) == nil }, time.Minute, 100*time.Millisecond, "deleted once its ttl ran out")
	time.Sleep(time.Second) // let the watches catch up

	// One status: no version records anything but Successful or pending
	// (the controller writes pending entries when its binding update loses
	// the race with the plugin's trigger, and finishes them on its retry),
	// and the object was deleted only once complete.
	want := []appsv1alpha1.ObservedWorkload{
		rt.Observed(rt.Deploy(ns, "api"), appsv1alpha1.RebalanceSuccessful, ""),
		rt.Observed(rt.Deploy(ns, "web"), appsv1alpha1.RebalanceSuccessful, ""),
	}
	var created, last *appsv1alpha1.WorkloadRebalancer
	deletions := 0
	for _, ev := range rebalancerEvents.all() {
		rb, ok := ev.Object.(*appsv1alpha1.WorkloadRebalancer)
		require.True(t, ok, "event %s: %T", ev.Type, ev.Object)
		t.Logf("%s %s: generation %d, status %+v", ev.Type, rb.ResourceVersion, rb.Generation, rb.Status)
		if created == nil {
			created = rb
		}
		if ev.Type == watch.Deleted {
			deletions++
			continue
		}
		last = rb
		for _, w := range rb.Status.ObservedWorkloads {
			assert.Contains(t, []appsv1alpha1.RebalanceResult{"", appsv1alpha1.RebalanceSuccessful}, w.Result, "version %s", rb.ResourceVersion)
		}
	}
	require.NotNil(t, created)
	require.NotNil(t, last)
	assert.Equal(t, want, last.Status.ObservedWorkloads, "the last version before the deletion is complete")
	assert.Equal(t, int64(1), last.Status.ObservedGeneration)
	assert.NotNil(t, last.Status.FinishTime)
	assert.Equal(t, 1, deletions, "one deletion")

	// One trigger per binding, at the creationTimestamp. Since recorded
	// runs move make-before-break (issue 29), each binding is held
	// (suspended) before the record exists; a workload with nothing to
	// stage is then let go, its trigger taken back with the hold and
	// written again as the record's own: the scheduler, which ignores a
	// suspended binding, sees that one trigger value and nothing else.
	at := created.CreationTimestamp.UTC().Format(time.RFC3339)
	changes := bindingEvents.triggerChanges()
	for name, values := range changes {
		var written []string
		for _, v := range values {
			if v != "<none>" {
				written = append(written, v)
			}
		}
		require.NotEmpty(t, values, name)
		assert.Equal(t, at, values[len(values)-1], "%s ends with the record's trigger: %v", name, values)
		for _, v := range written {
			assert.Equal(t, at, v, "%s: no trigger other than the record's: %v", name, values)
		}
	}
	assert.ElementsMatch(t, []string{"api-deployment", "web-deployment"}, keysOf(changes))
}

func keysOf(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestServerSideWithTheController leaves the triggers to the controller and
// follows its status and, with a ttl, its deletion.
func TestServerSideWithTheController(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name = "co-server", "co-server"
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, "web")
	rt.DeleteRebalancerAfter(t, c, name)
	rebalancerEvents := watchRebalancer(ctx, t, c, name)

	res := rt.Rebalance(t, cp, "deploy/web", "deploy/ghost", "-n", ns, "--name", name, "--server-side", "--ttl", "2", "-o", "wide")
	require.Equal(t, cmd.ExitFailed, res.Code, "ghost has no binding")
	web := fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "deployment.apps/web"))
	assert.Equal(t, []string{"deployment.apps/web", "Successful", "Scheduled"}, web[:3])
	ghost := fixtures.SplitCells(fixtures.TableLine(t, res.Stdout, "deployment.apps/ghost"))
	assert.Equal(t, []string{"deployment.apps/ghost", "Failed"}, ghost[:2])
	assert.Contains(t, res.Stdout, "ReferencedBindingNotFound")
	assert.Contains(t, res.Stderr, "2 workloads: 1 successful, 1 failed, 0 pending; 1 rescheduled, 0 ignored\n")
	if cp.Versions.KarmadaAtLeast(13) {
		// The controller deletes it: the command says when and returns, or,
		// when the 2s were over by the end of the run, sees it deleted.
		assert.Regexp(t, "(workloadrebalancer "+name+" is complete; Karmada's workloadRebalancer controller, which handles it, deletes it at \\S+Z \\(ttlSecondsAfterFinished 2 after its finish time\\), so this command does not wait for it: .*"+
			"|workloadrebalancer "+name+" was deleted by someone else \\(Karmada's controller, say\\); nothing is left to do)\n$", res.Stderr)
		require.Eventually(t, func() bool { return rt.Rebalancer(ctx, t, c, name) == nil }, time.Minute, 100*time.Millisecond, "the controller deletes it")
	} else {
		// Karmada v1.12's controller never deletes it (karmada#5989): the
		// command detects the release, says so, and deletes it itself.
		assert.Contains(t, res.Stderr, "note: this control plane runs Karmada v1.12 (the ResourceBinding schema has spec.preserveResourcesOnDeletion (added in v1.12) but not spec.schedulePriority (added in v1.13)), "+
			"whose workloadRebalancer controller does not delete a finished workloadrebalancer when its ttl runs out (fixed in v1.13, karmada#5989); kubectl rebalance deletes workloadrebalancer "+name+" itself then\n")
		assert.Regexp(t, "workloadrebalancer.apps.karmada.io/"+name+" deleted \\(ttlSecondsAfterFinished 2 after finish time [^)]+\\)\n$", res.Stderr)
	}
	assert.Nil(t, rt.Rebalancer(ctx, t, c, name), "deleted")

	var created *appsv1alpha1.WorkloadRebalancer
	for _, ev := range rebalancerEvents.all() {
		if rb, ok := ev.Object.(*appsv1alpha1.WorkloadRebalancer); ok && created == nil {
			created = rb
		}
	}
	require.NotNil(t, created)
	binding := rt.Binding(ctx, t, c, ns, "web-deployment")
	require.NotNil(t, binding.Spec.RescheduleTriggeredAt)
	assert.True(t, binding.Spec.RescheduleTriggeredAt.Equal(&created.CreationTimestamp), "the controller triggered at the creationTimestamp")
}

// TestDemoServerSide runs the user guide's spec edit example through the
// real controller: it records exactly what the client-side run records
// (see the recorded package's TestRecordDemoManifestEdit).
func TestDemoServerSide(t *testing.T) {
	cp := harness.Require(t)
	ctx, c := fixtures.TestContext(t), fixtures.TestClients(t, cp.Karmada)
	const ns, name = "co-demo", "co-demo"
	fixtures.TestNamespace(ctx, t, c, ns)
	rt.Deployments(ctx, t, c, ns, "demo-deploy-1", "demo-deploy-3")
	rt.DeleteRebalancerAfter(t, c, name)
	// demo-deploy-3 joins later but is triggered at the creationTimestamp:
	// create the rebalancer in a later second than its last schedule.
	time.Sleep(1100 * time.Millisecond)

	dir := t.TempDir()
	first, second := filepath.Join(dir, "demo.yaml"), filepath.Join(dir, "demo-edited.yaml")
	rt.WriteFile(t, first, "apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata:\n  name: co-demo\nspec:\n  workloads:\n"+
		"    - {apiVersion: apps/v1, kind: Deployment, name: demo-deploy-1, namespace: co-demo}\n"+
		"    - {apiVersion: apps/v1, kind: Deployment, name: demo-deploy-2, namespace: co-demo}\n")
	rt.WriteFile(t, second, "apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata:\n  name: co-demo\nspec:\n  workloads:\n"+
		"    - {apiVersion: apps/v1, kind: Deployment, name: demo-deploy-3, namespace: co-demo}\n")

	res := rt.Rebalance(t, cp, "-f", first, "--server-side")
	require.Equal(t, cmd.ExitFailed, res.Code)
	rb := rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rb)
	assert.Equal(t, []appsv1alpha1.ObservedWorkload{
		rt.Observed(rt.Deploy(ns, "demo-deploy-1"), appsv1alpha1.RebalanceSuccessful, ""),
		rt.Observed(rt.Deploy(ns, "demo-deploy-2"), appsv1alpha1.RebalanceFailed, appsv1alpha1.RebalanceObjectNotFound),
	}, rb.Status.ObservedWorkloads)
	require.NotNil(t, rb.Status.FinishTime)
	firstFinish := rb.Status.FinishTime.Time

	time.Sleep(1100 * time.Millisecond)
	edited := rt.Rebalance(t, cp, "-f", second, "--server-side")
	require.Equal(t, cmd.ExitOK, edited.Code)
	assert.Contains(t, edited.Stderr, "workloadrebalancer.apps.karmada.io/co-demo configured\n")
	rb = rt.Rebalancer(ctx, t, c, name)
	require.NotNil(t, rb)
	assert.Equal(t, int64(2), rb.Status.ObservedGeneration)
	assert.Equal(t, []appsv1alpha1.ObservedWorkload{
		rt.Observed(rt.Deploy(ns, "demo-deploy-1"), appsv1alpha1.RebalanceSuccessful, ""),
		rt.Observed(rt.Deploy(ns, "demo-deploy-3"), appsv1alpha1.RebalanceSuccessful, ""),
	}, rb.Status.ObservedWorkloads)
	require.NotNil(t, rb.Status.FinishTime)
	assert.True(t, rb.Status.FinishTime.After(firstFinish))
	three := fixtures.SplitCells(fixtures.TableLine(t, edited.Stdout, "deployment.apps/demo-deploy-3"))
	assert.Equal(t, []string{"deployment.apps/demo-deploy-3", "Successful", "Scheduled"}, three[:3])
}
