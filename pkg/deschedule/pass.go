package deschedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Defaults of the original karmada-descheduler.
const (
	DefaultUnschedulableThreshold = 5 * time.Minute
	DefaultDeschedulingInterval   = 2 * time.Minute
)

const (
	defaultConcurrency  = 4
	defaultWriteTimeout = 30 * time.Second
	// Up to this many namespaces a member cluster is listed namespace by
	// namespace; beyond it one cluster-wide LIST per kind is cheaper.
	maxNamespacedLists = 3
)

// DryRun selects whether a pass changes bindings: the same three modes as
// a rebalance (package rebalance defines them once).
type DryRun = rebalance.DryRun

const (
	// DryRunNone writes the new assignments and records events.
	DryRunNone = rebalance.DryRunNone
	// DryRunClient computes the plan and writes nothing.
	DryRunClient = rebalance.DryRunClient
	// DryRunServer sends the updates with dryRun=All, so that admission and
	// optimistic concurrency are checked, and persists nothing.
	DryRunServer = rebalance.DryRunServer
)

// ParseDryRun accepts the values of kubectl's --dry-run flag; "" means none.
func ParseDryRun(s string) (DryRun, error) {
	switch DryRun(s) {
	case "", DryRunNone:
		return DryRunNone, nil
	case DryRunClient, DryRunServer:
		return DryRun(s), nil
	}
	return "", fmt.Errorf("invalid dry-run value %q, use none, client or server", s)
}

// Options tunes a Descheduler. The zero value behaves like karmada-descheduler
// with a 0 threshold; use DefaultUnschedulableThreshold for the original's.
type Options struct {
	// Namespace limits the pass to bindings of one namespace; "" means all.
	Namespace string
	// Kinds limits the pass to bindings of these template kinds; nil
	// considers every kind.
	Kinds []schema.GroupKind
	// WorkloadSelector selects bindings by the labels of their resource
	// template (kubectl selector syntax); "" selects all.
	WorkloadSelector string
	// Templates lists the resource templates of the candidates, for their
	// opt-out annotation and WorkloadSelector. Required.
	Templates TemplateLister
	// ExcludedNamespaces are never descheduled.
	ExcludedNamespaces []string
	// UnschedulableThreshold is how long a pod must have been unschedulable
	// to count; negative counts as zero.
	UnschedulableThreshold time.Duration
	// DryRun selects whether the pass writes; "" means DryRunNone.
	DryRun DryRun
	// MaxReplicasPerPass caps the replicas moved in one pass; 0 is no cap.
	MaxReplicasPerPass int32
	// MaxReplicasPerCluster caps the replicas moved away from any one member
	// cluster in one pass; 0 is no cap.
	MaxReplicasPerCluster int32
	// Concurrency is how many member clusters are listed at once; 0 means 4.
	Concurrency int
	// WriteTimeout bounds each binding update and event write; 0 means 30s.
	// Writes are not cut short by the pass context, so a stop request never
	// interrupts one half-way.
	WriteTimeout time.Duration
	// Now is the clock used for the unschedulable threshold; nil is time.Now.
	Now func() time.Time
	// RetryBouncedAfter is how long a cluster whose evicted replicas the
	// scheduler put straight back is left alone; 0 means
	// DefaultRetryBouncedAfter.
	RetryBouncedAfter time.Duration
}

// Descheduler runs descheduling passes against one Karmada control plane.
type Descheduler struct {
	karmada karmadaclientset.Interface
	pods    PodSource
	events  EventWriter
	opts    Options
	exclude map[string]bool
	// kinds is the set of Options.Kinds, nil for every kind.
	kinds map[schema.GroupKind]bool
	// workloadSelector is the parsed WorkloadSelector, nil when empty.
	workloadSelector labels.Selector
}

