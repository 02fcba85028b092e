package predict

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"
	"github.com/karmada-io/karmada/pkg/util"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Input is everything a prediction reads, as the API returned it.
type Input struct {
	// Clusters are the member Cluster objects.
	Clusters []*clusterv1alpha1.Cluster
	// Bindings holds the bindings by Key. A ClusterResourceBinding is held
	// in ResourceBinding shape with an empty namespace.
	Bindings map[string]*workv1alpha2.ResourceBinding
	// Estimated names the clusters for which karmada-scheduler consults a
	// karmada-scheduler-estimator.
	Estimated []string
	// Accurate holds, by cluster, what the estimators of Estimated answer
	// (package estimate computes it from the members' nodes and pods). A
	// workload whose placement depends on free capacity is predicted only
	// when every cluster of Estimated has one.
	Accurate map[string]AccurateEstimator
	// Unreadable says, by cluster, why a cluster of Estimated has no entry
	// in Accurate and what would fix it.
	Unreadable map[string]error
}

// Key is how Input.Bindings indexes a binding: "namespace/name", or "name"
// for a cluster-scoped one.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Options tune Predict.
type Options struct {
	// OvercommitProtection predicts for a karmada-scheduler running with the
	// SchedulingOvercommitProtection feature gate (alpha in v1.18): each
	// decision of a batch deducts its whole footprint from the clusters it
	// lands on, in Karmada's own assumption cache, before the next one is
	// predicted. Without the gate (Karmada's default) the scheduler's
	// decisions do not consume capacity: each one reads the clusters' resource
	// summaries, which the members refresh only every status update period
	// (10 s by default), so a batch sees the same free space; Overcommits
	// tells where that exceeds a cluster's room.
	OvercommitProtection bool
	// Release is the Karmada release of the control plane, which decides
	// where its scheduler differs from the pinned one (release.go); nil
	// predicts with the pinned scheduler's rules (v1.18).
	Release *karmadaversion.Info
	// Eventual makes each decision of a batch allocate what a cluster gains
	// and free what it loses before the next one, as the members report once
	// the pods moved: the view of a scheduler much slower than the status
	// updates.
	Eventual bool
	// InFlight is how many trigger writes the rebalance has in flight (its
	// --burst): karmada-scheduler takes a batch in the order the writes land,
	// so a workload may be decided after any workload before it in the batch
	// and after at most InFlight-1 behind it. 0 means any order.
	InFlight int
}

// Predict predicts a fresh reschedule of every target, one prediction per
// distinct workload, in the order a rebalance writes the triggers (the
// WorkloadRebalancer order, see rebalance.SortKey), which is the order the
// scheduler takes them in.
func Predict(ctx context.Context, in Input, targets []rebalance.Target, opts Options) ([]Prediction, error) {
	marked, forget := withAccurate(in.Clusters, in.Accurate)
	defer forget()
	sched, err := newKarmadaScheduler(marked)
	if err != nil {
		return nil, fmt.Errorf("set up karmada's scheduler: %w", err)
	}
	defer sched.done()
	clusters := make(map[string]*clusterv1alpha1.Cluster, len(in.Clusters))
	for _, c := range in.Clusters {
		clusters[c.Name] = c
	}
	targets = distinct(targets)
	out := make([]Prediction, len(targets))
	rows := make([]batchRow, len(targets))
	// The timing check models a scheduler that keeps no account of its
	// decisions (the default gates); the other two modes are models of their
	// own of what the batch consumes, each decision changing what the next
	// one sees.
	independent := !opts.OvercommitProtection && !opts.Eventual
	if !independent {
		for i, t := range targets {
			if err := ctx.Err(); err != nil {
				return out[:i], err
			}
			rows[i].index = i
			out[i] = predictOne(ctx, sched, in, clusters, t, opts, &rows[i])
		}
		return out, nil
	}
	// Each decision reads the clusters as they are now, whatever came
	// before it: the rows are predicted side by side.
	scheds, err := sched.schedulers(workersFor(len(targets)))
	if err != nil {
		return nil, fmt.Errorf("set up karmada's scheduler: %w", err)
	}
	// scheds[0] is sched, given back above.
	defer func() {
		for _, s := range scheds[1:] {
			s.done()
		}
	}()
	if err := eachRow(ctx, scheds, len(targets), func(s *karmadaScheduler, i int) {
		rows[i].index = i
		out[i] = predictOne(ctx, s, in, clusters, targets[i], opts, &rows[i])
	}); err != nil {
		return nil, err
	}
	if len(out) > 1 {
		if err := checkBatchTiming(ctx, scheds, rows, out, opts); err != nil {
			return out, err
		}
	}
	return out, nil
}

