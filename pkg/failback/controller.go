package failback

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	karmadainformers "github.com/karmada-io/karmada/pkg/generated/informers/externalversions"
	clusterlisters "github.com/karmada-io/karmada/pkg/generated/listers/cluster/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/daemon"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// EventComponent is the source of the failback daemon's events.
const EventComponent = "kubectl-rebalance-failback"

// Event reasons, on the Cluster and on each binding a failback triggers.
const (
	ReasonWindowStarted = "FailbackWindowStarted"
	ReasonWindowReset   = "FailbackWindowReset"
	ReasonStarted       = "FailbackStarted"
	ReasonFinished      = "FailbackFinished"
	ReasonStopped       = "FailbackStopped"
	ReasonTriggered     = "FailbackTriggered"
	ReasonFailed        = "FailbackFailed"
)

// sweepInterval paces the deletion of records past their TTL.
const sweepInterval = time.Minute

// Request asks a Runner for the failback of one recovery.
type Request struct {
	// Cluster recovered; Key identifies the recovery.
	Cluster, Key string
	// Name is the WorkloadRebalancer recording it: created by a new
	// failback, continued when it exists (nothing is triggered twice).
	Name string
	// Resume is set when the record exists.
	Resume bool
	// All: select every workload a fresh reschedule gives replicas on the
	// cluster (--rebalance-all). Otherwise only Workloads, those the
	// cluster's failure displaced, are candidates; none means nothing to do.
	All       bool
	Workloads []rebalance.Workload
	// Progress, when not nil, is told how the waves go.
	Progress func(waves.Status)
}

// Report is what a failback did.
type Report struct {
	// Rows are the workloads it handled, as kubectl rebalance reports them.
	Rows []rebalance.Row
	// DryRun: nothing was written; Rows say what would be.
	DryRun bool
	// Stopped says why the waves stopped before every workload started
	// (failure budget, interruption); empty when they all started.
	Stopped string
	// BudgetSpent: the failure budget (--max-failures) stopped the waves.
	// Such a failback is over: the workloads left pending are not started
	// by a later leader either.
	BudgetSpent bool
	// OneWrite says why every workload moved in one write (the daemon's
	// --max-unavailable, a Karmada release without suspension); empty when
	// they moved through the make-before-break mover.
	OneWrite string
	// Moves sums up how the workloads moved (Moves.Text), once noted on
	// the record.
	Moves string
}

// Runner fails back the workloads of one recovery: it selects the
// workloads a fresh reschedule would give replicas on the cluster and
// rebalances them in waves, recorded under the request's name. It returns
// when done or when ctx ends (the cluster failed again, the Lease was lost,
// the daemon stops), having stopped starting workloads.
type Runner interface {
	Failback(ctx context.Context, req Request) (*Report, error)
}

// EventWriter records an event about an object.
type EventWriter interface {
	WriteEvent(ctx context.Context, object runtime.Object, eventType, reason, message string) error
}

// Options configure a Controller.
type Options struct {
	// Leftovers, when set, runs while the daemon leads, at once and then
	// every sweep interval: the plugin recovers there what interrupted
	// make-before-break moves left suspended (package handover).
	Leftovers func(ctx context.Context)
	// Window is the stabilization window: how long a recovered cluster
	// must stay Ready and untainted before its failback.
	Window time.Duration
	// Cooldown: a cluster that fails again less than this after its last
	// failback must stay healthy this long (when longer than Window).
	Cooldown time.Duration
	// RebalanceAll fails back every workload a fresh reschedule gives
	// replicas on a recovered cluster, not only those its failure displaced.
	RebalanceAll bool
	// Namespace limits the bindings followed to find displaced workloads
	// ("" follows every namespace).
	Namespace string
	// TTL is the failback records' ttlSecondsAfterFinished (nil: kept).
	TTL *int32
	// DryRun: failbacks only log what they would do.
	DryRun bool
	// Clusters, when not empty, limits failbacks to these clusters.
	Clusters []string
	Metrics  *Metrics
	Events   EventWriter
	Logger   *slog.Logger
	// ResyncPeriod re-reads every Cluster this often (0: never).
	ResyncPeriod time.Duration
	// Explain words an error of the Karmada apiserver (refused, forbidden,
	// unreachable) for the logs and the caller, the same way the command
	// explains them everywhere; nil leaves errors as they are.
	Explain func(error) error
	// Retriable accepts the errors of the start-up requests that a later
	// attempt may not meet (an apiserver restarting); they are retried,
	// logged, until they pass or the daemon stops. Nil retries nothing.
	Retriable func(error) bool
	// Publisher, when set, is where the leader publishes its view of the
	// clusters for `kubectl rebalance failback status` (see status.go);
	// Identity names this daemon there.
	Publisher Publisher
	Identity  string
}