// New returns a Descheduler that reads and writes bindings through karmada,
// reads member clusters through pods and records events through events (nil
// records none). It rejects invalid options.
func New(karmada karmadaclientset.Interface, pods PodSource, events EventWriter, opts Options) (*Descheduler, error) {
	if karmada == nil || pods == nil {
		return nil, errors.New("descheduler needs a Karmada client and a pod source")
	}
	dryRun, err := ParseDryRun(string(opts.DryRun))
	if err != nil {
		return nil, err
	}
	opts.DryRun = dryRun
	var workloadSelector labels.Selector
	if opts.WorkloadSelector != "" {
		if workloadSelector, err = labels.Parse(opts.WorkloadSelector); err != nil {
			return nil, fmt.Errorf("invalid workload label selector %q, use the kubectl selector syntax (for example app=web,tier!=db): %w", opts.WorkloadSelector, err)
		}
	}
	if opts.Templates == nil {
		return nil, errors.New("descheduler needs a TemplateLister to read the templates' opt-out annotation")
	}
	if opts.MaxReplicasPerPass < 0 || opts.MaxReplicasPerCluster < 0 {
		return nil, errors.New("replica limits must be 0 (no limit) or positive")
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = defaultConcurrency
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = defaultWriteTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RetryBouncedAfter <= 0 {
		opts.RetryBouncedAfter = DefaultRetryBouncedAfter
	}
	exclude := make(map[string]bool, len(opts.ExcludedNamespaces))
	for _, ns := range opts.ExcludedNamespaces {
		exclude[ns] = true
	}
	if opts.Namespace != "" && exclude[opts.Namespace] {
		return nil, fmt.Errorf("namespace %s is both selected and excluded, drop one of the two", opts.Namespace)
	}
	var kinds map[schema.GroupKind]bool
	if opts.Kinds != nil {
		kinds = make(map[schema.GroupKind]bool, len(opts.Kinds))
		for _, gk := range opts.Kinds {
			kinds[gk] = true
		}
	}
	return &Descheduler{karmada: karmada, pods: pods, events: events, opts: opts, exclude: exclude, kinds: kinds, workloadSelector: workloadSelector}, nil
}

// Outcome is what a pass did with one candidate binding.
type Outcome string

const (
	// OutcomeDescheduled: the new assignment was written.
	OutcomeDescheduled Outcome = "descheduled"
	// OutcomeDryRun: the new assignment would have been written.
	OutcomeDryRun Outcome = "dry-run"
	// OutcomeUnchanged: no cluster had replicas to evict.
	OutcomeUnchanged Outcome = "unchanged"
	// OutcomeBlocked: a candidate cluster could not be counted, so nothing changed.
	OutcomeBlocked Outcome = "blocked"
	// OutcomeLimited: limits left nothing to evict in this pass.
	OutcomeLimited Outcome = "limited"
	// OutcomeSkipped: on re-reading after a conflict the binding was gone
	// or no longer a candidate.
	OutcomeSkipped Outcome = "skipped"
	// OutcomeFailed: the write failed; see Err.
	OutcomeFailed Outcome = "failed"
	// OutcomeStopped: the pass was stopped before this binding was written.
	OutcomeStopped Outcome = "stopped"
	// OutcomeBouncedBack: the scheduler put replicas evicted by an earlier
	// pass back on their cluster, where they are unschedulable again; the
	// pass leaves them, as evicting again would loop.
	OutcomeBouncedBack Outcome = "bounced-back"
)

// BindingResult is what one pass observed and did for one candidate binding.
type BindingResult struct {
	// Namespace and Name identify the ResourceBinding.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Resource is the binding's resource template.
	Resource workv1alpha2.ObjectReference `json:"resource"`
	// Rows holds one row per target cluster, in spec.clusters order.
	Rows []ClusterRow `json:"clusters"`
	// Evicted is the number of replicas moved (or, in dry-run, to be moved).
	Evicted int32 `json:"evicted"`
	// Outcome summarises the binding.
	Outcome Outcome `json:"outcome"`
	// Message is the event message of a descheduled binding, or why nothing
	// was written.
	Message string `json:"message,omitempty"`
	// Err is set when Outcome is OutcomeFailed.
	Err error `json:"-"`
	// EventErr is set when an event could not be recorded.
	EventErr error `json:"-"`
	// Retried is true when a conflict made the pass re-read the binding.
	Retried bool `json:"retried,omitempty"`
	// NewlyBounced lists the clusters this pass found bounced back for the
	// first time (and recorded a warning event for).
	NewlyBounced []string `json:"newlyBounced,omitempty"`
}

// SkippedBinding is a listed binding the descheduler does not act on.
type SkippedBinding struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Code classifies Reason.
	Code   SkipCode `json:"code"`
	Reason string   `json:"reason"`
}