// distinct drops repeated workloads (keeping a known uid) and sorts them.
func distinct(targets []rebalance.Target) []rebalance.Target {
	seen := make(map[rebalance.Workload]int, len(targets))
	out := make([]rebalance.Target, 0, len(targets))
	for _, t := range targets {
		if i, ok := seen[t.Workload]; ok {
			if out[i].UID == "" {
				out[i].UID = t.UID
			}
			continue
		}
		seen[t.Workload] = len(out)
		out = append(out, t)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return rebalance.CompareWorkloads(out[i].Workload, out[j].Workload) < 0
	})
	return out
}

// predictOne predicts one workload.
// It fills row with what the batch timing check needs (batch.go).
func predictOne(ctx context.Context, sched *karmadaScheduler, in Input, clusters map[string]*clusterv1alpha1.Cluster, t rebalance.Target, opts Options, row *batchRow) Prediction {
	w := t.Workload
	p := Prediction{Workload: w, Binding: rebalance.BindingNameFor(w)}
	b := in.Bindings[Key(w.Namespace, p.Binding)]
	if b == nil {
		return p.verdict(CannotPredict, ReasonBindingNotFound, rebalance.BindingRef(w)+" not found")
	}
	if err := rebalance.VerifyBinding(w, t.UID, b.Name, b.Spec.Resource, b.OwnerReferences); err != nil {
		return p.verdict(CannotPredict, ReasonBindingMismatch, err.Error())
	}
	spec, status := &b.Spec, &b.Status
	p.Before = spec.Clusters
	p.Predicted = spec.Clusters
	p.Division = DivisionOf(spec.Placement, spec)

	if b.DeletionTimestamp != nil {
		return p.verdict(CannotChange, ReasonBindingDeleting, rebalance.BindingRef(w)+" is being deleted")
	}
	at := metav1.Now()
	if status.LastScheduledTime != nil {
		at = metav1.NewTime(status.LastScheduledTime.Add(time.Second))
	}
	if _, held := b.Annotations[rebalance.HandoverAnnotation]; held && spec.SchedulingSuspended() {
		// Not a suspension of the user's: a move of this plugin that has
		// not ended, or whose process died.
		state := "its ledger cannot be read"
		if head, ok := rebalance.ReadHandoverHead(b.Annotations); ok {
			state = head.Describe(time.Now())
		}
		return p.verdict(CannotChange, ReasonHeldByMove, fmt.Sprintf("%s is held by an unfinished make-before-break move of kubectl rebalance (%s; annotation %s); "+
			"`kubectl rebalance recover` recovers it once no process is moving it", rebalance.BindingRef(w), state, rebalance.HandoverAnnotation))
	}
	if obs := rebalance.PreTriggerCheck(b.Labels, *spec, *status, at); obs.Outcome != rebalance.OutcomeNone {
		return p.verdict(CannotChange, obs.Reason, obs.Message)
	}
	if spec.Placement == nil {
		return p.verdict(CannotPredict, ReasonSchedulerError, rebalance.BindingRef(w)+" has no spec.placement")
	}
	capacityMatters := CapacityDependent(b)
	if capacityMatters {
		if blind := unestimated(in); len(blind) > 0 {
			return p.verdict(CannotPredict, ReasonSchedulerEstimator, blindMessage(in, blind))
		}
		if missing := withoutSummary(in.Clusters); len(missing) > 0 {
			return p.verdict(CannotPredict, ReasonNoResourceSummary, fmt.Sprintf(
				"cluster %s reports no status.resourceSummary yet; wait for its first status update", strings.Join(missing, ", ")))
		}
	}

	fresh := freshTrigger(spec, status)
	if opts.Release != nil {
		if d := filterDifferences(opts.Release, fresh, status, clusters); d != nil {
			return p.verdict(CannotPredict, d.reason, d.message)
		}
	}
	result, cleared, err := sched.schedule(ctx, opts.Release, fresh, status)
	if err != nil {
		return p.failed(err, cleared)
	}
	p.Predicted = result
	row.spec, row.status, row.primary = spec, status, result
	if capacityMatters {
		if notReady := notReadyIn(result, clusters); len(notReady) > 0 {
			p.Predicted = spec.Clusters
			return p.verdict(CannotPredict, ReasonClusterNotReady, fmt.Sprintf(
				"cluster %s is not Ready: its resource summary may be stale and the scheduler's answer cannot be known", strings.Join(notReady, ", ")))
		}
		// karmada-scheduler writes the placement and the status in two
		// requests, and takes the binding up again for the first write. If its
		// cache does not hold the status yet by then, it runs a second Fresh
		// pass that starts from the first pass's placement: a race inside the
		// scheduler, so both outcomes are shown when they differ.
		second := fresh.DeepCopy()
		second.Clusters = result
		if again, _, err := sched.schedule(ctx, opts.Release, second, status); err == nil && !SamePlacement(again, result) {
			p.Alternative = again
		}
	}
	switch {
	case opts.OvercommitProtection:
		sched.assume(b.Namespace, b.Name, fresh, result)
	case opts.Eventual:
		sched.consume(fresh, spec.Clusters, result)
	}
	p.Moves = moves(p.Before, p.Predicted)
	row.checked = capacityMatters

	changes := p.Changes()
	switch {
	case p.Division.IsDynamic() && changes:
		return p.verdict(WouldMove, ReasonFreshReschedule, fmt.Sprintf("a fresh %s division over the clusters' free capacity", p.Division))
	case p.Division.IsDynamic():
		return p.verdict(Unchanged, ReasonFreshReschedule, "a fresh division gives the same placement")
	case changes:
		return p.verdict(WouldMove, rebalance.UnchangeableReason(spec), fmt.Sprintf(
			"%s placements do not follow free capacity, but the clusters or the policy changed since the last schedule, so the next scheduling pass changes it", p.Division))
	}
	return p.verdict(CannotChange, rebalance.UnchangeableReason(spec), fmt.Sprintf(
		"a %s placement does not depend on free capacity: a fresh reschedule places it as before", p.Division))
}