// Controller watches the member clusters and fails back to the ones that
// recover, while it leads.
type Controller struct {
	client karmadaclient.Interface
	runner Runner
	ledger Ledger
	opts   Options
	log    *slog.Logger
	queue  workqueue.TypedDelayingInterface[string]
	lister clusterlisters.ClusterLister
	// displaced are the workloads each cluster's failure displaced.
	displaced *Displacements

	mu     sync.Mutex
	states map[string]State
	runs   map[string]*activeRun
	// kept holds, per cluster, the tolerations of the workloads its last
	// failback moved back, from the failback's start until the cluster
	// fails again. Once back on the cluster they are no longer displaced,
	// yet a taint they tolerate (one that was there all along) must not
	// read as a new failure of the cluster: that would stop the failback
	// as soon as Karmada's controller placed the first workload back.
	kept    map[string][]corev1.Toleration
	leading context.Context // nil while not leading
	// stopping is the context of Run: once it ends the daemon is stopping
	// (SIGTERM, SIGINT), which a failback it cuts short reports.
	stopping context.Context
	wg       sync.WaitGroup
}

type activeRun struct {
	key string
	// record is the WorkloadRebalancer of the failback.
	record string
	cancel context.CancelFunc
	done   chan struct{}
	// aborted says why the run was cancelled, for the report.
	aborted string
}

// New returns a Controller reading clusters through client and failing
// back through runner.
func New(client karmadaclient.Interface, runner Runner, opts Options) *Controller {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Events == nil {
		opts.Events = discardEvents{}
	}
	return &Controller{
		client:    client,
		runner:    runner,
		ledger:    Ledger{Client: client.AppsV1alpha1().WorkloadRebalancers(), TTL: opts.TTL},
		opts:      opts,
		log:       log,
		states:    map[string]State{},
		runs:      map[string]*activeRun{},
		kept:      map[string][]corev1.Toleration{},
		displaced: NewDisplacements(),
	}
}

// explain words err as Options.Explain says.
func (c *Controller) explain(err error) error {
	if err == nil || c.opts.Explain == nil {
		return err
	}
	return c.opts.Explain(err)
}

// SetIdentity names this daemon in the state it publishes (its Lease
// identity, once known).
func (c *Controller) SetIdentity(identity string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opts.Identity = identity
}

// observe reads a cluster's health for its failback: a taint the workloads
// its failure displaced tolerate does not count against it.
func (c *Controller) observe(cluster *clusterv1alpha1.Cluster) Health {
	name := cluster.Name
	return Observe(cluster, func(t corev1.Taint) bool {
		return c.displaced.Tolerates(name, t) || tolerates(c.kept[name], t)
	})
}

// keepTolerations remembers the tolerations of the workloads displaced
// from a cluster whose failback starts (see Controller.kept).
func (c *Controller) keepTolerations(name string) {
	ready, _ := c.displaced.Of(name)
	for _, d := range ready {
		for _, t := range d.Tolerations {
			// Follow-up failbacks of one healthy spell bring the same
			// workloads' tolerations again: keep each once.
			if !slices.ContainsFunc(c.kept[name], func(k corev1.Toleration) bool { return k.MatchToleration(&t) }) {
				c.kept[name] = append(c.kept[name], t)
			}
		}
	}
}

// timing is the state machine's timing.
func (c *Controller) timing() Timing {
	return Timing{Window: c.opts.Window, Cooldown: c.opts.Cooldown}
}

// followUpPrefix marks a queue item that asks for the failback of the
// workloads whose eviction from a cluster ended after its failback fired.
// Cluster names never hold a colon.
const followUpPrefix = "follow-up:"

// followUpDelay gathers the evictions that end together into one run.
const followUpDelay = 5 * time.Second

type discardEvents struct{}

func (discardEvents) WriteEvent(context.Context, runtime.Object, string, string, string) error {
	return nil
}