// PassResult is the outcome of one pass.
type PassResult struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// DryRun is the dry-run mode the pass ran with.
	DryRun DryRun `json:"dryRun"`
	// UnschedulableThreshold is the threshold the pass counted pods with.
	UnschedulableThreshold time.Duration `json:"-"`
	// Listed counts the bindings listed, excluded namespaces left out.
	Listed int `json:"listed"`
	// Skipped lists the listed bindings that are not candidates.
	Skipped []SkippedBinding `json:"skipped,omitempty"`
	// Bindings holds the candidates, ordered by namespace and name.
	Bindings []BindingResult `json:"bindings"`
	// ClusterErrors holds, per member cluster, why it could not be listed.
	ClusterErrors map[string]error `json:"-"`
	// TemplateErrors holds, per template kind (Kind.group), why its
	// templates could not be listed; its bindings are skipped.
	TemplateErrors map[string]error `json:"-"`
	// Descheduled counts bindings written (or, in dry-run, to be written).
	Descheduled int `json:"descheduled"`
	// EvictedReplicas sums the replicas moved (or to be moved).
	EvictedReplicas int32 `json:"evictedReplicas"`
	// Failed counts bindings whose write failed.
	Failed int `json:"failed"`
	// Stopped is true when the pass context ended before every write was done.
	Stopped bool `json:"stopped,omitempty"`
}

// Summary is a one-line account of the pass, for logs and the end of a table.
func (r *PassResult) Summary() string {
	var b strings.Builder
	verb := "descheduled"
	if r.DryRun != DryRunNone && r.DryRun != "" {
		verb = "would deschedule"
	}
	fmt.Fprintf(&b, "%d binding(s) listed, %d candidate(s), %s %d binding(s) moving %d replica(s)",
		r.Listed, len(r.Bindings), verb, r.Descheduled, r.EvictedReplicas)
	if n := r.count(OutcomeBlocked); n > 0 {
		fmt.Fprintf(&b, ", %d blocked", n)
	}
	if n := r.count(OutcomeLimited); n > 0 {
		fmt.Fprintf(&b, ", %d held back by limits", n)
	}
	if n := r.bouncedBack(); n > 0 {
		fmt.Fprintf(&b, ", %d bounced back (karmada-scheduler put evicted replicas back where they cannot run: give it karmada-scheduler-estimator)", n)
	}
	if r.Failed > 0 {
		fmt.Fprintf(&b, ", %d failed", r.Failed)
	}
	if n := len(r.ClusterErrors); n > 0 {
		fmt.Fprintf(&b, ", %d member cluster(s) unreachable", n)
	}
	if n := len(r.TemplateErrors); n > 0 {
		fmt.Fprintf(&b, ", templates of %d kind(s) unreadable", n)
	}
	if r.Stopped {
		b.WriteString(", stopped early")
	}
	if r.DryRun != DryRunNone && r.DryRun != "" {
		fmt.Fprintf(&b, " (dry run: %s)", r.DryRun)
	}
	if !r.End.IsZero() {
		fmt.Fprintf(&b, " in %s", r.End.Sub(r.Start).Round(time.Millisecond))
	}
	return b.String()
}

// bouncedBack counts the binding clusters left alone because their evicted
// replicas came back.
func (r *PassResult) bouncedBack() int {
	n := 0
	for i := range r.Bindings {
		for _, row := range r.Bindings[i].Rows {
			if row.Action == ActionBouncedBack {
				n++
			}
		}
	}
	return n
}

func (r *PassResult) count(o Outcome) int {
	n := 0
	for i := range r.Bindings {
		if r.Bindings[i].Outcome == o {
			n++
		}
	}
	return n
}

