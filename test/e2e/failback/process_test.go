package failback

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadainformers "github.com/karmada-io/karmada/pkg/generated/informers/externalversions"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// process is the built kubectl-rebalance binary running `failback` as a
// child process with JSON logs, so that it gets real signals: SIGTERM and
// SIGINT as a pod or a terminal sends them, SIGKILL as a crash.
type process struct {
	logBuffer
	name string
	cmd  *exec.Cmd
	done chan struct{}
	code int
}

// startProcess starts the binary (from rt.Binary) as a failback daemon.
func startProcess(t *testing.T, cp *harness.ControlPlane, binary, name string, args ...string) *process {
	t.Helper()
	p := &process{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(binary, append([]string{"failback", "--kubeconfig", cp.Kubeconfig, "--cache-dir", t.TempDir(),
		"--logging-format=json", "--leader-elect-identity", name}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.logBuffer, &p.logBuffer
	require.NoError(t, p.cmd.Start())
	go func() {
		defer close(p.done)
		err := p.cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			p.code = exit.ExitCode()
		default:
			p.code = -1
		}
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		t.Logf("failback daemon %s exited %d; logs:\n%s", p.name, p.code, p.text())
	})
	return p
}

// signal sends sig to the daemon.
func (p *process) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
}

// wait waits until the daemon exited and returns its exit code. timeout
// only bounds a daemon that hangs; it is not a measure of promptness.
func (p *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		require.FailNow(t, "the failback daemon "+p.name+" did not exit", "logs:\n%s", p.text())
	}
	return -1
}

// logged returns the JSON log lines whose message is msg.
func (p *process) logged(msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.text()))
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == msg {
			out = append(out, line)
		}
	}
	return out
}

// lastLogged returns the last log line with message msg, failing when none.
func (p *process) lastLogged(t *testing.T, msg string) map[string]any {
	t.Helper()
	lines := p.logged(msg)
	require.NotEmpty(t, lines, "daemon %s never logged %q; logs:\n%s", p.name, msg, p.text())
	return lines[len(lines)-1]
}

// workloads creates the Deployments names (3 replicas each) with the
// tutorial's dynamic-weight policy over member1 and member2, and waits
// until each is scheduled.
func workloads(ctx context.Context, t *testing.T, c *fixtures.Clients, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, fixtures.Deployment(ns, name, 3), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx,
		fixtures.DynamicWeightPolicy(ns, "policy-"+ns, "apps/v1", "Deployment", names, []string{"member1", "member2"}), metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range names {
		fixtures.WaitScheduled(ctx, t, c, ns, name+"-deployment")
	}
}

// triggerWatch follows the ResourceBindings of a namespace and collects,
// for each, every distinct spec.rescheduleTriggeredAt it held while its
// scheduling was not suspended: one value per trigger the scheduler could
// act on, so a binding triggered twice shows two. A failback moves
// make-before-break: the trigger Karmada's controller writes on a held
// (suspended) binding at the record's creation is replaced by the move's
// release before the scheduler ever sees it, and is not counted.
type triggerWatch struct {
	mu   sync.Mutex
	seen map[string][]metav1.Time
}

// watchTriggers starts a triggerWatch that runs until the test ends.
func watchTriggers(t *testing.T, c *fixtures.Clients, ns string) *triggerWatch {
	t.Helper()
	w := &triggerWatch{seen: map[string][]metav1.Time{}}
	factory := karmadainformers.NewSharedInformerFactoryWithOptions(c.Karmada, 0, karmadainformers.WithNamespace(ns))
	informer := factory.Work().V1alpha2().ResourceBindings().Informer()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, obj any) { w.observe(obj) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced))
	return w
}

func (w *triggerWatch) observe(obj any) {
	rb, ok := obj.(*workv1alpha2.ResourceBinding)
	if !ok || rb.Spec.RescheduleTriggeredAt == nil || rb.Spec.SchedulingSuspended() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	values := w.seen[rb.Name]
	if len(values) > 0 && values[len(values)-1].Equal(rb.Spec.RescheduleTriggeredAt) {
		return
	}
	w.seen[rb.Name] = append(values, *rb.Spec.RescheduleTriggeredAt)
}

// triggers returns the trigger values binding held so far.
func (w *triggerWatch) triggers(binding string) []metav1.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]metav1.Time(nil), w.seen[binding]...)
}
