package predict

import (
	"cmp"
	"slices"
	"strings"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// Verdict says what a fresh reschedule would do to one workload.
type Verdict string

const (
	// WouldMove: the predicted placement differs from the current one.
	WouldMove Verdict = "WouldMove"
	// Unchanged: the predicted placement equals the current one.
	Unchanged Verdict = "Unchanged"
	// CannotFit: the scheduler would fail (no cluster fits, or the clusters
	// lack room for the replicas).
	CannotFit Verdict = "CannotFit"
	// CannotPredict: the scheduler would consult something the client cannot
	// see, or data it needs is missing; nothing is guessed.
	CannotPredict Verdict = "CannotPredict"
	// CannotChange: a fresh reschedule cannot change this placement: the
	// scheduler ignores the trigger, or the division does not depend on
	// the clusters' free capacity (Duplicated, static weights).
	CannotChange Verdict = "CannotChange"
)

// Verdicts lists every verdict in the order summaries print them.
var Verdicts = []Verdict{WouldMove, Unchanged, CannotFit, CannotPredict, CannotChange}

// Reasons of a verdict besides those of rebalance.PreTriggerCheck
// (SchedulingSuspended, ForeignScheduler, NoPolicy, NotScheduledYet) and of
// rebalance.UnchangeableReason (Duplicated, StaticWeight, NonWorkload).
const (
	ReasonFreshReschedule = "FreshReschedule"
	ReasonBindingNotFound = "BindingNotFound"
	ReasonBindingMismatch = "BindingMismatch"
	ReasonBindingDeleting = "BindingDeleting"
	// ReasonHeldByMove: a make-before-break move of this plugin holds the
	// binding's scheduling (kubectl rebalance recover).
	ReasonHeldByMove         = "HeldByMove"
	ReasonSchedulerEstimator = "SchedulerEstimator"
	ReasonClusterNotReady    = "ClusterNotReady"
	ReasonNoResourceSummary  = "NoResourceSummary"
	ReasonSchedulerError     = "SchedulerError"
	ReasonNoClusterFit       = "NoClusterFit"
	ReasonUnschedulable      = "Unschedulable"
)

// Division names how a placement divides replicas, as karmada's assignment
// strategies do: Duplicated, Aggregated, DynamicWeight, StaticWeight; "" for
// a binding that was not read.
type Division string

// The divisions Karmada's scheduler knows.
const (
	DivisionDuplicated    Division = "Duplicated"
	DivisionAggregated    Division = "Aggregated"
	DivisionDynamicWeight Division = "DynamicWeight"
	DivisionStaticWeight  Division = "StaticWeight"
)

// DivisionOf returns the division a placement asks for, as the scheduler
// reads it. A binding that is not a workload (no replicas) is propagated
// whole, like Duplicated.
func DivisionOf(placement *policyv1alpha1.Placement, spec *workv1alpha2.ResourceBindingSpec) Division {
	if placement == nil {
		return ""
	}
	if spec != nil && !spec.IsWorkload() {
		return DivisionDuplicated
	}
	if placement.ReplicaSchedulingType() == policyv1alpha1.ReplicaSchedulingTypeDuplicated {
		return DivisionDuplicated
	}
	rs := placement.ReplicaScheduling
	if rs.ReplicaDivisionPreference == policyv1alpha1.ReplicaDivisionPreferenceAggregated {
		return DivisionAggregated
	}
	if rs.WeightPreference != nil && rs.WeightPreference.DynamicWeight != "" {
		return DivisionDynamicWeight + "(" + Division(rs.WeightPreference.DynamicWeight) + ")"
	}
	return DivisionStaticWeight
}

// IsDynamic reports whether a division depends on the clusters' free
// capacity, the only case where a fresh reschedule can change a placement.
func (d Division) IsDynamic() bool {
	return d == DivisionAggregated || (len(d) > len(DivisionDynamicWeight) && d[:len(DivisionDynamicWeight)] == DivisionDynamicWeight)
}

// Prediction is the verdict for one workload.
type Prediction struct {
	// Workload is the resource template.
	Workload rebalance.Workload
	// Binding is the name of its binding (in the workload's namespace).
	Binding string
	// Division is the placement's division ("" when no binding was read).
	Division Division
	// Before is the binding's spec.clusters now.
	Before []workv1alpha2.TargetCluster
	// Predicted is the placement a fresh reschedule would write; it equals
	// Before when nothing would change or nothing can be predicted.
	Predicted []workv1alpha2.TargetCluster
	// Alternative, when set, is the other placement karmada-scheduler may
	// leave: it may run the reschedule twice when its cache has not yet seen
	// the status of the first pass, and Fresh mode then starts from the first
	// pass's placement. Which one stays is a race inside the scheduler.
	Alternative []workv1alpha2.TargetCluster
	// Possible, for a CannotPredict (BatchTiming) verdict, lists the
	// placements the scheduler may write depending on when the members report
	// the batch's other moves; the first is the one with no report landed.
	// For a CannotPredict (ReleaseDependent) verdict it lists the placements
	// the releases the detection cannot tell apart may write, the newest
	// release's first, when they are known.
	Possible [][]workv1alpha2.TargetCluster
	// Moves counts the replicas that would start on another cluster: the sum
	// over clusters of the predicted increase.
	Moves int32
	// Verdict and Reason classify the prediction; Message explains it.
	Verdict Verdict
	Reason  string
	Message string
}

// Gains returns how many more replicas cluster would have after the move
// (negative when it would lose some).
func (p *Prediction) Gains(cluster string) int32 {
	return replicasOn(p.Predicted, cluster) - replicasOn(p.Before, cluster)
}

// Changes reports whether the predicted placement differs from the current one.
func (p *Prediction) Changes() bool {
	return !SamePlacement(p.Before, p.Predicted)
}

// SamePlacement reports whether two placements give every cluster the same
// number of replicas, whatever their order; clusters with zero replicas count
// as absent.
func SamePlacement(a, b []workv1alpha2.TargetCluster) bool {
	ma, mb := placementMap(a), placementMap(b)
	if len(ma) != len(mb) {
		return false
	}
	for k, v := range ma {
		if mb[k] != v {
			return false
		}
	}
	return true
}

// moves counts the replicas that would start on another cluster.
func moves(before, predicted []workv1alpha2.TargetCluster) int32 {
	var n int32
	mb := placementMap(before)
	for name, r := range placementMap(predicted) {
		if d := r - mb[name]; d > 0 {
			n += d
		}
	}
	return n
}

func placementMap(p []workv1alpha2.TargetCluster) map[string]int32 {
	m := make(map[string]int32, len(p))
	for _, tc := range p {
		if tc.Replicas != 0 {
			m[tc.Name] += tc.Replicas
		}
	}
	return m
}

func replicasOn(p []workv1alpha2.TargetCluster, cluster string) int32 {
	var n int32
	for _, tc := range p {
		if tc.Name == cluster {
			n += tc.Replicas
		}
	}
	return n
}

// ClusterChange is the sum over the predictions of one cluster's replicas.
type ClusterChange struct {
	Name              string
	Before, Predicted int32
}

// Delta is Predicted - Before.
func (c ClusterChange) Delta() int32 { return c.Predicted - c.Before }

// ByCluster sums the replicas per cluster before and after, in cluster name order.
func ByCluster(predictions []Prediction) []ClusterChange {
	sums := map[string]*ClusterChange{}
	add := func(p []workv1alpha2.TargetCluster, after bool) {
		for _, tc := range p {
			c := sums[tc.Name]
			if c == nil {
				c = &ClusterChange{Name: tc.Name}
				sums[tc.Name] = c
			}
			if after {
				c.Predicted += tc.Replicas
			} else {
				c.Before += tc.Replicas
			}
		}
	}
	for i := range predictions {
		add(predictions[i].Before, false)
		add(predictions[i].Predicted, true)
	}
	out := make([]ClusterChange, 0, len(sums))
	for _, c := range sums {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b ClusterChange) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Count is how many predictions got one verdict, by reason.
type Count struct {
	Verdict  Verdict
	Total    int
	ByReason map[string]int
}

// Counts tallies the predictions per verdict, in the order of Verdicts.
func Counts(predictions []Prediction) []Count {
	idx := map[Verdict]*Count{}
	out := make([]Count, len(Verdicts))
	for i, v := range Verdicts {
		out[i] = Count{Verdict: v, ByReason: map[string]int{}}
		idx[v] = &out[i]
	}
	for _, p := range predictions {
		c := idx[p.Verdict]
		if c == nil {
			continue
		}
		c.Total++
		if p.Reason != "" {
			c.ByReason[p.Reason]++
		}
	}
	return out
}

// Selection narrows a plan, or a run, to some workloads.
type Selection struct {
	// Clusters keeps the workloads whose predicted placement gives one of
	// these clusters more replicas than it has now.
	Clusters []string
	// ChangedOnly keeps the workloads whose predicted placement differs
	// from the current one.
	ChangedOnly bool
}

// IsZero reports whether the selection keeps everything.
func (s Selection) IsZero() bool { return len(s.Clusters) == 0 && !s.ChangedOnly }

// Keeps reports whether the selection keeps p. Only a WouldMove verdict can
// be kept: a workload whose placement cannot be predicted is never selected
// by a guess, and one the scheduler would fail to place (NoClusterFit
// empties its placement) is never selected for a move. A workload whose
// division depends on the batch's timing (BatchTiming) is kept when every
// placement it may get is: that is no guess.
func (s Selection) Keeps(p *Prediction) bool {
	if s.IsZero() {
		return true
	}
	if p.Verdict == CannotPredict && p.Reason == ReasonBatchTiming && len(p.Possible) > 0 {
		for _, placement := range p.Possible {
			q := Prediction{Verdict: WouldMove, Before: p.Before, Predicted: placement}
			if !q.Changes() || !s.Keeps(&q) {
				return false
			}
		}
		return true
	}
	if p.Verdict != WouldMove {
		return false
	}
	if len(s.Clusters) == 0 {
		return true
	}
	for _, c := range s.Clusters {
		if p.Gains(c) > 0 {
			return true
		}
	}
	return false
}

// Select returns the predictions s keeps, in order.
func Select(predictions []Prediction, s Selection) []Prediction {
	if s.IsZero() {
		return predictions
	}
	out := make([]Prediction, 0, len(predictions))
	for i := range predictions {
		if s.Keeps(&predictions[i]) {
			out = append(out, predictions[i])
		}
	}
	return out
}

// Overcommit is a cluster that the predictions give more new replicas than
// it has room for.
type Overcommit struct {
	Cluster string
	// Gain is the sum over the predictions of the replicas the cluster gains.
	Gain int64
	// Room is the pods the cluster's resource summary has room for.
	Room int64
}

// Overcommits finds the clusters whose predicted gains exceed the pods their
// resource summaries have room for. A karmada-scheduler without overcommit
// protection places a batch there all the same, since every decision reads
// the same summaries; the extra pods stay Pending in the member.
func Overcommits(clusters []*clusterv1alpha1.Cluster, predictions []Prediction) []Overcommit {
	gains := map[string]int64{}
	for i := range predictions {
		p := &predictions[i]
		before := placementMap(p.Before)
		for name, n := range placementMap(p.Predicted) {
			if d := n - before[name]; d > 0 {
				gains[name] += int64(d)
			}
		}
	}
	var out []Overcommit
	for _, c := range clusters {
		s := c.Status.ResourceSummary
		if gains[c.Name] == 0 || s == nil {
			continue
		}
		room := s.Allocatable.Pods().Value() - s.Allocated.Pods().Value() - s.Allocating.Pods().Value()
		if gains[c.Name] > room {
			out = append(out, Overcommit{Cluster: c.Name, Gain: gains[c.Name], Room: max(room, 0)})
		}
	}
	slices.SortFunc(out, func(a, b Overcommit) int { return strings.Compare(a.Cluster, b.Cluster) })
	return out
}