// Err joins the failures of the pass: unreachable member clusters and
// failed writes. It is nil when everything that was attempted worked.
func (r *PassResult) Err() error {
	var errs []error
	clusters := make([]string, 0, len(r.ClusterErrors))
	for c := range r.ClusterErrors {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	for _, c := range clusters {
		errs = append(errs, r.ClusterErrors[c])
	}
	for _, k := range slices.Sorted(maps.Keys(r.TemplateErrors)) {
		errs = append(errs, r.TemplateErrors[k])
	}
	for i := range r.Bindings {
		if r.Bindings[i].Err != nil {
			errs = append(errs, r.Bindings[i].Err)
		}
	}
	return errors.Join(errs...)
}

// Pass runs one descheduling pass: list candidate bindings, list the member
// clusters they need counted, compute each binding's plan and write it.
//
// It returns an error only when the bindings cannot be listed; every other
// failure is reported in the result. When ctx ends, the pass finishes the
// write in progress, writes nothing more and marks the rest OutcomeStopped.
func (d *Descheduler) Pass(ctx context.Context) (*PassResult, error) {
	result := &PassResult{Start: time.Now(), DryRun: d.opts.DryRun, UnschedulableThreshold: max(d.opts.UnschedulableThreshold, 0),
		ClusterErrors: map[string]error{}, TemplateErrors: map[string]error{}}
	defer func() { result.End = time.Now() }()

	candidates, err := d.listCandidates(ctx, result)
	if err != nil {
		return nil, err
	}
	now := d.opts.Now()
	counter := d.countClusters(ctx, candidates, result)
	budget := newBudget(d.opts.MaxReplicasPerPass, d.opts.MaxReplicasPerCluster)

	for _, rb := range candidates {
		br := BindingResult{Namespace: rb.Namespace, Name: rb.Name, Resource: rb.Spec.Resource}
		br.Rows = budget.limit(ComputePlan(counter.inputs(rb, d.opts.UnschedulableThreshold, now, d.opts.RetryBouncedAfter)))
		if ctx.Err() != nil {
			result.Stopped = true
			br.Outcome, br.Message = OutcomeStopped, "pass stopped before this binding was written"
			result.Bindings = append(result.Bindings, br)
			continue
		}
		d.apply(ctx, rb, &br, counter, budget, now)
		switch br.Outcome {
		case OutcomeDescheduled, OutcomeDryRun:
			result.Descheduled++
			result.EvictedReplicas += br.Evicted
		case OutcomeFailed:
			result.Failed++
		}
		result.Bindings = append(result.Bindings, br)
	}
	return result, nil
}

// listCandidates lists the bindings in scope, records the ones skipped and
// returns the candidates sorted by namespace and name.
func (d *Descheduler) listCandidates(ctx context.Context, result *PassResult) ([]*workv1alpha2.ResourceBinding, error) {
	client := d.karmada.WorkV1alpha2().ResourceBindings(d.opts.Namespace)
	bindings, err := listAll[workv1alpha2.ResourceBinding](ctx, defaultPageSize, metav1.ListOptions{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return client.List(ctx, o) })
	if err != nil {
		return nil, fmt.Errorf("cannot list resourcebindings in %s: %w", d.scopeWords(), err)
	}
	// In scope: the namespaces and kinds asked for.
	var inScope, checked []*workv1alpha2.ResourceBinding
	codes := map[*workv1alpha2.ResourceBinding]SkipCode{}
	reasons := map[*workv1alpha2.ResourceBinding]string{}
	for i := range bindings {
		rb := &bindings[i]
		if d.exclude[rb.Namespace] || (d.kinds != nil && !d.kinds[resourceKind(rb).GroupKind()]) {
			continue
		}
		inScope = append(inScope, rb)
		if code, why := CandidateCheck(rb); code != "" {
			codes[rb], reasons[rb] = code, why
		} else {
			checked = append(checked, rb)
		}
	}
	// Templates are listed once per kind: of every binding in scope with a
	// selector (which decides the scope), of the candidates otherwise.
	withTemplates := checked
	if d.workloadSelector != nil {
		withTemplates = inScope
	}
	templates := d.listTemplates(ctx, withTemplates)
	if d.workloadSelector != nil {
		for _, err := range templates.errs {
			return nil, fmt.Errorf("cannot select workloads matching %q: %w", d.opts.WorkloadSelector, err)
		}
	}

	var candidates []*workv1alpha2.ResourceBinding
	for _, rb := range inScope {
		tpl, tplErr := templates.template(rb)
		if d.workloadSelector != nil && tpl == nil {
			// Out of scope: a template the selector leaves out.
			continue
		}
		result.Listed++
		if code := codes[rb]; code != "" {
			result.Skipped = append(result.Skipped, SkippedBinding{Namespace: rb.Namespace, Name: rb.Name, Code: code, Reason: reasons[rb]})
			continue
		}
		skip := func(code SkipCode, why string) {
			result.Skipped = append(result.Skipped, SkippedBinding{Namespace: rb.Namespace, Name: rb.Name, Code: code, Reason: why})
		}
		switch {
		case tplErr != nil:
			result.TemplateErrors[kindWords(resourceKind(rb).GroupKind())] = tplErr
			skip(SkipTemplateUnlisted, "its template's opt-out annotation could not be read: "+tplErr.Error())
			continue
		case tpl == nil:
			skip(SkipTemplateNotFound, fmt.Sprintf("resource template %s %s/%s not found in the Karmada apiserver",
				kindWords(resourceKind(rb).GroupKind()), rb.Spec.Resource.Namespace, rb.Spec.Resource.Name))
			continue
		}
		if out, why := optedOut(tpl); out {
			skip(SkipOptedOut, why)
			continue
		}
		candidates = append(candidates, rb)
	}
	sort.Slice(candidates, func(i, j int) bool {
		if candidates[i].Namespace != candidates[j].Namespace {
			return candidates[i].Namespace < candidates[j].Namespace
		}
		return candidates[i].Name < candidates[j].Name
	})
	return candidates, nil
}

// clusterCounter holds what the pass learnt from member clusters.
type clusterCounter struct {
	indexes map[string]*ClusterIndex
	errs    map[string]error
}

// countClusters lists, concurrently, every member cluster in which some
// candidate binding has fewer ready replicas than assigned, once per pass.
func (d *Descheduler) countClusters(ctx context.Context, candidates []*workv1alpha2.ResourceBinding, result *PassResult) *clusterCounter {
	namespaces := map[string]map[string]bool{}
	kinds := map[string]map[schema.GroupKind]schema.GroupVersionKind{}
	for _, rb := range candidates {
		ready := rebalance.ReadyReplicas(rb.Spec, rb.Status)
		gvk := resourceKind(rb)
		for _, tc := range rb.Spec.Clusters {
			in := ClusterInput{Cluster: tc.Name, Spec: tc.Replicas, Ready: readyPointer(ready, tc.Name)}
			if !in.IsCandidate() {
				continue
			}
			if namespaces[tc.Name] == nil {
				namespaces[tc.Name] = map[string]bool{}
				kinds[tc.Name] = map[schema.GroupKind]schema.GroupVersionKind{}
			}
			namespaces[tc.Name][rb.Spec.Resource.Namespace] = true
			if _, ok := kinds[tc.Name][gvk.GroupKind()]; !ok {
				kinds[tc.Name][gvk.GroupKind()] = gvk
			}
		}
	}

	counter := &clusterCounter{indexes: map[string]*ClusterIndex{}, errs: map[string]error{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, d.opts.Concurrency)
	for cluster, nsSet := range namespaces {
		req := ListRequest{Namespaces: d.listScope(nsSet), Workloads: slices.SortedFunc(maps.Values(kinds[cluster]), compareGVK)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			objs, err := d.pods.ListClusterObjects(ctx, cluster, req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				counter.errs[cluster] = err
				// A stop request is not the member cluster's fault.
				if ctx.Err() == nil {
					result.ClusterErrors[cluster] = err
				}
				return
			}
			counter.indexes[cluster] = NewClusterIndex(cluster, objs)
		}()
	}
	wg.Wait()
	return counter
}

// listScope picks the namespaces to list in a member cluster.
func (d *Descheduler) listScope(nsSet map[string]bool) []string {
	if d.opts.Namespace != "" {
		return []string{d.opts.Namespace}
	}
	if len(nsSet) > maxNamespacedLists {
		return nil
	}
	scope := make([]string, 0, len(nsSet))
	for ns := range nsSet {
		scope = append(scope, ns)
	}
	slices.Sort(scope)
	return scope
}

// inputs builds the formula inputs of rb from the pass's cluster indexes and
// the binding's record of recent evictions.
func (c *clusterCounter) inputs(rb *workv1alpha2.ResourceBinding, threshold time.Duration, now time.Time, retryBouncedAfter time.Duration) []ClusterInput {
	ready := rebalance.ReadyReplicas(rb.Spec, rb.Status)
	evictions := ReadEvictions(rb)
	ref := rb.Spec.Resource
	kind := resourceKind(rb).GroupKind()
	inputs := make([]ClusterInput, 0, len(rb.Spec.Clusters))
	for _, tc := range rb.Spec.Clusters {
		in := ClusterInput{Cluster: tc.Name, Spec: tc.Replicas, Ready: readyPointer(ready, tc.Name),
			LastEviction: evictions.bounceCandidate(tc.Name, now, retryBouncedAfter)}
		if in.IsCandidate() {
			switch ix, ok := c.indexes[tc.Name]; {
			case ok:
				in.Unschedulable, in.CountErr = ix.CountUnschedulable(kind, ref.Namespace, ref.Name, threshold, ix.Now(now))
			case c.errs[tc.Name] != nil:
				in.CountErr = c.errs[tc.Name]
			default:
				// The binding changed after the clusters were listed.
				in.CountErr = fmt.Errorf("member cluster %s was not listed in this pass, it is counted next pass", tc.Name)
			}
		}
		inputs = append(inputs, in)
	}
	return inputs
}

// apply writes the plan in br.Rows to rb, re-reading and recomputing once
// on a conflict, and records the events. The second attempt is written out
// rather than left to retry.RetryOnConflict: it must first re-read the
// binding and decide again (still a candidate? what plan now?), and each
// of those answers ends the binding with an outcome of its own.
func (d *Descheduler) apply(ctx context.Context, rb *workv1alpha2.ResourceBinding, br *BindingResult,
	counter *clusterCounter, budget *budget, now time.Time) {
	// The write outlives a stop request so that it is never cut half-way;
	// the timeout still bounds a hung API server.
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.WriteTimeout)
	defer cancel()

	for attempt := 0; ; attempt++ {
		br.Evicted = TotalEvicted(br.Rows)
		evictions := ReadEvictions(rb)
		bounced := evictions.newlyBounced(br.Rows)
		if br.Evicted == 0 {
			br.Outcome, br.Message = quietOutcome(br.Rows, evictions)
			// A first bounce is still written down, so that its warning is
			// recorded once and not on every pass.
			if len(bounced) == 0 || d.opts.DryRun == DryRunClient {
				return
			}
		} else {
			br.Message = SucceedMessage(br.Rows)
			if d.opts.DryRun == DryRunClient {
				br.Outcome = OutcomeDryRun
				budget.spend(br.Rows)
				return
			}
		}
		next, err := d.planned(rb, br.Rows, now)
		var updated *workv1alpha2.ResourceBinding
		if err == nil {
			updated, err = d.update(writeCtx, rb, next)
		}
		if err == nil {
			d.written(writeCtx, updated, br, budget, bounced, evictions)
			return
		}
		if landed := d.landed(writeCtx, rb, next, err); landed != nil {
			// Only the answer was lost: the write is this pass's one write.
			d.written(writeCtx, landed, br, budget, bounced, evictions)
			return
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			d.fail(writeCtx, rb, br, err)
			return
		}
		// Someone else (usually the scheduler) changed the binding since it
		// was listed: decide again on the fresh copy, once.
		br.Retried = true
		fresh, getErr := d.karmada.WorkV1alpha2().ResourceBindings(rb.Namespace).Get(writeCtx, rb.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(getErr) {
			br.Outcome, br.Message = OutcomeSkipped, "binding was deleted during the pass"
			return
		}
		if getErr != nil {
			d.fail(writeCtx, rb, br, getErr)
			return
		}
		if ok, why := IsCandidate(fresh); !ok {
			br.Outcome, br.Message = OutcomeSkipped, "binding changed during the pass: "+why
			return
		}
		rb = fresh
		br.Resource = fresh.Spec.Resource
		br.Rows = budget.limit(ComputePlan(counter.inputs(fresh, d.opts.UnschedulableThreshold, now, d.opts.RetryBouncedAfter)))
	}
}

// written finishes a binding whose update went through: it spends the
// budget, sets the outcome and records the events.
func (d *Descheduler) written(ctx context.Context, updated *workv1alpha2.ResourceBinding, br *BindingResult, budget *budget,
	bounced []string, evictions Evictions) {
	if br.Evicted > 0 {
		budget.spend(br.Rows)
		br.Outcome = OutcomeDescheduled
		if d.opts.DryRun == DryRunServer {
			br.Outcome = OutcomeDryRun
		}
	}
	if d.opts.DryRun != DryRunNone {
		return
	}
	var errs []error
	if br.Evicted > 0 {
		errs = append(errs, d.recordEvents(ctx, updated, corev1.EventTypeNormal, ReasonDescheduleSucceed, br.Message))
	}
	if len(bounced) > 0 {
		br.NewlyBounced = bounced
		errs = append(errs, d.recordEvents(ctx, updated, corev1.EventTypeWarning, ReasonDescheduleBouncedBack, BounceMessage(br.Rows, evictions)))
	}
	br.EventErr = errors.Join(errs...)
}

// planned is rb with spec.clusters set to rows' New values and the
// evictions annotation updated, to be written with rb's resourceVersion as
// precondition. When only the annotation changes, the generation stays and
// the scheduler is not woken.
func (d *Descheduler) planned(rb *workv1alpha2.ResourceBinding, rows []ClusterRow, now time.Time) (*workv1alpha2.ResourceBinding, error) {
	if len(rows) != len(rb.Spec.Clusters) {
		return nil, fmt.Errorf("plan of binding %s/%s does not match its spec.clusters, it is recomputed next pass", rb.Namespace, rb.Name)
	}
	next := rb.DeepCopy()
	for i := range rows {
		next.Spec.Clusters[i].Replicas = rows[i].New
	}
	evictions := ReadEvictions(rb)
	record := evictions.withEvictions(rows, now).markBounced(evictions.newlyBounced(rows), now)
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[EvictionsAnnotation] = record.annotationValue()
	return next, nil
}

// update writes what next changes in rb - the replicas of spec.clusters and
// the evictions annotation - as a JSON patch of those fields alone, with
// rb's resourceVersion as precondition (a binding changed since answers
// Conflict). A full Update would send the binding as our Karmada types
// decode it, and delete on the server every field they do not know (v1.19's
// spec.clusters[].components, for one).
func (d *Descheduler) update(ctx context.Context, rb, next *workv1alpha2.ResourceBinding) (*workv1alpha2.ResourceBinding, error) {
	patch, err := BindingPatch(rb, next)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: EventComponent}
	if d.opts.DryRun == DryRunServer {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return d.karmada.WorkV1alpha2().ResourceBindings(next.Namespace).Patch(ctx, next.Name, types.JSONPatchType, patch, opts)
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// BindingPatch is the JSON patch that turns rb into next where the
// descheduler writes: each spec.clusters entry's replicas (checked to be
// the same cluster at the same index) and the evictions annotation. Its
// resourceVersion operation makes the server refuse it with Conflict when
// the binding changed since rb was read.
func BindingPatch(rb, next *workv1alpha2.ResourceBinding) ([]byte, error) {
	if len(rb.Spec.Clusters) != len(next.Spec.Clusters) {
		return nil, fmt.Errorf("binding %s/%s: the planned spec.clusters has %d entries, the binding %d", rb.Namespace, rb.Name, len(next.Spec.Clusters), len(rb.Spec.Clusters))
	}
	ops := []jsonPatchOp{
		{Op: "test", Path: "/metadata/uid", Value: string(rb.UID)},
		{Op: "replace", Path: "/metadata/resourceVersion", Value: rb.ResourceVersion},
	}
	for i, c := range next.Spec.Clusters {
		if c.Name != rb.Spec.Clusters[i].Name {
			return nil, fmt.Errorf("binding %s/%s: spec.clusters[%d] is %s, the plan has %s", rb.Namespace, rb.Name, i, rb.Spec.Clusters[i].Name, c.Name)
		}
		if c.Replicas == rb.Spec.Clusters[i].Replicas {
			continue
		}
		path := fmt.Sprintf("/spec/clusters/%d", i)
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: path + "/name", Value: c.Name},
			jsonPatchOp{Op: "replace", Path: path + "/replicas", Value: c.Replicas})
	}
	if value, ok := next.Annotations[EvictionsAnnotation]; ok && value != rb.Annotations[EvictionsAnnotation] {
		if rb.Annotations == nil {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{EvictionsAnnotation: value}})
		} else {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + escapePointer(EvictionsAnnotation), Value: value})
		}
	}
	return json.Marshal(ops)
}

