package record

import (
	"encoding/json"
	"fmt"
	"strings"
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
	// Steps are the run's approval gates, as --steps takes them
	// ("1,10%,100%"); empty without gates.
	Steps string `json:"steps,omitempty"`
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

// PausedAtStepAnnotation on a record says that its run waits at an
// approval gate (--steps) for `kubectl rebalance approve NAME`: the number
// of the step it finished, from 1. The run writes it when it pauses and
// removes it when it goes on; approve removes it too.
const PausedAtStepAnnotation = "kubectl-rebalance.io/paused-at-step"

// ApprovedAnnotation on a record lists the steps approved, with who and
// when (Approvals, JSON), so that a run resumed after its process was gone
// goes on past them.
const ApprovedAnnotation = "kubectl-rebalance.io/approved"

// Approval is one approved step.
type Approval struct {
	Step int         `json:"step"`
	By   string      `json:"by"`
	At   metav1.Time `json:"at"`
}

// String says it for a person: "step 1 approved by alice at TIME".
func (a Approval) String() string {
	return fmt.Sprintf("step %d approved by %s", a.Step, AbortMark{By: a.By, At: a.At})
}

// PausedAt returns the step whose end the run of rb waits at; false when it
// does not wait.
func PausedAt(rb *appsv1alpha1.WorkloadRebalancer) (int, bool) {
	if rb == nil {
		return 0, false
	}
	raw, ok := rb.Annotations[PausedAtStepAnnotation]
	if !ok {
		return 0, false
	}
	var step int
	if _, err := fmt.Sscan(raw, &step); err != nil || step < 1 {
		return 0, false
	}
	return step, true
}

// Approvals returns the steps approved on rb, in the order approved. A list
// that does not parse counts as none.
func Approvals(rb *appsv1alpha1.WorkloadRebalancer) []Approval {
	if rb == nil {
		return nil
	}
	raw, ok := rb.Annotations[ApprovedAnnotation]
	if !ok {
		return nil
	}
	var out []Approval
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil
	}
	return out
}

// Approved returns the approval of step on rb; false when it has none.
func Approved(rb *appsv1alpha1.WorkloadRebalancer, step int) (Approval, bool) {
	for _, a := range Approvals(rb) {
		if a.Step == step {
			return a, true
		}
	}
	return Approval{}, false
}

// PausePatch is the merge patch that says the run waits at the end of step.
func PausePatch(step int) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{PausedAtStepAnnotation: fmt.Sprint(step)},
	}})
}

// ResumedPatch is the merge patch that says the run no longer waits.
func ResumedPatch() ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{PausedAtStepAnnotation: nil},
	}})
}

// ApprovePatch is the merge patch that approves step by by at at (added to
// the approvals rb has) and ends the pause, guarded by rb's resource
// version so that two approvals at once do not drop one.
func ApprovePatch(rb *appsv1alpha1.WorkloadRebalancer, step int, by string, at time.Time) ([]byte, error) {
	approvals := append(Approvals(rb), Approval{Step: step, By: by, At: metav1.NewTime(at.UTC().Truncate(time.Second))})
	raw, err := json.Marshal(approvals)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": rb.ResourceVersion,
		"annotations":     map[string]any{ApprovedAnnotation: string(raw), PausedAtStepAnnotation: nil},
	}})
}

// StepsText says where a run with approval gates stands, for `get`: the
// step it waits at and the approvals so far; "" for a run without either.
func StepsText(rb *appsv1alpha1.WorkloadRebalancer) string {
	var parts []string
	if step, ok := PausedAt(rb); ok {
		parts = append(parts, fmt.Sprintf("paused after step %d, waiting for `kubectl rebalance approve %s`", step, rb.Name))
	}
	for _, a := range Approvals(rb) {
		parts = append(parts, a.String())
	}
	return strings.Join(parts, "; ")
}