// Run watches the clusters until ctx ends. Without leader election (le nil)
// it acts at once; with it, every replica follows the clusters (so that a
// new leader knows which windows are open) and only the leader fails back.
// When ctx ends, running failbacks stop starting workloads and Run returns
// once they have returned, before the Lease is released.
func (c *Controller) Run(ctx context.Context, le *daemon.LeaderElection, health *daemon.Health) error {
	c.queue = workqueue.NewTypedDelayingQueue[string]()
	defer c.queue.ShutDown()
	c.stopping = ctx
	factory := karmadainformers.NewSharedInformerFactory(c.client, c.opts.ResyncPeriod)
	informer := factory.Cluster().V1alpha1().Clusters()
	c.lister = informer.Lister()
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueue(obj) },
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: func(obj any) { c.enqueue(obj) },
	})
	if err != nil {
		return err
	}
	bindingFactory := karmadainformers.NewSharedInformerFactoryWithOptions(c.client, c.opts.ResyncPeriod, karmadainformers.WithNamespace(c.opts.Namespace))
	bindings := bindingFactory.Work().V1alpha2().ResourceBindings()
	_, err = bindings.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observeBinding(nil, obj) },
		UpdateFunc: func(old, obj any) { c.observeBinding(old, obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if rb, ok := obj.(*workv1alpha2.ResourceBinding); ok {
				c.displaced.Forget(rb.Namespace, rb.Name)
			}
		},
	})
	if err != nil {
		return err
	}
	// One cheap request first, so that a wrong kubeconfig or missing RBAC
	// stops the daemon at start instead of an informer retrying for ever;
	// a passing fault (an apiserver restarting) is retried.
	err = daemon.RetryStartup(ctx, c.log, "listing clusters", c.opts.Retriable, func() error {
		_, err := c.client.ClusterV1alpha1().Clusters().List(ctx, listOne)
		if err != nil {
			return c.explain(fmt.Errorf("cannot list clusters.cluster.karmada.io: %w", err))
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		return err
	}
	// The bindings tell which workloads a failure displaced; without them
	// the daemon would wait for their informer for ever.
	err = daemon.RetryStartup(ctx, c.log, "listing resourcebindings", c.opts.Retriable, func() error {
		_, err := c.client.WorkV1alpha2().ResourceBindings(c.opts.Namespace).List(ctx, listOne)
		if err != nil {
			return c.explain(fmt.Errorf("cannot list resourcebindings.work.karmada.io%s: %w", namespaceText(c.opts.Namespace), err))
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInformers()
	// The clusters first: a binding's change is judged by its cluster's
	// health.
	factory.Start(informerCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return nil // ctx ended
	}
	bindingFactory.Start(informerCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), bindings.Informer().HasSynced) {
		return nil // ctx ended
	}
	c.rememberFailbacks(ctx)
	health.SetReady(true)
	defer health.SetReady(false)

	go c.process()

	if le == nil {
		c.opts.Metrics.SetLeader(true)
		c.lead(ctx)
		c.opts.Metrics.SetLeader(false)
		return nil
	}
	return daemon.Lead(ctx, le, health, c.log, c.opts.Metrics.SetLeader, c.lead)
}

// enqueue queues the name of a Cluster (or of a deleted one).
func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err == nil {
		c.queue.Add(key)
	}
}

func (c *Controller) process() {
	for {
		name, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		if cluster, ok := strings.CutPrefix(name, followUpPrefix); ok {
			c.followUp(cluster)
		} else {
			c.sync(name)
		}
		c.queue.Done(name)
	}
}

// observeBinding learns from a binding's change which workloads a cluster's
// failure displaced, and queues the failback of those whose eviction ended.
func (c *Controller) observeBinding(oldObj, obj any) {
	rb, ok := obj.(*workv1alpha2.ResourceBinding)
	if !ok {
		return
	}
	old, _ := oldObj.(*workv1alpha2.ResourceBinding)
	down := func(name string, tolerations []corev1.Toleration) bool {
		cluster, err := c.lister.Get(name)
		return err == nil && ClusterDown(cluster, tolerations)
	}
	for _, cluster := range c.displaced.Observe(old, rb, down) {
		c.queue.AddAfter(followUpPrefix+cluster, followUpDelay)
	}
}

// rememberFailbacks reads when each cluster's last failback fired from the
// records, so that the cooldown and the late evictions survive a restart.
func (c *Controller) rememberFailbacks(ctx context.Context) {
	entries, err := c.ledger.List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("cannot read the failback records; the cooldown counts from this daemon's own failbacks only", "err", c.explain(err))
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range entries {
		if e.Cluster == "" || e.FollowUp {
			continue
		}
		s := c.states[e.Cluster]
		if e.Created.After(s.LastFailback) {
			s.LastKey, s.LastFailback = e.Key, e.Created
			c.states[e.Cluster] = s
		}
	}
}

// sync steps a cluster's state machine and acts on its transition.
func (c *Controller) sync(name string) {
	cluster, err := c.lister.Get(name)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if apierrors.IsNotFound(err) {
		delete(c.states, name)
		if run := c.runs[name]; run != nil && run.aborted == "" {
			run.aborted = "the cluster was deleted"
			run.cancel()
		}
		c.countStabilizing()
		return
	}
	if err != nil {
		return
	}
	h := c.observe(cluster)
	before := c.states[name]
	after, transition := Step(before, h, now, c.timing())
	c.states[name] = after
	c.countStabilizing()
	log := c.log.With("cluster", name)
	leading := c.leading != nil

	win, why := c.windowOf(after)
	if transition == Fire && before.Phase != PhaseStabilizing || transition == Recovering {
		log.Info("cluster recovered: ready and untainted", "window", win.String(), "held", after.Held, "recovery", h.Key)
		if leading {
			c.opts.Metrics.recovery(name)
			c.event(cluster, corev1.EventTypeNormal, ReasonWindowStarted, fmt.Sprintf(
				"Cluster %s is Ready and untainted again; its workloads fail back once it stays so for %s (%s)", name, win, why))
		}
	}
	// Look again when the window ends. Every sync of a stabilizing cluster
	// asks again: the queue keeps only the earliest wait of an item, which
	// may belong to a window a flap has reset.
	if end, ok := WindowEnds(after); ok {
		c.queue.AddAfter(name, time.Until(end))
	}
	switch transition {
	case Recovering:
	case Flapped:
		log.Info("cluster flapped during its stabilization window: the window starts over", "reason", h.Reason)
		if leading {
			c.opts.Metrics.reset(name)
			c.event(cluster, corev1.EventTypeWarning, ReasonWindowReset, fmt.Sprintf(
				"Cluster %s failed again during its stabilization window (%s); no failback until it stays Ready and untainted for %s (%s)", name, reasonOr(h.Reason, "it changed"), win, why))
		}
	case Failed:
		delete(c.kept, name)
		log.Info("cluster failed", "reason", h.Reason, "held", after.Held)
		if run := c.runs[name]; run != nil && run.aborted == "" {
			// A follow-up of the last failback.
			run.aborted = "cluster " + name + " failed again (" + h.Reason + ")"
			run.cancel()
		}
	case Aborted:
		delete(c.kept, name)
		log.Warn("cluster failed during its failback: stopping the waves that target it", "reason", h.Reason)
		if run := c.runs[name]; run != nil && run.aborted == "" {
			run.aborted = "cluster " + name + " failed again (" + h.Reason + ")"
			run.cancel()
		}
	case Fire:
		if !c.allowed(name) {
			log.Info("stabilization window over; not failing back to this cluster (not in --clusters)")
			c.states[name] = Finished(after, now)
			return
		}
		if !leading {
			log.Info("stabilization window over; the leader fails back", "recovery", after.Key)
			return
		}
		c.start(cluster, c.failbackRequest(name, after.Key))
	}
}

// windowText is how long the cluster stayed healthy before req started.
func (c *Controller) windowText(req Request) string {
	if req.Name != RecordName(req.Cluster, req.Key) {
		return "its failback"
	}
	return c.opts.Window.String() + " or more"
}

// whatMoves says which workloads req rebalances.
func whatMoves(req Request) string {
	switch {
	case req.Resume:
		return "the workloads its record left pending"
	case req.All:
		return "the workloads a fresh reschedule gives replicas on it"
	case req.Name != RecordName(req.Cluster, req.Key):
		return fmt.Sprintf("%d workload(s) displaced by its failure whose eviction ended after the failback, those a fresh reschedule gives replicas on it", len(req.Workloads))
	}
	return fmt.Sprintf("the %d workload(s) displaced by its failure that a fresh reschedule gives replicas on it", len(req.Workloads))
}

// windowOf is how long the recovery of state s must stay healthy, and why.
func (c *Controller) windowOf(s State) (time.Duration, string) {
	if s.Held && c.timing().held() > c.opts.Window {
		return c.timing().held(), fmt.Sprintf("--cooldown: it failed again less than %s after its last failback", c.opts.Cooldown)
	}
	return c.opts.Window, "stabilization window"
}

// failbackRequest is the failback of a recovery when its window is over:
// the workloads the cluster's failure displaced whose eviction is over (or,
// with RebalanceAll, every workload that would gain). Those Karmada is
// still evicting follow once their eviction ends (followUp). c.mu is held.
func (c *Controller) failbackRequest(name, key string) Request {
	req := Request{Cluster: name, Key: key, Name: RecordName(name, key), All: c.opts.RebalanceAll}
	ready, evicting := c.displaced.Of(name)
	for _, d := range ready {
		req.Workloads = append(req.Workloads, d.Workload)
	}
	c.log.Info("workloads displaced by the cluster's failure", "cluster", name, "recovery", key,
		"displaced", len(ready), "stillEvicting", evicting, "rebalanceAll", c.opts.RebalanceAll)
	return req
}

// followUp fails back the workloads whose eviction from cluster ended after
// its failback fired, while that recovery is still the cluster's current
// one. Workloads any record of the recovery lists are not triggered again.
func (c *Controller) followUp(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.states[name]
	cluster, err := c.lister.Get(name)
	if err != nil || c.leading == nil {
		return
	}
	if !Current(s, s.LastKey) || c.observe(cluster).Key != s.LastKey || !c.allowed(name) {
		return
	}
	if s.Phase == PhaseFailingBack || c.runs[name] != nil {
		// After the running failback.
		c.queue.AddAfter(followUpPrefix+name, followUpDelay)
		return
	}
	ready, _ := c.displaced.Of(name)
	if len(ready) == 0 {
		return
	}
	listed, err := c.ledger.Listed(c.leading, name, s.LastKey)
	if err != nil {
		c.log.Warn("cannot read the failback records of the recovery; the workloads whose eviction ended are not failed back", "cluster", name, "err", c.explain(err))
		return
	}
	req := Request{Cluster: name, Key: s.LastKey}
	var bindings []string
	for _, d := range ready {
		if listed[WorkloadIdentity(d.Workload)] {
			continue
		}
		req.Workloads = append(req.Workloads, d.Workload)
		bindings = append(bindings, d.Binding)
	}
	if len(req.Workloads) == 0 {
		return
	}
	req.Name = FollowUpName(name, s.LastKey, bindings)
	c.log.Info("failing back workloads whose eviction ended after the failback", "cluster", name, "recovery", s.LastKey, "workloads", len(req.Workloads))
	c.start(cluster, req)
}

func reasonOr(reason, fallback string) string {
	if reason == "" {
		return fallback
	}
	return reason
}

func (c *Controller) allowed(name string) bool {
	if len(c.opts.Clusters) == 0 {
		return true
	}
	for _, n := range c.opts.Clusters {
		if n == name {
			return true
		}
	}
	return false
}

func (c *Controller) countStabilizing() {
	n := 0
	for _, s := range c.states {
		if s.Phase == PhaseStabilizing {
			n++
		}
	}
	c.opts.Metrics.setStabilizing(n)
}

// lead acts on recoveries until ctx ends: it picks up what a previous
// leader left (records with pending workloads, windows over), deletes
// records past their TTL, and fails back as windows end.
func (c *Controller) lead(ctx context.Context) {
	c.mu.Lock()
	c.leading = ctx
	c.mu.Unlock()
	c.log.Info("acting on recoveries", "window", c.opts.Window.String(), "dryRun", c.opts.DryRun)
	c.takeOver(ctx)
	// The leader's view, for `failback status`; waited for with the runs,
	// so that nothing is published once the Lease is given up.
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.publish(ctx)
	}()

	ticker := time.NewTicker(sweepInterval)
	defer ticker.Stop()
	for {
		if c.opts.Leftovers != nil {
			c.opts.Leftovers(ctx)
		}
		if !c.opts.DryRun {
			if deleted, err := c.ledger.Sweep(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("cannot delete failback records past their ttl", "err", c.explain(err))
			} else if len(deleted) > 0 {
				c.log.Info("deleted failback records past their ttl", "records", deleted)
			}
		}
		select {
		case <-ctx.Done():
			why := "this daemon lost the Lease"
			if c.stopping != nil && c.stopping.Err() != nil {
				why = "the daemon is stopping"
			}
			c.mu.Lock()
			c.leading = nil
			for _, run := range c.runs {
				if run.aborted == "" {
					run.aborted = why
				}
				run.cancel()
			}
			c.mu.Unlock()
			// The runs stop starting workloads; wait for those in flight
			// to be recorded before the Lease goes.
			c.wg.Wait()
			return
		case <-ticker.C:
		}
	}
}

// takeOver resumes the failbacks a previous leader (or this process before
// a restart) left: records with pending workloads of a recovery that is
// still the cluster's current one, and clusters whose window ended while
// this replica stood by.
func (c *Controller) takeOver(ctx context.Context) {
	entries, err := c.ledger.List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("cannot read the failback records; failbacks stopped by a restart are not resumed", "err", c.explain(err))
		}
		entries = nil
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	recorded := map[string]bool{}
	for _, e := range entries {
		recorded[e.Name] = true
		if !e.Unfinished || e.Cluster == "" || e.BudgetSpent {
			continue
		}
		cluster, err := c.lister.Get(e.Cluster)
		if err != nil {
			continue
		}
		h := c.observe(cluster)
		if !h.Healthy || h.Key != e.Key {
			c.log.Info("leaving an unfinished failback record alone: its recovery is over (the cluster failed again since)", "record", e.Name, "cluster", e.Cluster)
			continue
		}
		if c.runs[e.Cluster] != nil {
			continue
		}
		c.log.Info("resuming an unfinished failback", "record", e.Name, "cluster", e.Cluster)
		if !e.FollowUp {
			c.states[e.Cluster] = c.states[e.Cluster].carry(State{Phase: PhaseFailingBack, Since: now, Key: e.Key})
		}
		c.start(cluster, Request{Cluster: e.Cluster, Key: e.Key, Name: e.Name, Resume: true})
	}
	for name, s := range c.states {
		if s.Phase != PhaseFailingBack || c.runs[name] != nil {
			continue
		}
		if recorded[RecordName(name, s.Key)] {
			// The previous leader ran it to the end.
			c.states[name] = Finished(s, now)
			continue
		}
		cluster, err := c.lister.Get(name)
		if err != nil {
			continue
		}
		if c.opts.TTL != nil && now.Sub(s.Since) >= time.Duration(*c.opts.TTL)*time.Second {
			// No record, but one may have come and gone with its TTL.
			c.states[name] = Finished(s, now)
			continue
		}
		c.start(cluster, c.failbackRequest(name, s.Key))
	}
	// Windows that ended while standing by fire now; evictions that ended
	// after a failback follow it.
	for name, s := range c.states {
		switch s.Phase {
		case PhaseStabilizing:
			c.queue.Add(name)
		case PhaseSteady:
			if s.LastKey != "" {
				c.queue.Add(followUpPrefix + name)
			}
		}
	}
}