// escapePointer escapes a JSON pointer token (RFC 6901).
func escapePointer(token string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(token)
}

// landed tells whether the update of rb to sent went through although err
// came back instead of its answer: a reset or a timeout after the server
// applied it, or a 5xx from something between. It re-reads the binding and
// returns it when it holds the evictions record sent, which names the
// clusters lowered and the second of this pass; the scheduler may have
// changed spec.clusters since. Without this the write would be reported
// failed (a Warning event, a failed binding) while the replicas moved, and
// its Succeed event never recorded. An answer saying the server refused the
// write (4xx) is believed.
func (d *Descheduler) landed(ctx context.Context, rb, sent *workv1alpha2.ResourceBinding, err error) *workv1alpha2.ResourceBinding {
	if sent == nil || d.opts.DryRun != DryRunNone || !mayHaveLanded(err) {
		return nil
	}
	record := sent.Annotations[EvictionsAnnotation]
	if rb.Annotations[EvictionsAnnotation] == record {
		return nil // the binding held this record already: nothing tells the write apart
	}
	fresh, getErr := d.karmada.WorkV1alpha2().ResourceBindings(rb.Namespace).Get(ctx, rb.Name, metav1.GetOptions{})
	if getErr != nil || fresh.UID != rb.UID || fresh.Annotations[EvictionsAnnotation] != record {
		return nil
	}
	return fresh
}

