package predict

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/scheduler/core"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// ReasonBatchTiming: the workload's division depends on whether the members
// have reported the batch's other moves when karmada-scheduler reaches it.
const ReasonBatchTiming = "BatchTiming"

// QuickDecisions is how many of a batch's first workloads are predicted with
// no member report of the batch's moves landed, even where a report would
// change their division. karmada-scheduler makes 20 to 50 decisions a second
// (about 20 in Karmada's own figures), so it reaches them within about a
// second of the first trigger; a member reports a move only once the moved
// pods exist in it, at its next status update (every 10 s by default). Most
// runs therefore see no report before these decisions: the e2e mixed batch of
// 15 got the no-report placement for 296 of 300 workloads over 20 runs. The
// other placements they may get are listed beside the prediction (Possible);
// later workloads whose division depends on the timing are not predicted.
const QuickDecisions = 20

// Why a batch needs this: karmada-scheduler (default feature gates) keeps no
// account of its own decisions. Each decision reads the Clusters' resource
// summaries, which every member refreshes on its own timer
// (--cluster-status-update-frequency). While the scheduler works through a
// batch, a member may report the pods the batch's earlier decisions moved, and
// the later decisions then see less (or more) free room there. When the
// members report cannot be known in advance. What can be known is the range:
// each member reports somewhere between none and all of the moves decided
// before. Which ones those are is bounded by how the triggers are written: a
// rebalance hands them out in the batch's order to Options.InFlight writers,
// and the scheduler takes them as the writes land, so a workload can come
// after any of the ones before it and after at most InFlight-1 of those
// behind it. A division that comes out the same over that range is predicted;
// one that does not is, among the batch's first QuickDecisions, predicted as
// it divides with no report landed (the likely case, with reason BatchTiming
// and the other placements it may get), and later in the batch CannotPredict
// (BatchTiming), with the placements it may get.

// footprint is what a batch's decisions add to (gain) and take from (loss)
// each cluster's allocated resources once the members report them.
type footprint map[string]*clusterDelta

type clusterDelta struct{ gain, loss corev1.ResourceList }

// move is one workload's footprint, kept small: the replicas it may start
// (gains) and stop (losses) per cluster; one replica's requests are the
// binding's, shared. A fleet's moves are held through the whole check, and
// as resource lists they took about 3 KiB a workload.
type move struct {
	request       corev1.ResourceList
	gains, losses []clusterReplicas
}

type clusterReplicas struct {
	name string
	n    int64
}

// movesOf is the move of one workload from before to any of outcomes: per
// cluster, the most replicas it may gain and the most it may lose.
func movesOf(spec *workv1alpha2.ResourceBindingSpec, before []workv1alpha2.TargetCluster, outcomes [][]workv1alpha2.TargetCluster) move {
	if !spec.IsWorkload() {
		return move{}
	}
	gains, losses := map[string]int64{}, map[string]int64{}
	for _, after := range outcomes {
		diff := placementMap(after)
		for name, n := range placementMap(before) {
			diff[name] -= n
		}
		for name, d := range diff {
			if d > 0 {
				gains[name] = max(gains[name], int64(d))
			} else if d < 0 {
				losses[name] = max(losses[name], int64(-d))
			}
		}
	}
	m := move{gains: replicasList(gains), losses: replicasList(losses)}
	if r := spec.ReplicaRequirements; r != nil {
		m.request = r.ResourceRequest
	}
	return m
}

func replicasList(byName map[string]int64) []clusterReplicas {
	if len(byName) == 0 {
		return nil
	}
	out := make([]clusterReplicas, 0, len(byName))
	for name, n := range byName {
		out = append(out, clusterReplicas{name: name, n: n})
	}
	return out
}

// addMove adds the resources of m to f, or takes them away with sign -1.
func (f footprint) addMove(m move, sign int64) {
	for _, g := range m.gains {
		addReplicas(f.delta(g.name).gain, m.request, sign*g.n)
	}
	for _, l := range m.losses {
		addReplicas(f.delta(l.name).loss, m.request, sign*l.n)
	}
}