// start runs the failback req in the background. c.mu is held.
func (c *Controller) start(cluster *clusterv1alpha1.Cluster, req Request) {
	name := cluster.Name
	if c.runs[name] != nil {
		return
	}
	key, resume := req.Key, req.Resume
	// The run ends only when told why (cancel after setting aborted): when
	// the leadership ends, lead() says so before cancelling.
	ctx, cancel := context.WithCancel(context.WithoutCancel(c.leading))
	run := &activeRun{key: key, record: req.Name, cancel: cancel, done: make(chan struct{})}
	c.runs[name] = run
	c.keepTolerations(name)
	req.Progress = func(s waves.Status) { c.opts.Metrics.setInFlight(name, s.InFlight) }
	log := c.log.With("cluster", name, "record", req.Name)
	verb := "failing back"
	if c.opts.DryRun {
		verb = "dry run: would fail back"
	}
	log.Info(verb, "recovery", key, "resume", resume)
	if !c.opts.DryRun {
		c.event(cluster, corev1.EventTypeNormal, ReasonStarted, fmt.Sprintf(
			"Cluster %s stayed Ready and untainted for %s: rebalancing %s, recorded as workloadrebalancer %s", name, c.windowText(req), whatMoves(req), req.Name))
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(run.done)
		if !resume && !c.opts.DryRun {
			if exists, err := c.ledger.Exists(ctx, req.Name); err == nil && exists {
				req.Resume = true
			}
		}
		report, err := c.runner.Failback(ctx, req)
		c.finish(cluster, run, req, report, err)
	}()
}

