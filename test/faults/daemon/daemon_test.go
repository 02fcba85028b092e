package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

const (
	// perGroup workloads are stranded before the restart, as many after it.
	perGroup  = 6
	faultRate = 0.25
	// The daemons' settings: a pass every 3s, one request a second (a slow
	// pass, so that the restart and the kill land while it writes), every
	// request given up after 5s, Kubernetes' default leader election timing.
	interval       = 3 * time.Second
	requestTimeout = 5 * time.Second
	leaseDuration  = 15 * time.Second
	renewDeadline  = 10 * time.Second
	retryPeriod    = 2 * time.Second
	// hold is how long a "timeout" fault keeps a request: past the daemons'
	// request timeout.
	hold = 10 * time.Second
	// waitTimeout bounds every wait of the benchmark.
	waitTimeout = 5 * time.Minute
)

// BenchmarkDaemonFaults is the seed's descheduler example run by two
// daemons with leader election through fault-injecting proxies: replicas
// stranded in a cordoned member1 are moved away, with the Karmada apiserver
// restarted while the leader writes the first group and the leader killed
// (SIGKILL) while it writes the second.
func BenchmarkDaemonFaults(b *testing.B) {
	cp := harness.Require(b)
	bin := pluginBinary(b)
	var report []string
	for i := range b.N {
		report = append(report, runScenario(b, cp, bin, i)...)
	}
	fmt.Fprintf(os.Stdout, "\ntwo deschedule daemons (--leader-elect, --interval %s, --kube-api-qps 1) each through a proxy failing %.0f%% of the requests (member proxy included), "+
		"Karmada apiserver restarted while the leader writes, the leader killed (SIGKILL) while it writes:\n", interval, 100*faultRate)
	for _, l := range report {
		fmt.Fprintln(os.Stdout, l)
	}
}

// scenario is one run in a namespace of its own.
type scenario struct {
	b       *testing.B
	cp      *harness.ControlPlane
	c       *fixtures.Clients
	ctx     context.Context
	ns      string
	members map[string]kubernetes.Interface
}

// daemon is one of the two daemons and its proxy.
type daemon struct {
	id    string
	proxy *harness.FaultProxy
	p     *process
}

func (d *daemon) holder() string { return deschedule.HolderIdentity(d.id) }

