package predict

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	estimatorclient "github.com/karmada-io/karmada/pkg/estimator/client"
	"github.com/karmada-io/karmada/pkg/scheduler/core"
	"github.com/karmada-io/karmada/pkg/scheduler/core/spreadconstraint"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"
	"github.com/karmada-io/karmada/pkg/util"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// This file makes a prediction true to the Karmada release the control plane
// runs where its scheduler decides differently from the pinned one (v1.18):
//
//   - how replicas are divided among clusters: by the Webster method from
//     v1.16, by floor shares and remainders to the largest weights before;
//   - how the general estimator counts the room of a cluster that reports
//     resource models: simulated model nodes of at most 110 pods from v1.18,
//     grade counts times replicas per grade minimum before;
//   - whether a cluster of the current placement that no longer serves the
//     workload's API stays a candidate, and how a zone selector matches a
//     cluster of several zones.
//
// The first two are reproduced: candidates, scores and selection come from
// Karmada's own framework and core.SelectClusters, the Webster division from
// core.AssignReplicas, and only the older rules the pinned module no longer
// holds are written here. Where the rule depends on a release the schema
// cannot tell apart, or where the release breaks a tie at random, the
// workload cannot be predicted and the message says why. The last two only
// mark the workloads they affect.

// Reasons of a CannotPredict verdict that come from the release.
const (
	// ReasonReleaseDependent: the release decides differently from the
	// pinned scheduler in a way that cannot be reproduced, or the placement
	// depends on a release the control plane cannot be told from.
	ReasonReleaseDependent = "ReleaseDependent"
	// ReasonRandomTie: the release breaks a tie between clusters at random.
	ReasonRandomTie = "RandomTie"
)

// releaseError says why a release's placement cannot be predicted.
type releaseError struct {
	reason, message string
	// possible, when known, lists every placement the releases in question
	// may write: a make-before-break move stages them all.
	possible [][]workv1alpha2.TargetCluster
}

func (e *releaseError) Error() string { return e.message }

// releaseName names the detected release for a message.
func releaseName(info *karmadaversion.Info) string {
	s := "this control plane runs Karmada " + info.Range()
	if info.Evidence != "" {
		s += " (" + info.Evidence + ")"
	}
	return s
}

// filterDifferences finds what the release's filters decide differently from
// the pinned ones for this binding; it returns nil when nothing does.
func filterDifferences(info *karmadaversion.Info, spec *workv1alpha2.ResourceBindingSpec, status *workv1alpha2.ResourceBindingStatus, clusters map[string]*clusterv1alpha1.Cluster) *releaseError {
	if keeps := info.KeepsScheduledClustersWithoutAPI(); !keeps.Known || !keeps.Yes {
		gvk := schema.FromAPIVersionAndKind(spec.Resource.APIVersion, spec.Resource.Kind)
		for _, tc := range spec.Clusters {
			c := clusters[tc.Name]
			if c == nil || c.APIEnablement(gvk) != clusterv1alpha1.APIDisabled {
				continue
			}
			return &releaseError{reason: ReasonReleaseDependent, message: fmt.Sprintf(
				"cluster %s no longer serves %s %s: Karmada v1.13 and older drop it from the placement, v1.16 and newer keep it, and %s",
				tc.Name, spec.Resource.APIVersion, spec.Resource.Kind, releaseName(info))}
		}
	}
	if anyZone := info.ZoneAffinityMatchesAnyZone(); !anyZone.Known || !anyZone.Yes {
		for _, affinity := range affinitiesInEffect(spec, status) {
			if name, ok := zoneMatchDiffers(affinity, clusters); ok {
				return &releaseError{reason: ReasonReleaseDependent, message: fmt.Sprintf(
					"cluster %s has several zones and the placement selects zones with In: Karmada v1.18 and newer match it when any of its zones is listed, older releases only when all are, and %s",
					name, releaseName(info))}
			}
		}
	}
	return nil
}