// mayHaveLanded reports whether a write that returned err may have been
// applied: there was no answer, or an answer of 500 or more.
func mayHaveLanded(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == 0 || code >= http.StatusInternalServerError
	}
	return !errors.Is(err, context.Canceled)
}

// fail records a failed write on br and as Warning events.
func (d *Descheduler) fail(ctx context.Context, rb *workv1alpha2.ResourceBinding, br *BindingResult, err error) {
	br.Outcome = OutcomeFailed
	br.Err = fmt.Errorf("cannot update resourcebinding %s/%s, it is retried next pass: %w", rb.Namespace, rb.Name, err)
	if d.opts.DryRun == DryRunNone {
		// The original's event text is the bare API error.
		br.EventErr = d.recordEvents(ctx, rb, corev1.EventTypeWarning, ReasonDescheduleFailed, err.Error())
	}
}

// recordEvents records the same event on the binding and on its template.
func (d *Descheduler) recordEvents(ctx context.Context, rb *workv1alpha2.ResourceBinding, eventType, reason, message string) error {
	if d.events == nil {
		return nil
	}
	return errors.Join(
		d.events.WriteEvent(ctx, rb, eventType, reason, message),
		d.events.WriteEvent(ctx, templateReference(rb), eventType, reason, message),
	)
}