func runScenario(b *testing.B, cp *harness.ControlPlane, bin string, run int) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := fixtures.NewClients(cp.Karmada)
	require.NoError(b, err)
	s := &scenario{b: b, cp: cp, c: c, ctx: ctx, ns: fmt.Sprintf("faults-daemon-%d", run), members: map[string]kubernetes.Interface{}}
	fixtures.TestNamespace(ctx, b, c, s.ns)

	groupA, groupB := names("a", perGroup), names("b", perGroup)
	s.createWorkloads(append(slices.Clone(groupA), groupB...))
	defer s.cordonMember1()()
	defer s.remove(append(slices.Clone(groupA), groupB...))
	s.strand(groupA)

	// The Lease is karmada-descheduler's, in karmada-system, as a deployed
	// daemon's is.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	lease := watchLease(watchCtx, c.Kube, deschedule.DefaultLeaseNamespace, deschedule.DefaultLeaseName)
	require.NoError(b, s.poll("the Lease free", func() (bool, string) {
		// An earlier run's survivor released it: no holder, or an expired one.
		l, err := c.Kube.CoordinationV1().Leases(deschedule.DefaultLeaseNamespace).Get(ctx, deschedule.DefaultLeaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "none"
		}
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "", fmt.Sprint(l.Spec.HolderIdentity)
	}))

	daemons := map[string]*daemon{}
	for k, id := range []string{fmt.Sprintf("a%d", run), fmt.Sprintf("b%d", run)} {
		proxy, err := cp.StartFaultProxy(harness.FaultOptions{Rate: faultRate, Seed: uint64(1000 + 10*run + k), Hold: hold})
		require.NoError(b, err)
		defer proxy.Close()
		d := &daemon{id: id, proxy: proxy}
		d.p = start(b, id, bin, "deschedule", "--kubeconfig", proxy.Kubeconfig, "-n", s.ns,
			"--interval", interval.String(), "--unschedulable-threshold=1s", "--kube-api-qps=1", "--kube-api-burst=1", "--request-timeout", requestTimeout.String(),
			"--leader-elect", "--leader-elect-identity", id, "--leader-elect-lease-duration", leaseDuration.String(),
			"--leader-elect-renew-deadline", renewDeadline.String(), "--leader-elect-retry-period", retryPeriod.String(),
			"--logging-format=json")
		daemons[d.holder()] = d
	}
	all := func() []*daemon {
		return []*daemon{daemons[deschedule.HolderIdentity(fmt.Sprintf("a%d", run))], daemons[deschedule.HolderIdentity(fmt.Sprintf("b%d", run))]}
	}
	writes := func() []write {
		var out []write
		for _, d := range all() {
			for _, w := range d.proxy.BindingWrites() {
				out = append(out, write{BindingWrite: w, by: d.holder()})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Sent.Before(out[j].Sent) })
		return out
	}
	alive := func(what string) {
		for _, d := range all() {
			require.False(b, d.p.exited(), "daemon %s ended (%s) %s; its logs:\n%s", d.id, d.p.exit(), what, d.p.tail(30))
		}
	}

	// Phase 1: the Karmada apiserver is restarted once the first stranded
	// workload's binding has been written.
	began := time.Now()
	var restart struct {
		sync.Mutex
		start, end time.Time
		err        error
	}
	restartDone := make(chan struct{})
	go func() {
		defer close(restartDone)
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
			return len(writes()) >= 1, nil
		})
		if err != nil {
			return
		}
		restart.Lock()
		restart.start = time.Now()
		restart.Unlock()
		fmt.Fprintf(os.Stderr, "restarting the Karmada apiserver after %d binding write(s)\n", len(writes()))
		err = cp.RestartKarmadaAPIServer(ctx)
		restart.Lock()
		restart.end, restart.err = time.Now(), err
		restart.Unlock()
	}()
	require.NoError(b, s.poll("group a moved off member1", func() (bool, string) {
		alive("while group a was descheduled")
		return s.movedOff(groupA)
	}))
	<-restartDone
	require.NoError(b, restart.err, "restart")
	require.False(b, restart.start.IsZero(), "the apiserver was restarted")
	phase1 := time.Since(began)
	phase1Writes := writes()
	alive("after group a")

	// Phase 2: the second group is stranded, and the leader is killed once
	// it has written the first of them.
	s.strand(groupB)
	var victim *daemon
	var killed time.Time
	var trigger write
	require.NoError(b, s.poll("a write of group b", func() (bool, string) {
		alive("before the kill")
		for _, w := range writes() {
			if strings.HasPrefix(w.Binding, s.ns+"/b-") {
				victim, killed, trigger = daemons[w.by], time.Now(), w
				return true, ""
			}
		}
		return false, "no write yet"
	}))
	require.NoError(b, victim.p.cmd.Process.Signal(syscall.SIGKILL))
	<-victim.p.done
	var survivor *daemon
	for _, d := range all() {
		if d != victim {
			survivor = d
		}
	}
	fmt.Fprintf(os.Stderr, "killed %s, the leader, after its first write of group b\n", victim.id)
	require.NoError(b, s.poll(survivor.id+" leading", func() (bool, string) {
		require.False(b, survivor.p.exited(), "daemon %s ended (%s); its logs:\n%s", survivor.id, survivor.p.exit(), survivor.p.tail(30))
		return lease.holder() == survivor.holder(), "holder " + lease.holder()
	}))
	require.NoError(b, s.poll("group b moved off member1", func() (bool, string) {
		require.False(b, survivor.p.exited(), "daemon %s ended (%s); its logs:\n%s", survivor.id, survivor.p.exit(), survivor.p.tail(30))
		return s.movedOff(groupB)
	}))
	took := time.Since(began)

	// Phase 3: SIGTERM ends the survivor: its last write done, the Lease
	// released, exit 0.
	sigterm := time.Now()
	stopped := survivor.p.signal(b, syscall.SIGTERM, time.Minute)
	stopWatch()
	var afterSignal []string
	for _, l := range survivor.p.logs() {
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(l["time"]))
		if err == nil && !at.Before(sigterm) {
			afterSignal = append(afterSignal, fmt.Sprintf("+%s %s", at.Sub(sigterm).Round(10*time.Millisecond), l["msg"]))
		}
	}

	// The daemons' logs stay with the control plane's when the run fails.
	for _, d := range all() {
		_ = os.WriteFile(filepath.Join(cp.Dir, "logs", "deschedule-"+d.id+".log"), []byte(d.p.stderr.String()), 0o600)
	}

	// What must hold.
	all1 := writes()
	history := lease.history()
	perBinding := map[string][]write{}
	for _, w := range all1 {
		perBinding[w.Binding] = append(perBinding[w.Binding], w)
	}
	for _, name := range append(slices.Clone(groupA), groupB...) {
		key := s.ns + "/" + name + "-deployment"
		got := perBinding[key]
		if assert.Len(b, got, 1, "%s: exactly one binding write, got %v", key, got) {
			assert.Contains(b, got[0].Clusters, "member1:0", "%s: the write takes the stranded replica off member1", key)
		}
	}
	assert.Len(b, perBinding, 2*perGroup, "no other binding written: %v", perBinding)
	for _, w := range phase1Writes {
		assert.True(b, strings.HasPrefix(w.Binding, s.ns+"/a-"), "before group b was stranded only group a is written: %s", w.Binding)
	}
	outside := 0
	for _, w := range all1 {
		if h := holderAt(history, w.Sent); h != w.by {
			outside++
			b.Errorf("%s wrote %s at %s while the Lease was held by %q (history %v)", w.by, w.Binding, w.Sent.Format(time.RFC3339Nano), h, history)
		}
	}
	var lastRenew, acquired time.Time
	for _, t := range history {
		switch t.holder {
		case victim.holder():
			lastRenew = t.lastRenew
		case survivor.holder():
			if t.acquired.After(killed) {
				acquired = t.acquired
			}
		}
	}
	require.False(b, acquired.IsZero(), "the survivor acquired the Lease after the kill: %v", history)
	assert.False(b, acquired.Before(lastRenew.Add(leaseDuration)), "the survivor took over only once the Lease expired: renewed %s, acquired %s",
		lastRenew.Format(time.RFC3339Nano), acquired.Format(time.RFC3339Nano))
	assert.Equal(b, "exit 0", survivor.p.exit(), "the survivor's end; logs:\n%s", survivor.p.tail(30))
	assert.Equal(b, "signal: killed", victim.p.exit())
	// Its way out has a shutdown budget of about a second, which the
	// proxy's latency (up to 2 s) may spend before the release lands: then
	// it must say so, and the Lease is left to expire.
	releasedLogged := survivor.p.last("released the lease") != nil
	if !releasedLogged {
		said := survivor.p.last("did not release the lease: the API server did not answer within the shutdown budget; a standby takes over once the lease expires") != nil ||
			survivor.p.last("could not release the lease, a standby takes over once it expires") != nil
		assert.True(b, said, "the survivor released the Lease or said it could not")
	}
	assert.NotNil(b, survivor.p.last("stopped"), "the survivor said it stopped")
	lastPass := survivor.p.last("pass finished")
	if stoppedPass := survivor.p.last("pass stopped between writes"); stoppedPass != nil {
		lastPass = stoppedPass
	}
	assert.NotNil(b, lastPass, "the survivor summed up its passes")
	released, err := c.Kube.CoordinationV1().Leases(deschedule.DefaultLeaseNamespace).Get(ctx, deschedule.DefaultLeaseName, metav1.GetOptions{})
	if assert.NoError(b, err) && releasedLogged {
		assert.Empty(b, released.Spec.HolderIdentity, "the Lease is released")
	}

	// The figures.
	byDaemon := map[string]int{}
	for _, w := range all1 {
		byDaemon[w.by]++
	}
	// A write whose answer was lost is read again by its pass; when that
	// read gets through, the pass reports the binding descheduled.
	lost, lostButReported, lostToTheKill := 0, 0, 0
	for _, w := range all1 {
		if !w.AnswerLost {
			continue
		}
		lost++
		if w.by == victim.holder() && !w.Answered.Before(trigger.Answered) {
			lostToTheKill++ // killed before it could read the binding again
			continue
		}
		for _, l := range daemons[w.by].p.logs() {
			if l["msg"] == "binding descheduled" && fmt.Sprint(l["namespace"], "/", l["binding"]) == w.Binding {
				lostButReported++
				break
			}
		}
	}
	lines := []string{fmt.Sprintf("run %d: %d stranded workloads descheduled in %s (group a %s, apiserver restart %s); %d binding writes for %d bindings (%d answers lost: %d reported descheduled, %d cut by the kill), "+
		"%d written outside the writer's tenure; %s wrote %d, %s wrote %d",
		run+1, 2*perGroup, took.Round(100*time.Millisecond), phase1.Round(100*time.Millisecond), restart.end.Sub(restart.start).Round(100*time.Millisecond),
		len(all1), len(perBinding), lost, lostButReported, lostToTheKill, outside, all()[0].id, byDaemon[all()[0].holder()], all()[1].id, byDaemon[all()[1].holder()]),
		fmt.Sprintf("    killed %s after its first write of group b; %s acquired the Lease %s after the kill, %s after the killed leader's last renewal (lease duration %s); "+
			"SIGTERM: %s in %s, Lease released; logged after it: %s",
			victim.id, survivor.id, acquired.Sub(killed).Round(100*time.Millisecond), acquired.Sub(lastRenew).Round(100*time.Millisecond), leaseDuration,
			survivor.p.exit(), stopped.Round(time.Millisecond), strings.Join(afterSignal, ", ")),
		fmt.Sprintf("    Lease holders in order: %s", tenures(history)),
	}
	for _, d := range all() {
		lines = append(lines, fmt.Sprintf("    %-3s passes %d (stopped %d, failed %d), writes failed %d (retried next pass), member errors %d, led %d time(s), lost the Lease %d time(s), %s\n        %s",
			d.id, d.p.count("pass finished")+d.p.count("pass stopped between writes"), d.p.count("pass stopped between writes"), d.p.count("pass failed"),
			d.p.count("binding update failed"), d.p.count("member cluster could not be listed"), d.p.count("leading"), d.p.count("lost the lease, stopped working"),
			d.p.exit(), d.proxy.Stats()))
	}
	for _, l := range lines {
		fmt.Fprintln(os.Stderr, l)
	}
	return lines
}