// finish reports a failback and closes its state: the record marked when
// the failure budget ended it, the state machine told, then the summary's
// log line, metrics and events written.
func (c *Controller) finish(cluster *clusterv1alpha1.Cluster, run *activeRun, req Request, report *Report, err error) {
	if report != nil && report.BudgetSpent && !report.DryRun {
		if err := c.ledger.MarkBudgetSpent(context.Background(), req.Name); err != nil {
			c.log.Warn("cannot mark the failback record as stopped by the failure budget; a restarted daemon would resume it", "record", req.Name, "err", c.explain(err))
		}
	}
	if report != nil && !report.DryRun && len(report.Rows) > 0 {
		// The record says how each workload moved, not only that a
		// trigger was written.
		noteCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		moves, err := c.ledger.NoteMoves(noteCtx, req.Name, report.Rows, report.OneWrite)
		cancel()
		if err != nil {
			c.log.Warn("cannot note on the failback record how its workloads moved", "record", req.Name, "err", c.explain(err))
		} else {
			report.Moves = moves.Text()
		}
	}
	c.mu.Lock()
	aborted := run.aborted
	delete(c.runs, req.Cluster)
	if s := c.states[req.Cluster]; s.Phase == PhaseFailingBack && s.Key == req.Key && aborted == "" {
		c.states[req.Cluster] = Finished(s, time.Now())
	}
	c.mu.Unlock()

	if report == nil {
		report = &Report{}
	}
	c.write(cluster, summarize(req, report, err, aborted))
}