// addReplicas adds n pods of request each to list.
func addReplicas(list, request corev1.ResourceList, n int64) {
	addQuantity(list, corev1.ResourcePods, *resource.NewQuantity(n, resource.DecimalSI))
	for res, q := range request {
		addQuantity(list, res, *resource.NewMilliQuantity(n*q.MilliValue(), q.Format))
	}
}

func (f footprint) delta(name string) *clusterDelta {
	cd := f[name]
	if cd == nil {
		cd = &clusterDelta{gain: corev1.ResourceList{}, loss: corev1.ResourceList{}}
		f[name] = cd
	}
	return cd
}

// add adds g to f, or takes it away with sign -1.
func (f footprint) add(g footprint, sign int64) {
	for name, cd := range g {
		into := f.delta(name)
		for res, q := range cd.gain {
			addQuantity(into.gain, res, scaled(q, sign))
		}
		for res, q := range cd.loss {
			addQuantity(into.loss, res, scaled(q, sign))
		}
	}
}

func scaled(q resource.Quantity, sign int64) resource.Quantity {
	q = q.DeepCopy()
	if sign < 0 {
		q.Neg()
	}
	return q
}

func addQuantity(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	sum := list[name]
	sum.Add(q)
	list[name] = sum
}

func (cd *clusterDelta) isZero() bool {
	for _, l := range []corev1.ResourceList{cd.gain, cd.loss} {
		for _, q := range l {
			if !q.IsZero() {
				return false
			}
		}
	}
	return true
}

// batchRow is what the timing check needs of one prediction.
type batchRow struct {
	index int
	// spec is the binding's own, without the fresh trigger: the check adds
	// it to a copy while it schedules the row, so that a fleet's rows do not
	// each hold a copy of their spec for the whole check.
	spec   *workv1alpha2.ResourceBindingSpec
	status *workv1alpha2.ResourceBindingStatus
	// primary is the placement predicted with no report landed.
	primary []workv1alpha2.TargetCluster
	// checked: the division depends on free capacity and was predicted.
	checked bool
}

// checkBatchTiming turns each capacity-dependent prediction of a batch whose
// division changes with the members' reports of the batch's other moves (those
// the scheduler may have decided before it) into CannotPredict (BatchTiming).
// rows are in the batch's order. The other moves are first taken as predicted;
// a workload found to depend on the timing may move otherwise, so the check
// runs once more with each such workload's widest move. Within a pass the
// rows are checked side by side, one scheduler per goroutine.
func checkBatchTiming(ctx context.Context, scheds []*karmadaScheduler, rows []batchRow, out []Prediction, opts Options) error {
	if !slices.ContainsFunc(rows, func(r batchRow) bool { return r.checked }) {
		// Nothing depends on free capacity (static weights, Duplicated): a
		// fleet's worth of footprints would be summed for nothing.
		return nil
	}
	moves := make([]move, len(rows))
	for i, r := range rows {
		if r.primary != nil {
			moves[i] = movesOf(r.spec, out[r.index].Before, [][]workv1alpha2.TargetCluster{r.primary})
		}
	}
	window := opts.InFlight
	if window <= 0 || window > len(rows) {
		window = len(rows)
	}
	predicted := slices.Clone(out)
	for range 2 {
		// The pass reads the moves as they were at its start; a move widened
		// during the pass counts from the next one.
		found, err := timingPass(ctx, scheds, rows, slices.Clone(moves), window, opts)
		if err != nil {
			return err
		}
		widened := false
		for i, r := range rows {
			t := found[i]
			if t == nil {
				continue
			}
			if i < QuickDecisions {
				out[r.index] = predicted[r.index].likelyBeforeReports(t.others, t.possible, t.failure)
			} else {
				out[r.index] = predicted[r.index].batchTiming(t.others, t.possible, t.failure)
			}
			if len(t.possible) > 1 {
				moves[i] = movesOf(r.spec, out[r.index].Before, t.possible)
				widened = true
			}
		}
		if !widened {
			break
		}
	}
	return nil
}