// write is a binding write and the daemon whose proxy it went through.
type write struct {
	harness.BindingWrite
	by string
}

func (w write) String() string {
	return fmt.Sprintf("%s by %s at %s (%s)", w.Binding, w.by, w.Sent.Format("15:04:05.000"), w.Clusters)
}

func tenures(history []tenure) string {
	var parts []string
	for _, t := range history {
		parts = append(parts, fmt.Sprintf("%s from %s", strings.TrimPrefix(t.holder, deschedule.IdentityPrefix), t.acquired.Format("15:04:05.000")))
	}
	return strings.Join(parts, ", ")
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// poll checks until check holds or waitTimeout passes.
func (s *scenario) poll(what string, check func() (bool, string)) error {
	var last string
	err := wait.PollUntilContextTimeout(s.ctx, 500*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		ok, desc := check()
		last = desc
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: last seen %s: %w", what, last, err)
	}
	return nil
}

// member returns an admin client of a member cluster.
func (s *scenario) member(name string) kubernetes.Interface {
	if c, ok := s.members[name]; ok {
		return c
	}
	m := s.cp.Member(name)
	require.NotNil(s.b, m, "member %s", name)
	c, err := kubernetes.NewForConfig(m.Config)
	require.NoError(s.b, err)
	s.members[name] = c
	return c
}

// createWorkloads creates the seed example's Deployment once per name (3
// nginx replicas of 2 CPUs, divided over member1..3 by available replicas)
// and waits until each has a replica running in every member.
func (s *scenario) createWorkloads(workloads []string) {
	s.b.Helper()
	members := []string{"member1", "member2", "member3"}
	policy := fixtures.DynamicWeightPolicy(s.ns, "nginx-propagation", "apps/v1", "Deployment", nil, members)
	policy.Spec.ResourceSelectors = []policyv1alpha1.ResourceSelector{{
		APIVersion: "apps/v1", Kind: "Deployment",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"example": "descheduler"}},
	}}
	_, err := s.c.Karmada.PolicyV1alpha1().PropagationPolicies(s.ns).Create(s.ctx, policy, metav1.CreateOptions{})
	require.NoError(s.b, err)
	for _, name := range workloads {
		d := fixtures.Deployment(s.ns, name, 3)
		d.Labels["example"] = "descheduler"
		c := &d.Spec.Template.Spec.Containers[0]
		c.Name, c.Image = "nginx", "nginx"
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		_, err := s.c.Kube.AppsV1().Deployments(s.ns).Create(s.ctx, d, metav1.CreateOptions{})
		require.NoError(s.b, err)
	}
	require.NoError(s.b, s.poll("every workload running in each member", func() (bool, string) {
		for _, name := range workloads {
			placement, ok, desc := s.settled(name)
			if !ok {
				return false, desc
			}
			for _, m := range members {
				if placement[m] != 1 {
					return false, fmt.Sprintf("%s placed %v", name, placement)
				}
				if got := s.pods(m, name); got.ready != 1 || got.total != 1 {
					return false, fmt.Sprintf("%s in %s: %+v", name, m, got)
				}
			}
		}
		return true, ""
	}))
}