func (p Prediction) verdict(v Verdict, reason, message string) Prediction {
	p.Verdict, p.Reason, p.Message = v, reason, message
	return p
}

// failed classifies a scheduling error. When no cluster fits the scheduler
// empties the placement; for other errors it keeps it.
func (p Prediction) failed(err error, cleared bool) Prediction {
	var unschedulable *framework.UnschedulableError
	var release *releaseError
	switch {
	case errors.As(err, &release):
		p.Possible = release.possible
		return p.verdict(CannotPredict, release.reason, release.message)
	case cleared:
		p.Predicted = nil
		p.Moves = 0
		return p.verdict(CannotFit, ReasonNoClusterFit, err.Error()+"; the scheduler would empty the placement")
	case errors.As(err, &unschedulable):
		return p.verdict(CannotFit, ReasonUnschedulable, err.Error())
	}
	return p.verdict(CannotPredict, ReasonSchedulerError, err.Error())
}

// unestimated names the clusters whose karmada-scheduler-estimator the
// scheduler consults but whose answers are not known.
func unestimated(in Input) []string {
	var out []string
	for _, name := range in.Estimated {
		if in.Accurate[name] == nil {
			out = append(out, name)
		}
	}
	return out
}

// blindMessage says which members' estimators cannot be answered for, why,
// and what would fix it.
func blindMessage(in Input, blind []string) string {
	reasons := make([]string, 0, len(blind))
	for _, name := range blind {
		if err := in.Unreadable[name]; err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		reasons = append(reasons, "the nodes and pods of member cluster "+name+" were not read")
	}
	return fmt.Sprintf("karmada-scheduler asks the karmada-scheduler-estimator of %s for free capacity, which cannot be computed: %s",
		strings.Join(blind, ", "), strings.Join(reasons, "; "))
}

// withoutSummary names the Ready clusters that report no resource summary.
func withoutSummary(clusters []*clusterv1alpha1.Cluster) []string {
	var out []string
	for _, c := range clusters {
		if c.Status.ResourceSummary == nil && util.IsClusterReady(&c.Status) {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return out
}

// notReadyIn names the clusters of a placement that are not Ready.
func notReadyIn(result []workv1alpha2.TargetCluster, clusters map[string]*clusterv1alpha1.Cluster) []string {
	var out []string
	for _, tc := range result {
		if c := clusters[tc.Name]; c != nil && !util.IsClusterReady(&c.Status) {
			out = append(out, tc.Name)
		}
	}
	return out
}