// timing is what the check found for a row whose division depends on the
// members' reports: the other moves (described: at 10,000 workloads almost
// every row may be found, and a footprint each held hundreds of MiB until
// the pass ended), and the placements it may get.
type timing struct {
	others   string
	possible [][]workv1alpha2.TargetCluster
	failure  string
}

// timingPass checks every capacity-dependent row against the moves of the
// rows it may come after, and returns, by row, what it found where the
// reports matter (nil elsewhere). The sums of those moves are made here in
// the batch's order; the schedulers try them side by side.
func timingPass(ctx context.Context, scheds []*karmadaScheduler, rows []batchRow, moves []move, window int, opts Options) ([]*timing, error) {
	type job struct {
		i      int
		others footprint
	}
	found := make([]*timing, len(rows))
	shared := &placementLists{byKey: map[string][][]workv1alpha2.TargetCluster{}}
	jobs := make(chan job, 4*len(scheds))
	var wg sync.WaitGroup
	for _, s := range scheds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() != nil {
					continue
				}
				possible, failure := s.underReports(ctx, j.others, rows[j.i], opts)
				if len(possible) > 1 || failure != "" {
					found[j.i] = &timing{others: j.others.describe(), possible: shared.of(possible), failure: failure}
				}
			}
		}()
	}
	// ahead sums the moves of rows 0..next-1, the rows a row may come
	// after: it slides with the rows instead of keeping a sum per row, which
	// at 10,000 workloads held tens of MiB of quantities. Only the sums in
	// the channel are held at once.
	ahead, next := footprint{}, 0
	for i, r := range rows {
		for ; next < min(i+window, len(rows)); next++ {
			ahead.addMove(moves[next], 1)
		}
		if !r.checked || ctx.Err() != nil {
			continue
		}
		// Every row before this one, and the ones behind it whose triggers
		// may be written while its own is.
		others := footprint{}
		others.add(ahead, 1)
		others.addMove(moves[i], -1)
		jobs <- job{i: i, others: others}
	}
	close(jobs)
	wg.Wait()
	return found, ctx.Err()
}

// placementLists keeps one copy of each distinct list of placements a pass
// finds: the rows of a fleet that depend on the timing mostly get the same
// few, and each row held its own until the plan was printed.
type placementLists struct {
	sync.Mutex
	byKey map[string][][]workv1alpha2.TargetCluster
}

// of returns the copy kept of a list equal to possible, in the same order
// (the first is the row's own prediction). The copy is shared: callers must
// not change it.
func (l *placementLists) of(possible [][]workv1alpha2.TargetCluster) [][]workv1alpha2.TargetCluster {
	var key strings.Builder
	for _, p := range possible {
		for _, tc := range p {
			fmt.Fprintf(&key, "%s=%d,", tc.Name, tc.Replicas)
		}
		key.WriteByte(';')
	}
	l.Lock()
	defer l.Unlock()
	if kept, ok := l.byKey[key.String()]; ok {
		return kept
	}
	l.byKey[key.String()] = possible
	return possible
}