// affinitiesInEffect returns the cluster affinity the scheduler applies, or
// every clusterAffinities group (the one it applies depends on the pass).
func affinitiesInEffect(spec *workv1alpha2.ResourceBindingSpec, _ *workv1alpha2.ResourceBindingStatus) []policyv1alpha1.ClusterAffinity {
	if spec.Placement.ClusterAffinity != nil {
		return []policyv1alpha1.ClusterAffinity{*spec.Placement.ClusterAffinity}
	}
	out := make([]policyv1alpha1.ClusterAffinity, 0, len(spec.Placement.ClusterAffinities))
	for _, term := range spec.Placement.ClusterAffinities {
		out = append(out, term.ClusterAffinity)
	}
	return out
}

// zoneMatchDiffers names a cluster whose match of an In zone selector depends
// on whether any or all of its zones must be listed.
func zoneMatchDiffers(affinity policyv1alpha1.ClusterAffinity, clusters map[string]*clusterv1alpha1.Cluster) (string, bool) {
	if affinity.FieldSelector == nil {
		return "", false
	}
	names := make([]string, 0, len(clusters))
	for name := range clusters {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, expr := range affinity.FieldSelector.MatchExpressions {
		if expr.Key != util.ZoneField || expr.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		for _, name := range names {
			zones := clusters[name].Spec.Zones
			if len(zones) < 2 {
				continue
			}
			listed := 0
			for _, z := range zones {
				if slices.Contains(expr.Values, z) {
					listed++
				}
			}
			if listed > 0 && listed < len(zones) {
				return name, true
			}
		}
	}
	return "", false
}

// forRelease returns the placement the release's scheduler writes for a
// binding the pinned scheduler placed as pinned (both in Fresh mode). status
// carries the clusterAffinities group that placed it.
func (s *karmadaScheduler) forRelease(ctx context.Context, info *karmadaversion.Info, spec *workv1alpha2.ResourceBindingSpec, status *workv1alpha2.ResourceBindingStatus, pinned []workv1alpha2.TargetCluster) ([]workv1alpha2.TargetCluster, error) {
	strategy := strategyOf(spec)
	if strategy == "" {
		return pinned, nil
	}
	webster := info.DividesByWebster()
	modelNodes := info.EstimatesOnModelNodes()
	if webster.Known && webster.Yes && modelNodes.Known && modelNodes.Yes {
		return pinned, nil
	}

	candidates, err := s.candidates(ctx, spec, status)
	if err != nil || len(candidates) == 0 {
		// The pinned pass succeeded on the same clusters; this cannot fail
		// unless the framework does, and then the pinned answer is all there is.
		return pinned, nil
	}
	estimated := false
	if !modelNodes.Known || !modelNodes.Yes {
		changed, err := s.olderEstimates(spec, candidates, info, modelNodes.Known)
		if err != nil {
			return nil, err
		}
		estimated = changed
		if estimated && len(spec.Placement.SpreadConstraints) > 0 {
			return nil, &releaseError{reason: ReasonReleaseDependent, message: fmt.Sprintf(
				"the clusters' room for these replicas differs between Karmada releases and the placement has spread constraints, which select clusters by that room; %s", releaseName(info))}
		}
	}

	var byWebster []workv1alpha2.TargetCluster
	if !webster.Known || webster.Yes {
		byWebster = pinned
		if estimated {
			if byWebster, err = core.AssignReplicas(candidates, spec, status); err != nil {
				return nil, err
			}
		}
		if webster.Known {
			return byWebster, nil
		}
	}
	byRemainders, err := divideByRemainders(strategy, candidates, spec)
	if webster.Known {
		return byRemainders, err
	}
	var tie *releaseError
	if errors.As(err, &tie) {
		// The older rule leaves it to chance, the newer one may apply: which
		// one does is what cannot be told.
		dependent := &releaseError{reason: ReasonReleaseDependent, message: fmt.Sprintf(
			"Karmada v1.16 and newer divide the replicas as %s (Webster method); %s; and %s",
			placementText(byWebster), tie.message, releaseName(info))}
		if byWebster != nil && tie.possible != nil {
			dependent.possible = append([][]workv1alpha2.TargetCluster{byWebster}, tie.possible...)
		}
		return nil, dependent
	}
	if err != nil {
		return nil, err
	}
	if SamePlacement(byWebster, byRemainders) {
		return byWebster, nil
	}
	dependent := &releaseError{reason: ReasonReleaseDependent, message: fmt.Sprintf(
		"Karmada v1.16 and newer divide the replicas as %s (Webster method), older releases as %s, and %s",
		placementText(byWebster), placementText(byRemainders), releaseName(info))}
	if byWebster != nil {
		dependent.possible = [][]workv1alpha2.TargetCluster{byWebster, byRemainders}
	}
	return nil, dependent
}

// Strategies whose division differs between releases.
const (
	strategyAggregated    = "Aggregated"
	strategyDynamicWeight = "DynamicWeight"
	strategyStaticWeight  = "StaticWeight"
)

// strategyOf names how the scheduler divides a workload's replicas, or ""
// when it does not divide them.
func strategyOf(spec *workv1alpha2.ResourceBindingSpec) string {
	if !spec.IsWorkload() || spec.Placement.ReplicaSchedulingType() != policyv1alpha1.ReplicaSchedulingTypeDivided {
		return ""
	}
	rs := spec.Placement.ReplicaScheduling
	switch rs.ReplicaDivisionPreference {
	case policyv1alpha1.ReplicaDivisionPreferenceAggregated:
		return strategyAggregated
	case policyv1alpha1.ReplicaDivisionPreferenceWeighted:
		if rs.WeightPreference != nil && rs.WeightPreference.DynamicWeight != "" {
			return strategyDynamicWeight
		}
		return strategyStaticWeight
	}
	return ""
}

// candidates runs Karmada's filter and score plugins and its cluster
// selection, as the generic scheduler does before it divides replicas: the
// selected clusters with the replicas each has room for.
func (s *karmadaScheduler) candidates(ctx context.Context, spec *workv1alpha2.ResourceBindingSpec, status *workv1alpha2.ResourceBindingStatus) ([]spreadconstraint.ClusterDetailInfo, error) {
	snapshot := s.cache.Snapshot()
	clusters := make([]*clusterv1alpha1.Cluster, 0, snapshot.NumOfClusters())
	for _, info := range snapshot.GetClusters() {
		clusters = append(clusters, info.Cluster())
	}
	list, err := s.scoreClusters(ctx, clusters, spec, status)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return core.SelectClusters(list, spec.Placement, spec, status, s.cache.AssigningResourceBindings())
}

// scoreClusters runs Karmada's filter plugins over clusters (leaving out
// those being deleted) and its score plugins over the ones that fit, and
// sums each cluster's scores: what the generic scheduler does before it
// selects clusters. It returns no score when no cluster fits.
func (s *karmadaScheduler) scoreClusters(ctx context.Context, clusters []*clusterv1alpha1.Cluster, spec *workv1alpha2.ResourceBindingSpec, status *workv1alpha2.ResourceBindingStatus) (framework.ClusterScoreList, error) {
	var fit []*clusterv1alpha1.Cluster
	for _, c := range clusters {
		if !c.DeletionTimestamp.IsZero() {
			continue
		}
		result := s.framework.RunFilterPlugins(&framework.FilterContext{
			Context: ctx, BindingSpec: spec, BindingStatus: status, Cluster: c,
			ResourceBindingIndexer: s.cache.ResourceBindingIndexer(),
			AssigningBindings:      s.cache.AssigningResourceBindings().GetBindings(),
		})
		if result.IsSuccess() {
			fit = append(fit, c)
		}
	}
	if len(fit) == 0 {
		return nil, nil
	}
	scores, result := s.framework.RunScorePlugins(ctx, spec, fit)
	if result != nil {
		return nil, result.AsError()
	}
	list := make(framework.ClusterScoreList, len(fit))
	for i, c := range fit {
		list[i] = framework.ClusterScore{Cluster: c}
		for _, byCluster := range scores {
			list[i].Score += byCluster[i].Score
		}
	}
	return list, nil
}

// olderEstimates replaces, in candidates, the room the pinned general
// estimator found on each cluster by what releases before v1.18 count, and
// reports whether any changed. When the release is not known to be older
// (known is false) a change is an error that says so.
func (s *karmadaScheduler) olderEstimates(spec *workv1alpha2.ResourceBindingSpec, candidates []spreadconstraint.ClusterDetailInfo, info *karmadaversion.Info, known bool) (bool, error) {
	req := spec.ReplicaRequirements
	if req == nil || len(req.ResourceRequest) == 0 {
		return false, nil
	}
	changed := false
	for i := range candidates {
		c := candidates[i].Cluster
		older, ok := modelEstimateBefore118(c, req)
		if !ok {
			continue
		}
		pinned, err := estimatorclient.NewGeneralEstimator().MaxAvailableReplicas(context.Background(), estimatorclient.ReplicaEstimationRequest{
			Clusters: []*clusterv1alpha1.Cluster{c}, ReplicaRequirements: req})
		if err != nil || len(pinned) != 1 {
			return false, err
		}
		allowed, err := estimatorclient.NewGeneralEstimator().MaxAvailableReplicas(context.Background(), estimatorclient.ReplicaEstimationRequest{
			Clusters: []*clusterv1alpha1.Cluster{c}})
		if err != nil || len(allowed) != 1 {
			return false, err
		}
		room := min(int64(allowed[0].Replicas), older)
		if room == int64(pinned[0].Replicas) {
			continue
		}
		if !known {
			return false, &releaseError{reason: ReasonReleaseDependent, message: fmt.Sprintf(
				"by its resource models cluster %s has room for %d of these replicas on Karmada v1.18 and newer, %d on older releases, and %s",
				c.Name, pinned[0].Replicas, room, releaseName(info))}
		}
		candidates[i].AllocatableReplicas = int32(min(room, math.MaxInt32)) // #nosec G115: bounded above
		candidates[i].AvailableReplicas = room + int64(spec.AssignedReplicasForCluster(c.Name))
		changed = true
	}
	return changed, nil
}

// modelEstimateBefore118 counts the replicas a cluster's resource models
// hold as karmada-scheduler's general estimator did before v1.18: from the
// smallest grade whose minimum covers every requested resource, the nodes
// of each grade times the replicas one grade minimum holds. ok is false when
// the cluster reports no models or a requested resource has none, where
// every release counts from the resource summary instead.
func modelEstimateBefore118(c *clusterv1alpha1.Cluster, req *workv1alpha2.ReplicaRequirements) (int64, bool) {
	summary := c.Status.ResourceSummary
	models := c.Spec.ResourceModels
	if summary == nil || len(summary.AllocatableModelings) == 0 || len(models) == 0 {
		return 0, false
	}
	// The minimum of each resource in each grade, in grade order.
	minimums := map[corev1.ResourceName][]resource.Quantity{}
	for _, m := range models {
		for _, r := range m.Ranges {
			minimums[r.Name] = append(minimums[r.Name], r.Min)
		}
	}
	first := 0
	for name, q := range req.ResourceRequest {
		if q.Value() <= 0 {
			continue
		}
		grades, ok := minimums[name]
		if !ok {
			return 0, false
		}
		idx := slices.IndexFunc(grades, func(m resource.Quantity) bool { return m.Cmp(q) >= 0 })
		if idx < 0 {
			return 0, true
		}
		first = max(first, idx)
	}
	var total int64
	for i := first; i < len(models) && i < len(summary.AllocatableModelings); i++ {
		nodes := int64(summary.AllocatableModelings[i].Count)
		if nodes == 0 {
			continue
		}
		perNode := int64(math.MaxInt64)
		for name, q := range req.ResourceRequest {
			if q.Value() <= 0 || i >= len(minimums[name]) {
				continue
			}
			perNode = min(perNode, amount(name, minimums[name][i])/amount(name, q))
		}
		if perNode == 0 {
			perNode = 1
		}
		if perNode > math.MaxInt64/nodes {
			return math.MaxInt64, true
		}
		total += nodes * perNode
	}
	return total, true
}

// amount is a quantity in the unit the estimator divides by: millicores for
// CPU, whole units for the rest.
func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// share is one cluster's weight in a division before v1.16, and the
// replicas it had before, which break ties of weight.
type share struct {
	name   string
	weight int64
	before int32
}

// divideByRemainders divides the replicas as karmada-scheduler did before
// v1.16. Dynamic divisions weigh each candidate by its room plus the
// replicas it holds (a fresh reschedule); Aggregated keeps the fewest
// clusters of largest weight that hold the replicas. Static weights come
// from the policy, ties broken by the replicas each cluster had.
func divideByRemainders(strategy string, candidates []spreadconstraint.ClusterDetailInfo, spec *workv1alpha2.ResourceBindingSpec) ([]workv1alpha2.TargetCluster, error) {
	var shares []share
	switch strategy {
	case strategyStaticWeight:
		shares = staticShares(candidates, spec)
	default:
		for _, c := range candidates {
			shares = append(shares, share{name: c.Name, weight: c.AvailableReplicas})
		}
		var room int64
		for _, sh := range shares {
			room += sh.weight
		}
		if room < int64(spec.Replicas) {
			return nil, &framework.UnschedulableError{Message: fmt.Sprintf("Clusters available replicas %d are not enough to schedule.", room)}
		}
		sort.SliceStable(shares, func(i, j int) bool { return shares[i].weight > shares[j].weight })
		if strategy == strategyAggregated {
			var sum int64
			for i := range shares {
				if sum += shares[i].weight; sum >= int64(spec.Replicas) {
					if i+1 < len(shares) && shares[i+1].weight == shares[i].weight {
						return nil, &releaseError{reason: ReasonRandomTie, message: fmt.Sprintf(
							"Karmada before v1.16 keeps the fewest clusters of most room, and %s have the same room (%d): which of them it keeps depends on the order it lists clusters in",
							strings.Join(namesWithWeight(shares, shares[i].weight), ", "), shares[i].weight)}
					}
					shares = shares[:i+1]
					break
				}
			}
		}
	}
	result, tied := remainderDivision(spec.Replicas, shares)
	if len(tied) > 0 {
		slices.Sort(tied)
		return nil, &releaseError{reason: ReasonRandomTie, message: fmt.Sprintf(
			"Karmada before v1.16 gives the replicas left after the proportional shares to the clusters of largest weight, and %s weigh the same: it picks among them at random",
			strings.Join(tied, ", ")), possible: tiedOutcomes(spec.Replicas, shares)}
	}
	return result, nil
}

// tiedOutcomes lists placements the older rule may write when the replicas
// left after the proportional shares run out inside a group of equal keys:
// the group's leftovers rotated through its members, so that every member
// gets one more than its share in some placement and not in another. They
// are enough to cover what any random pick starts and keeps.
func tiedOutcomes(n int32, shares []share) [][]workv1alpha2.TargetCluster {
	sorted, floors, left := remainderFloors(n, shares)
	if sorted == nil || left <= 0 || int(left) >= len(sorted) {
		return nil
	}
	edge := sorted[left-1]
	same := func(sh share) bool { return sh.weight == edge.weight && sh.before == edge.before }
	lo := slices.IndexFunc(sorted, same)
	hi := lo
	for hi < len(sorted) && same(sorted[hi]) {
		hi++
	}
	size, inGroup := hi-lo, int(left)-lo
	var out [][]workv1alpha2.TargetCluster
	for turn := range size {
		placement := make([]workv1alpha2.TargetCluster, 0, len(sorted))
		for i, sh := range sorted {
			r := floors[i]
			switch {
			case i < lo:
				r++
			case i < hi && (i-lo-turn+size)%size < inGroup:
				r++
			}
			if r > 0 {
				placement = append(placement, workv1alpha2.TargetCluster{Name: sh.name, Replicas: r})
			}
		}
		out = append(out, placement)
	}
	return out
}

// staticShares weighs each candidate by the largest static weight that
// selects it; with no weights, every candidate weighs 1.
func staticShares(candidates []spreadconstraint.ClusterDetailInfo, spec *workv1alpha2.ResourceBindingSpec) []share {
	pref := spec.Placement.ReplicaScheduling.WeightPreference
	out := make([]share, 0, len(candidates))
	var sum int64
	for _, c := range candidates {
		sh := share{name: c.Name, before: spec.AssignedReplicasForCluster(c.Name)}
		if pref == nil {
			sh.weight = 1
		} else {
			for _, rule := range pref.StaticWeightList {
				if util.ClusterMatches(c.Cluster, rule.TargetCluster) {
					sh.weight = max(sh.weight, rule.Weight)
				}
			}
		}
		sum += sh.weight
		out = append(out, sh)
	}
	if sum == 0 {
		for i := range out {
			out[i] = share{name: out[i].name, weight: 1}
		}
	}
	return out
}

// remainderDivision gives each share the floor of its proportional part of
// n, then the replicas left one each in order of weight, then of replicas
// before. tied names the clusters among which the release chose at random,
// when the replicas left end inside a group of equal keys.
func remainderDivision(n int32, shares []share) (result []workv1alpha2.TargetCluster, tied []string) {
	sorted, floors, left := remainderFloors(n, shares)
	if sorted == nil {
		return nil, nil
	}
	for i, sh := range sorted {
		result = append(result, workv1alpha2.TargetCluster{Name: sh.name, Replicas: floors[i]})
	}
	if left > 0 && int(left) < len(sorted) {
		edge := sorted[left-1]
		if next := sorted[left]; next.weight == edge.weight && next.before == edge.before {
			for _, sh := range sorted {
				if sh.weight == edge.weight && sh.before == edge.before {
					tied = append(tied, sh.name)
				}
			}
		}
	}
	for i := range result {
		if left == 0 {
			break
		}
		result[i].Replicas++
		left--
	}
	out := result[:0]
	for _, tc := range result {
		if tc.Replicas > 0 {
			out = append(out, tc)
		}
	}
	return out, tied
}

// remainderFloors orders shares as the older rule hands out the replicas
// left (weight, then replicas before, both descending) and gives each the
// floor of its proportional part of n; left is what the floors leave. sorted
// is nil when the shares weigh nothing.
func remainderFloors(n int32, shares []share) (sorted []share, floors []int32, left int32) {
	var sum int64
	for _, sh := range shares {
		sum += sh.weight
	}
	if sum == 0 {
		return nil, nil, 0
	}
	sorted = slices.Clone(shares)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].weight != sorted[j].weight {
			return sorted[i].weight > sorted[j].weight
		}
		return sorted[i].before > sorted[j].before
	})
	left = n
	for _, sh := range sorted {
		r := int32(sh.weight * int64(n) / sum) // #nosec G115: at most n
		floors = append(floors, r)
		left -= r
	}
	return sorted, floors, left
}

func namesWithWeight(shares []share, weight int64) []string {
	var out []string
	for _, sh := range shares {
		if sh.weight == weight {
			out = append(out, sh.name)
		}
	}
	slices.Sort(out)
	return out
}

// placementText prints a placement as {member1:2, member2:1}, in name
// order, each cluster once: the scheduler's words (rebalance.FormatPlacement)
// for placements that may list a cluster twice or in another order.
func placementText(p []workv1alpha2.TargetCluster) string {
	m := placementMap(p)
	clusters := make([]workv1alpha2.TargetCluster, 0, len(m))
	for name, replicas := range m {
		clusters = append(clusters, workv1alpha2.TargetCluster{Name: name, Replicas: replicas})
	}
	slices.SortFunc(clusters, func(a, b workv1alpha2.TargetCluster) int { return strings.Compare(a.Name, b.Name) })
	return rebalance.FormatPlacement(clusters)
}
