package record

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// grower keeps the record of one reconciliation pass: it appends the
// workloads the pass started fresh to spec.workloads once their triggers
// are written, and writes the status of the latest spec.
//
// Why a record grows: Karmada's workloadRebalancer controller triggers
// every entry of spec.workloads it has not observed yet, at the record's
// creationTimestamp, unless the entry's binding already holds a trigger at
// or after it. A record that listed every workload of a waved run from the
// start would be triggered all at once by it; one whose entries appear only
// after the run has written their (later) triggers leaves it nothing to do
// but record them Successful.
type grower struct {
	r    *Recorder
	name string
	uid  types.UID

	mu   sync.Mutex // serialises the ledger's hand-overs and the final write
	spec appsv1alpha1.WorkloadRebalancerSpec
	gen  int64
	// held are the workloads the record already held when the pass began
	// (in its spec or status); fresh those the pass started beyond them.
	held, fresh map[rebalance.Workload]bool
	// appended are the fresh workloads now in spec.workloads.
	appended map[rebalance.Workload]bool
	// ran are the workloads this pass runs; spent the failures of earlier
	// passes and runs (FailuresAnnotation), failures the total last written.
	ran             map[rebalance.Workload]bool
	spent, failures int
	// countFailures keeps FailuresAnnotation (a waved run's).
	countFailures bool
	// heldTTL is set on the spec once every fresh workload is in it.
	heldTTL *int32
}

// UnstartedAnnotation on a waved run's record counts the workloads of the
// run it does not list yet: not started when the run stopped (Ctrl-C, the
// failure budget). Its status can be complete while this is not 0; running
// the same command again starts them.
const UnstartedAnnotation = "waves.kubectl-rebalance.io/unstarted"

// FailuresAnnotation on a waved run's record counts the workloads that
// failed in its runs so far (a scheduling failure, an ignored trigger, a
// progress deadline): a resumed run counts them against --max-failures.
const FailuresAnnotation = "waves.kubectl-rebalance.io/failures"

// FailuresSpent reads FailuresAnnotation of rb; 0 when unset or unreadable.
func FailuresSpent(rb *appsv1alpha1.WorkloadRebalancer) int {
	n, err := strconv.Atoi(rb.Annotations[FailuresAnnotation])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func newGrower(r *Recorder, rb *appsv1alpha1.WorkloadRebalancer) *grower {
	g := &grower{r: r, name: rb.Name, uid: rb.UID, spec: *rb.Spec.DeepCopy(), gen: rb.Generation,
		held: map[rebalance.Workload]bool{}, fresh: map[rebalance.Workload]bool{}, appended: map[rebalance.Workload]bool{},
		ran: map[rebalance.Workload]bool{}, spent: FailuresSpent(rb), countFailures: r.Execute != nil, heldTTL: r.HeldTTL}
	if rb.Spec.TTLSecondsAfterFinished != nil {
		g.heldTTL = nil
	}
	g.failures = g.spent
	for _, w := range rb.Spec.Workloads {
		g.held[w] = true
	}
	for _, entry := range rb.Status.ObservedWorkloads {
		g.held[entry.Workload] = true
	}
	return g
}

// unstarted returns the planned workloads the record does not hold, once
// each, and marks them fresh.
func (g *grower) unstarted(planned []rebalance.Target) []rebalance.Target {
	var out []rebalance.Target
	for _, t := range planned {
		if g.held[t.Workload] || g.fresh[t.Workload] {
			continue
		}
		g.fresh[t.Workload] = true
		out = append(out, t)
	}
	return out
}

// isFresh reports whether w was started by this pass beyond the record.
func (g *grower) isFresh(w rebalance.Workload) bool {
	return g.fresh[w]
}

// generation is the record's generation as this pass last wrote it.
func (g *grower) generation() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen
}

// record appends the fresh workloads of rows whose trigger's fate is known
// (and recordable as Karmada's controller would) to spec.workloads, then
// writes the status of the spec with the rows' results.
func (g *grower) record(ctx context.Context, rows []rebalance.Row) (*appsv1alpha1.WorkloadRebalancer, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var add []rebalance.Workload
	for _, row := range rows {
		w := row.Workload
		if g.fresh[w] && !g.appended[w] && row.Result != "" && Recordable(row.Result, row.Reason) {
			add = append(add, w)
		}
	}
	if len(add) > 0 {
		grown, err := g.r.appendWorkloads(ctx, g.name, g.uid, add)
		if err != nil {
			return nil, err
		}
		for _, w := range add {
			g.appended[w] = true
		}
		g.spec, g.gen = *grown.Spec.DeepCopy(), grown.Generation
	}
	if g.heldTTL != nil && len(g.appended) == len(g.fresh) {
		// Every workload of the run is in the record: its ttl may start.
		withTTL, err := g.r.patchTTL(ctx, g.name, *g.heldTTL)
		if err != nil {
			return nil, err
		}
		g.heldTTL = nil
		g.spec, g.gen = *withTTL.Spec.DeepCopy(), withTTL.Generation
	}
	if g.countFailures {
		var mine []rebalance.Row
		for _, row := range rows {
			if g.ran[row.Workload] {
				mine = append(mine, row)
			}
		}
		failed, _ := rebalance.CountRows(mine)
		if total := g.spent + failed; total != g.failures {
			if err := g.r.annotate(ctx, g.name, FailuresAnnotation, strconv.Itoa(total)); err != nil {
				return nil, err
			}
			g.failures = total
		}
	}
	return g.r.writeStatus(ctx, g.name, g.spec, g.gen, rows)
}