// underReports schedules one row again under the member reports that bound
// what karmada-scheduler may see: for each cluster, the batch's other moves
// reported so as to leave it the most free room and the others the least, and
// the reverse (a division gives a cluster no fewer replicas when only its
// room grows, so these bound every mix of reports).
// It returns the distinct placements, the primary first, and the error of a
// state in which the scheduler would fail.
func (s *karmadaScheduler) underReports(ctx context.Context, others footprint, r batchRow, opts Options) ([][]workv1alpha2.TargetCluster, string) {
	names := make([]string, 0, len(others))
	for name, cd := range others {
		if s.clusters[name] != nil && s.clusters[name].Status.ResourceSummary != nil && !cd.isZero() {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, ""
	}
	slices.Sort(names)
	saved := make(map[string]corev1.ResourceList, len(names))
	for _, name := range names {
		saved[name] = s.clusters[name].Status.ResourceSummary.Allocating.DeepCopy()
	}
	restore := func() {
		for _, name := range names {
			s.setAllocating(name, saved[name].DeepCopy())
		}
	}
	defer restore()

	// reported applies, per cluster, its gain (less room) and/or its loss
	// (more room).
	reported := func(gain, loss func(name string) bool) {
		for _, name := range names {
			allocating := saved[name].DeepCopy()
			if allocating == nil {
				allocating = corev1.ResourceList{}
			}
			if gain(name) {
				for res, q := range others[name].gain {
					addQuantity(allocating, res, q)
				}
			}
			if loss(name) {
				for res, q := range others[name].loss {
					addQuantity(allocating, res, scaled(q, -1))
				}
			}
			s.setAllocating(name, allocating)
		}
	}
	type state struct{ gain, loss func(string) bool }
	var states []state
	for _, c := range names {
		is := func(name string) bool { return name == c }
		isNot := func(name string) bool { return name != c }
		states = append(states, state{gain: isNot, loss: is}, state{gain: is, loss: isNot})
	}

	fresh := freshTrigger(r.spec, r.status)
	divide := func() ([]workv1alpha2.TargetCluster, error) {
		result, _, err := s.schedule(ctx, opts.Release, fresh, r.status)
		return result, err
	}
	restore()
	if fast, ok := s.divider(ctx, opts.Release, fresh, r.status); ok {
		// The same answer as the whole pass, or the whole pass it is.
		if result, err := fast(); err == nil && SamePlacement(result, r.primary) {
			divide = fast
		}
	}

	possible := [][]workv1alpha2.TargetCluster{r.primary}
	failure := ""
	for _, st := range states {
		reported(st.gain, st.loss)
		result, err := divide()
		if err != nil {
			if failure == "" {
				failure = err.Error()
			}
			continue
		}
		if !slices.ContainsFunc(possible, func(p []workv1alpha2.TargetCluster) bool { return SamePlacement(p, result) }) {
			possible = append(possible, result)
		}
	}
	return possible, failure
}

// batchTiming is the verdict of a prediction whose division depends on the
// members' reports of the batch's other moves, later in the batch than the
// scheduler's first QuickDecisions: nothing is predicted.
func (p Prediction) batchTiming(others string, possible [][]workv1alpha2.TargetCluster, failure string) Prediction {
	p.Possible, p.Predicted, p.Alternative, p.Moves = withFailure(possible, failure, p.Before), p.Before, nil, 0
	return p.verdict(CannotPredict, ReasonBatchTiming, fmt.Sprintf(
		"decided by fewer free pods than the batch's other moves change (they %s), which karmada-scheduler sees once the members report them (every --cluster-status-update-frequency), at a moment the client cannot know: %s",
		others, possibleText(possible, failure)))
}

// likelyBeforeReports is the verdict of a prediction among the batch's first
// QuickDecisions whose division depends on the members' reports of the
// batch's other moves: the division with no report landed stands, and the
// others it may get are listed.
func (p Prediction) likelyBeforeReports(others string, possible [][]workv1alpha2.TargetCluster, failure string) Prediction {
	p.Possible = withFailure(possible, failure, p.Before)
	return p.verdict(p.Verdict, ReasonBatchTiming, fmt.Sprintf(
		"likely %s: karmada-scheduler reaches it among the batch's first %d decisions, before the members report the batch's other moves (they %s); "+
			"a member that reports them first changes it to: %s",
		rebalance.FormatPlacement(sortedPlacement(p.Predicted)), QuickDecisions, others, possibleText(possible[1:], failure)))
}

// possibleText lists placements as plan messages do, then the failure.
func possibleText(possible [][]workv1alpha2.TargetCluster, failure string) string {
	texts := make([]string, 0, len(possible)+1)
	for _, pl := range possible {
		texts = append(texts, rebalance.FormatPlacement(sortedPlacement(pl)))
	}
	if failure != "" {
		// The scheduler keeps the placement when it lacks room.
		texts = append(texts, "no room ("+failure+")")
	}
	return strings.Join(texts, " or ")
}

// withFailure adds the placement kept when the scheduler lacks room.
func withFailure(possible [][]workv1alpha2.TargetCluster, failure string, before []workv1alpha2.TargetCluster) [][]workv1alpha2.TargetCluster {
	if failure == "" {
		return possible
	}
	return append(slices.Clone(possible), before)
}

// describe lists per cluster how much room the batch's moves take or free.
func (f footprint) describe() string {
	names := make([]string, 0, len(f))
	for name := range f {
		names = append(names, name)
	}
	slices.Sort(names)
	var parts []string
	for _, name := range names {
		cd := f[name]
		gain, loss := cd.gain[corev1.ResourcePods], cd.loss[corev1.ResourcePods]
		var moved []string
		if !gain.IsZero() {
			moved = append(moved, "take up to "+gain.String())
		}
		if !loss.IsZero() {
			moved = append(moved, "free up to "+loss.String())
		}
		if len(moved) > 0 {
			parts = append(parts, fmt.Sprintf("%s pods on %s", strings.Join(moved, " and "), name))
		}
	}
	return strings.Join(parts, ", ")
}

// sortedPlacement orders a placement by cluster name and drops empty entries.
func sortedPlacement(p []workv1alpha2.TargetCluster) []workv1alpha2.TargetCluster {
	out := make([]workv1alpha2.TargetCluster, 0, len(p))
	for _, tc := range p {
		if tc.Replicas != 0 {
			out = append(out, tc)
		}
	}
	slices.SortFunc(out, func(a, b workv1alpha2.TargetCluster) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// divider returns a division of spec's replicas over the clusters as their
// summaries read at each call: Karmada's cluster selection (which runs the
// estimator) and assignment over the clusters that its filter and score
// plugins, run once here, let through. Those plugins do not read the
// summaries, so this is the generic scheduler's pass without the parts that
// cannot change. ok is false where schedule() does more than one pass
// (cluster affinity groups) or a release divides otherwise.
func (s *karmadaScheduler) divider(ctx context.Context, release *karmadaversion.Info, spec *workv1alpha2.ResourceBindingSpec, status *workv1alpha2.ResourceBindingStatus) (func() ([]workv1alpha2.TargetCluster, error), bool) {
	if spec.Placement.ClusterAffinities != nil {
		return nil, false
	}
	if release != nil {
		webster, modelNodes := release.DividesByWebster(), release.EstimatesOnModelNodes()
		if !webster.Known || !webster.Yes || !modelNodes.Known || !modelNodes.Yes {
			return nil, false
		}
	}
	// The filter plugins read the scheduler's own copies, not a snapshot:
	// they do not read the summaries, which the caller changes, and a
	// snapshot would copy every cluster for each row of the batch.
	clusters := make([]*clusterv1alpha1.Cluster, 0, len(s.clusters))
	for _, name := range slices.Sorted(maps.Keys(s.clusters)) {
		clusters = append(clusters, s.clusters[name])
	}
	list, err := s.scoreClusters(ctx, clusters, spec, status)
	if err != nil || len(list) == 0 {
		return nil, false
	}
	return func() ([]workv1alpha2.TargetCluster, error) {
		selected, err := core.SelectClusters(list, spec.Placement, spec, status, s.cache.AssigningResourceBindings())
		if err != nil {
			return nil, err
		}
		return core.AssignReplicas(selected, spec, status)
	}, true
}