// settled returns the placement of name's binding once karmada-scheduler
// has answered its latest spec with a success.
func (s *scenario) settled(name string) (map[string]int32, bool, string) {
	rb, err := s.c.Karmada.WorkV1alpha2().ResourceBindings(s.ns).Get(s.ctx, name+"-deployment", metav1.GetOptions{})
	if err != nil {
		return nil, false, err.Error()
	}
	placement := map[string]int32{}
	var sum int32
	for _, tc := range rb.Spec.Clusters {
		if tc.Replicas > 0 {
			placement[tc.Name] = tc.Replicas
		}
		sum += tc.Replicas
	}
	done := rb.Status.SchedulerObservedGeneration == rb.Generation &&
		meta.IsStatusConditionTrue(rb.Status.Conditions, "Scheduled") && sum == rb.Spec.Replicas && sum > 0
	return placement, done, fmt.Sprintf("%s: %s generation %d observed %d", name, fixtures.Placement(rb.Spec.Clusters), rb.Generation, rb.Status.SchedulerObservedGeneration)
}

// podCounts are the pods of a workload in a member, not being deleted.
type podCounts struct{ ready, unschedulable, total int }

func (s *scenario) pods(member, name string) podCounts {
	list, err := s.member(member).CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return podCounts{total: -1}
	}
	var c podCounts
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		c.total++
		for _, cond := range pod.Status.Conditions {
			switch {
			case cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue:
				c.ready++
			case cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable:
				c.unschedulable++
			}
		}
	}
	return c
}