// markUnstarted keeps UnstartedAnnotation: how many fresh workloads are
// not in the record's spec.
func (g *grower) markUnstarted(ctx context.Context, current *appsv1alpha1.WorkloadRebalancer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.fresh) == 0 {
		return nil
	}
	left := strconv.Itoa(len(g.fresh) - len(g.appended))
	if current != nil && current.Annotations[UnstartedAnnotation] == left {
		return nil
	}
	return g.r.annotate(ctx, g.name, UnstartedAnnotation, left)
}

// SetTTL gives the record name the ttl ttl when it holds none, and writes
// the status of the spec that results (a spec change moves the generation
// and restarts finishTime, as Karmada's controller does), so that the ttl
// counts down even where that controller does not run. It is for a record
// stopped for good before every workload was listed (a growing record holds
// its ttl until then, Recorder.HeldTTL): nothing is left to resume, and
// without a ttl it would stay forever.
func (r *Recorder) SetTTL(ctx context.Context, name string, ttl int32) (*appsv1alpha1.WorkloadRebalancer, error) {
	current, err := r.Client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, ErrRebalancerGone
	case err != nil:
		return nil, rebalancerError("get", name, err)
	case current.Spec.TTLSecondsAfterFinished != nil:
		return current, nil
	}
	patched, err := r.patchTTL(ctx, name, ttl)
	if err != nil {
		return nil, err
	}
	return r.writeStatus(ctx, name, patched.Spec, patched.Generation, nil)
}

// patchTTL sets spec.ttlSecondsAfterFinished of the record name.
func (r *Recorder) patchTTL(ctx context.Context, name string, ttl int32) (*appsv1alpha1.WorkloadRebalancer, error) {
	data, err := json.Marshal(map[string]any{"spec": map[string]any{"ttlSecondsAfterFinished": ttl}})
	if err != nil {
		return nil, err
	}
	backoff := r.backoff()
	for {
		patched, err := r.Client.Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
		switch {
		case err == nil:
			return patched, nil
		case apierrors.IsNotFound(err):
			return nil, ErrRebalancerGone
		case retryable(err) && rebalance.SleepContext(ctx, backoff.Step()) == nil:
			continue
		}
		return nil, rebalancerError("patch", name, err)
	}
}

// annotate sets one annotation of the record name with a merge patch, which
// changes nothing else.
func (r *Recorder) annotate(ctx context.Context, name, key, value string) error {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	backoff := r.backoff()
	for {
		_, err := r.Client.Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
		switch {
		case err == nil:
			return nil
		case apierrors.IsNotFound(err):
			return ErrRebalancerGone
		case retryable(err) && rebalance.SleepContext(ctx, backoff.Step()) == nil:
			continue
		}
		return rebalancerError("patch", name, err)
	}
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// appendWorkloads adds ws at the end of spec.workloads of the record name
// with one JSON patch, guarded by a test of its uid: whatever else the
// object holds (a spec edit of someone else's, fields our types lack) stays
// as it is. ErrRebalancerGone means it was deleted, or replaced by another
// object of the same name.
func (r *Recorder) appendWorkloads(ctx context.Context, name string, uid types.UID, ws []rebalance.Workload) (*appsv1alpha1.WorkloadRebalancer, error) {
	ops := []jsonPatchOp{{Op: "test", Path: "/metadata/uid", Value: string(uid)}}
	for _, w := range ws {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/workloads/-", Value: w})
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	backoff := r.backoff()
	for {
		patched, err := r.Client.Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{})
		switch {
		case err == nil && patched.DeletionTimestamp != nil:
			return nil, ErrRebalancerGone
		case err == nil:
			return patched, nil
		case apierrors.IsNotFound(err):
			return nil, ErrRebalancerGone
		case apierrors.IsInvalid(err), apierrors.IsConflict(err), apierrors.IsBadRequest(err):
			// A failed test: is it still the same object?
			current, getErr := r.Client.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(getErr) || (getErr == nil && current.UID != uid) {
				return nil, ErrRebalancerGone
			}
			if getErr == nil && !apierrors.IsConflict(err) {
				return nil, rebalancerError("patch", name, fmt.Errorf("appending to spec.workloads: %w", err))
			}
		case !retryable(err):
			return nil, rebalancerError("patch", name, err)
		}
		if rebalance.SleepContext(ctx, backoff.Step()) != nil {
			return nil, rebalancerError("patch", name, err)
		}
	}
}