// write logs a failback's summary, counts it in the metrics and records its
// events. Events go out with the daemon's own context: a stopping daemon
// still says what it did.
func (c *Controller) write(cluster *clusterv1alpha1.Cluster, s summary) {
	log := c.log.With("cluster", s.req.Cluster, "record", s.req.Name)
	for _, w := range s.dryRun {
		log.Info("dry run: would rebalance", "workload", w.workload, "binding", w.binding)
	}
	for _, e := range s.bindings {
		c.opts.Events.WriteEvent(context.Background(), e.ref, e.eventType, e.reason, e.message)
	}
	if !s.isDryRun {
		c.opts.Metrics.failback(s.req.Cluster, s.result, s.done, s.failed)
	}
	log.Log(context.Background(), s.level, s.logMessage, s.attrs...)
	if s.event != nil {
		c.event(cluster, s.event.eventType, s.event.reason, s.event.message)
	}
}

// event records an event on a Cluster; failing to is logged, not fatal.
func (c *Controller) event(cluster *clusterv1alpha1.Cluster, eventType, reason, message string) {
	if err := c.opts.Events.WriteEvent(context.Background(), cluster, eventType, reason, message); err != nil {
		c.log.Warn("event not recorded", "cluster", cluster.Name, "reason", reason, "err", c.explain(err))
	}
}