// cordonMember1 marks every node of member1 unschedulable, as the seed's
// example does, and returns the function that undoes it.
func (s *scenario) cordonMember1() (uncordon func()) {
	s.b.Helper()
	client := s.member("member1")
	nodes, err := client.CoreV1().Nodes().List(s.ctx, metav1.ListOptions{})
	require.NoError(s.b, err)
	patch := func(unschedulable bool) []byte {
		return fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
	}
	uncordon = func() {
		for _, n := range nodes.Items {
			_, _ = client.CoreV1().Nodes().Patch(context.Background(), n.Name, types.StrategicMergePatchType, patch(false), metav1.PatchOptions{})
		}
	}
	for _, n := range nodes.Items {
		if _, err := client.CoreV1().Nodes().Patch(s.ctx, n.Name, types.StrategicMergePatchType, patch(true), metav1.PatchOptions{}); err != nil {
			uncordon()
			require.NoError(s.b, err)
		}
	}
	return uncordon
}

// remove deletes the workloads and their policy, so that the next run
// finds the members' room as this one did.
func (s *scenario) remove(workloads []string) {
	ctx := context.Background()
	for _, name := range workloads {
		_ = s.c.Kube.AppsV1().Deployments(s.ns).Delete(ctx, name, metav1.DeleteOptions{})
	}
	_ = s.c.Karmada.PolicyV1alpha1().PropagationPolicies(s.ns).Delete(ctx, "nginx-propagation", metav1.DeleteOptions{})
}

// strand deletes the workloads' pods in member1 and waits until their
// replacements are unschedulable there.
func (s *scenario) strand(workloads []string) {
	s.b.Helper()
	client := s.member("member1")
	for _, name := range workloads {
		pods, err := client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		require.NoError(s.b, err)
		for _, p := range pods.Items {
			if err := client.CoreV1().Pods(s.ns).Delete(s.ctx, p.Name, metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
				require.NoError(s.b, err)
			}
		}
	}
	require.NoError(s.b, s.poll("replacements unschedulable in member1", func() (bool, string) {
		for _, name := range workloads {
			if got := s.pods("member1", name); got != (podCounts{unschedulable: 1, total: 1}) {
				return false, fmt.Sprintf("%s: %+v", name, got)
			}
		}
		return true, ""
	}))
}

// movedOff reports whether every workload has left member1 for good: its
// binding settled without member1, no pod left there, three running in the
// other members.
func (s *scenario) movedOff(workloads []string) (bool, string) {
	for _, name := range workloads {
		placement, ok, desc := s.settled(name)
		if !ok {
			return false, desc
		}
		if placement["member1"] > 0 {
			return false, fmt.Sprintf("%s placed %v", name, placement)
		}
		if got := s.pods("member1", name); got.total != 0 {
			return false, fmt.Sprintf("%s in member1: %+v", name, got)
		}
		ready := 0
		for _, m := range []string{"member2", "member3"} {
			ready += s.pods(m, name).ready
		}
		if ready != 3 {
			return false, fmt.Sprintf("%s: %d ready in member2 and member3", name, ready)
		}
	}
	return true, ""
}