// quietOutcome explains why a binding with nothing to evict is left alone.
func quietOutcome(rows []ClusterRow, evictions Evictions) (Outcome, string) {
	if msg := BounceMessage(rows, evictions); msg != "" {
		return OutcomeBouncedBack, msg
	}
	for _, r := range rows {
		if r.Action == ActionCountFailed {
			return OutcomeBlocked, fmt.Sprintf("cluster %s could not be counted: %v", r.Cluster, r.Err)
		}
	}
	for _, r := range rows {
		if r.Action == ActionLimited {
			return OutcomeLimited, "replica limits reached for this pass"
		}
	}
	for _, r := range rows {
		if r.Action == ActionOverSpec {
			return OutcomeUnchanged, fmt.Sprintf("cluster %s has more unschedulable pods than assigned replicas, which Karmada leaves alone", r.Cluster)
		}
	}
	if allReady(rows) {
		return OutcomeUnchanged, "every cluster has all its replicas ready"
	}
	return OutcomeUnchanged, "no replicas unschedulable past the threshold"
}

// budget enforces MaxReplicasPerPass and MaxReplicasPerCluster. Replicas are
// only spent once a write succeeds (or would, in dry-run).
type budget struct {
	perPass, perCluster int32
	spentPass           int32
	spentCluster        map[string]int32
}