func bindingReference(row rebalance.Row) *corev1.ObjectReference {
	ref := &corev1.ObjectReference{APIVersion: workv1alpha2.SchemeGroupVersion.String(), Kind: workv1alpha2.ResourceKindResourceBinding,
		Namespace: row.Workload.Namespace, Name: row.Binding}
	if row.Workload.Namespace == "" {
		ref.Kind = workv1alpha2.ResourceKindClusterResourceBinding
	}
	if ref.Name == "" {
		ref.Name = rebalance.BindingNameFor(row.Workload)
	}
	return ref
}

func workloadText(w rebalance.Workload) string {
	if w.Namespace == "" {
		return w.Kind + "/" + w.Name
	}
	return w.Kind + "/" + w.Namespace + "/" + w.Name
}

func rowProblem(row rebalance.Row) string {
	parts := []string{}
	for _, s := range []string{string(row.Reason), row.ClientReason, string(row.Observation.Outcome), row.Observation.Reason, row.Message} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "failed"
	}
	return strings.Join(parts, ": ")
}

// listOne is the cheapest list: one item, to check access.
var listOne = metav1.ListOptions{Limit: 1}

// namespaceText names the namespace the daemon follows, for messages.
func namespaceText(ns string) string {
	if ns == "" {
		return " in all namespaces"
	}
	return " in namespace " + ns
}
