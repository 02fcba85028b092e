package record

import (
	"encoding/json"
	"fmt"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// AbortedAnnotation on a record asks the process running it to stop
// starting workloads, and says who asked and when (an AbortMark, JSON).
// `kubectl rebalance abort` writes it, `kubectl rebalance resume` removes
// it. It lives on the WorkloadRebalancer so that anyone can abort a run
// started on another machine, and the mark survives the process.
const AbortedAnnotation = "kubectl-rebalance.io/aborted"

// PlannedAnnotation on a waved run's record lists every workload of the
// run, as JSON: the record itself lists only those started
// (docs/waves.md), so `kubectl rebalance resume` and `get -w` read the
// others here.
const PlannedAnnotation = "waves.kubectl-rebalance.io/workloads"

// OptionsAnnotation on a waved run's record keeps the run's pacing (a
// RunOptions, JSON), so that `kubectl rebalance resume` continues with the
// same window, deadline, failure budget and ttl.
const OptionsAnnotation = "waves.kubectl-rebalance.io/options"

// failbackPlannedAnnotation is the failback daemon's list of a failback's
// workloads (package failback owns it); `get -w` shows them too.
const failbackPlannedAnnotation = "failback.kubectl-rebalance.io/workloads"

// maxPlannedBytes keeps the planned list well inside the 256 KiB an
// object's annotations may hold (about 4,000 workloads); a larger run is
// recorded without it.
const maxPlannedBytes = 192 << 10

// AbortMark is who aborted a run, and when.
type AbortMark struct {
	By string      `json:"by"`
	At metav1.Time `json:"at"`
}

// String says it for a person: "alice at 2026-01-02T03:04:05Z".
func (m AbortMark) String() string {
	by := m.By
	if by == "" {
		by = "an unknown user"
	}
	if m.At.IsZero() {
		return by
	}
	return by + " at " + m.At.UTC().Format(time.RFC3339)
}

// Aborted returns the abort mark of rb; false when it has none. A mark
// that does not parse still counts as an abort, by an unknown user.
func Aborted(rb *appsv1alpha1.WorkloadRebalancer) (AbortMark, bool) {
	if rb == nil {
		return AbortMark{}, false
	}
	raw, ok := rb.Annotations[AbortedAnnotation]
	if !ok {
		return AbortMark{}, false
	}
	var m AbortMark
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return AbortMark{By: raw}, true
	}
	return m, true
}

// AbortPatch is the merge patch that marks a record aborted by by at at,
// guarded by the record's resource version.
func AbortPatch(rb *appsv1alpha1.WorkloadRebalancer, by string, at time.Time) ([]byte, error) {
	mark, err := json.Marshal(AbortMark{By: by, At: metav1.NewTime(at.UTC().Truncate(time.Second))})
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": rb.ResourceVersion,
		"annotations":     map[string]any{AbortedAnnotation: string(mark)},
	}})
}

// ClearAbortPatch is the merge patch that removes the abort mark.
func ClearAbortPatch(rb *appsv1alpha1.WorkloadRebalancer) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": rb.ResourceVersion,
		"annotations":     map[string]any{AbortedAnnotation: nil},
	}})
}

// RunOptions are the pacing of a waved run, as OptionsAnnotation keeps it.
type RunOptions struct {
	MaxInFlight      int             `json:"maxInFlight"`
	WaitReady        bool            `json:"waitReady"`
	ProgressDeadline metav1.Duration `json:"progressDeadline"`
	MaxFailures      int             `json:"maxFailures,omitempty"`
	Pause            metav1.Duration `json:"pause,omitempty"`
	// Order is "crd" or "given".
	Order string `json:"order,omitempty"`
	// TTL is the record's ttl, which a growing record only gets once every
	// workload is listed.
	TTL *int32 `json:"ttl,omitempty"`
}

// PlanAnnotations returns the annotations that keep a waved run's workloads
// and options on its record. The list is left out, with the reason, when
// it is too large for an annotation.
func PlanAnnotations(ws []rebalance.Workload, opts RunOptions) (map[string]string, error) {
	rawOpts, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	out := map[string]string{OptionsAnnotation: string(rawOpts)}
	data, err := json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	if len(data) > maxPlannedBytes {
		return out, fmt.Errorf("%d workloads take %d bytes, more than the %d a record's annotation may hold", len(ws), len(data), maxPlannedBytes)
	}
	out[PlannedAnnotation] = string(data)
	return out, nil
}

// Planned returns the workloads a run set out to move, as its record keeps
// them (a waved run's list, or a failback's); false when it keeps none.
func Planned(rb *appsv1alpha1.WorkloadRebalancer) ([]rebalance.Workload, bool) {
	for _, key := range []string{PlannedAnnotation, failbackPlannedAnnotation} {
		raw, ok := rb.Annotations[key]
		if !ok {
			continue
		}
		var ws []rebalance.Workload
		if err := json.Unmarshal([]byte(raw), &ws); err == nil && len(ws) > 0 {
			return ws, true
		}
	}
	return nil, false
}

// Options returns the pacing a waved run kept on rb; false when it kept
// none (a run all at once, a manifest's, a failback's).
func Options(rb *appsv1alpha1.WorkloadRebalancer) (RunOptions, bool) {
	raw, ok := rb.Annotations[OptionsAnnotation]
	if !ok {
		return RunOptions{}, false
	}
	var opts RunOptions
	if err := json.Unmarshal([]byte(raw), &opts); err != nil || opts.MaxInFlight <= 0 {
		return RunOptions{}, false
	}
	return opts, true
}