func newBudget(perPass, perCluster int32) *budget {
	return &budget{perPass: perPass, perCluster: perCluster, spentCluster: map[string]int32{}}
}

// limit lowers the evictions of rows to what is left of the budget, in row
// order, turning cut rows into ActionLimited. It returns rows.
func (b *budget) limit(rows []ClusterRow) []ClusterRow {
	passLeft := int32(-1)
	if b.perPass > 0 {
		passLeft = b.perPass - b.spentPass
	}
	for i := range rows {
		r := &rows[i]
		want := r.Evicted()
		if r.Action != ActionEvict || want <= 0 {
			continue
		}
		allowed := want
		if passLeft >= 0 {
			allowed = min(allowed, passLeft)
		}
		if b.perCluster > 0 {
			allowed = min(allowed, b.perCluster-b.spentCluster[r.Cluster])
		}
		allowed = max(allowed, 0)
		if allowed < want {
			r.New, r.Action = r.Spec-allowed, ActionLimited
		}
		if passLeft >= 0 {
			passLeft -= allowed
		}
	}
	return rows
}

func (b *budget) spend(rows []ClusterRow) {
	for _, r := range rows {
		n := r.Evicted()
		b.spentPass += n
		b.spentCluster[r.Cluster] += n
	}
}

// compareGVK orders kinds for stable list requests.
func compareGVK(a, b schema.GroupVersionKind) int {
	return strings.Compare(a.String(), b.String())
}
