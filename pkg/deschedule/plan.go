package deschedule

import (
	"fmt"
	"strings"
)

// Action says what a pass does, or would do, with one target cluster of a binding.
type Action string

const (
	// ActionReady: every assigned replica is ready, so the cluster is not examined.
	ActionReady Action = "ready"
	// ActionNone: some replicas are not ready, but none has been unschedulable
	// for longer than the threshold.
	ActionNone Action = "none"
	// ActionEvict: the cluster's assignment is lowered to New.
	ActionEvict Action = "evict"
	// ActionOverSpec: more pods are unschedulable than the cluster is assigned,
	// which Karmada treats as a stale count and leaves alone.
	ActionOverSpec Action = "over-spec"
	// ActionCountFailed: the cluster's pods could not be counted; see Err.
	ActionCountFailed Action = "count-failed"
	// ActionBlocked: another cluster of the same binding could not be counted,
	// and a binding is descheduled all-or-nothing.
	ActionBlocked Action = "blocked"
	// ActionLimited: the formula asked for an eviction that a per-pass or
	// per-cluster limit cut down, possibly to nothing.
	ActionLimited Action = "limited"
	// ActionBouncedBack: an earlier pass evicted from the cluster, the
	// scheduler gave it replicas again and they are unschedulable again, so
	// evicting once more would only loop; nothing changes.
	ActionBouncedBack Action = "bounced-back"
)

// UnknownReady is what ClusterRow.ReadyOrUnknown returns when a cluster has
// not reported its ready replicas; Karmada uses the same sentinel.
const UnknownReady int32 = -1

// ClusterInput is what the formula needs to know about one target cluster.
type ClusterInput struct {
	// Cluster is the member cluster name, as in spec.clusters.
	Cluster string
	// Spec is the replica count the binding assigns to the cluster.
	Spec int32
	// Ready is the cluster's reported readyReplicas, nil when unknown.
	Ready *int32
	// Unschedulable is the number of pods unschedulable past the threshold.
	// It is only read for candidate clusters whose CountErr is nil.
	Unschedulable int32
	// CountErr is set when Unschedulable could not be determined.
	CountErr error
	// LastEviction is a recent eviction an earlier pass wrote for the
	// cluster, nil when there is none (or it is too old to count).
	LastEviction *Eviction
}

// bouncedBack reports whether the scheduler gave the cluster more replicas
// than the last eviction left it: the evicted replicas came back.
func (in ClusterInput) bouncedBack() bool {
	return in.LastEviction != nil && in.Spec > in.LastEviction.To
}

// IsCandidate reports whether the cluster has fewer ready replicas than it
// is assigned; an unknown ready count is treated as below the assignment.
func (in ClusterInput) IsCandidate() bool {
	return readyOrUnknown(in.Ready) < in.Spec
}

// ClusterRow is one line of a descheduling plan: a target cluster of a
// binding, what was observed there and what the pass assigns it.
type ClusterRow struct {
	// Cluster is the member cluster name.
	Cluster string `json:"cluster"`
	// Spec is the assignment read from the binding.
	Spec int32 `json:"spec"`
	// Ready is the reported readyReplicas, nil when unknown.
	Ready *int32 `json:"ready,omitempty"`
	// Counted is true when Unschedulable holds a real count.
	Counted bool `json:"counted"`
	// Unschedulable is the number of pods unschedulable past the threshold.
	Unschedulable int32 `json:"unschedulable"`
	// New is the assignment after the pass; equal to Spec when nothing changes.
	New int32 `json:"new"`
	// Action explains New.
	Action Action `json:"action"`
	// Err is the counting error for ActionCountFailed rows.
	Err error `json:"-"`
}

// ReadyOrUnknown returns the ready count, or UnknownReady when it is unknown.
func (r ClusterRow) ReadyOrUnknown() int32 { return readyOrUnknown(r.Ready) }

// Evicted is how many replicas the row moves away from its cluster.
func (r ClusterRow) Evicted() int32 { return r.Spec - r.New }

func readyOrUnknown(ready *int32) int32 {
	if ready == nil {
		return UnknownReady
	}
	return *ready
}

// ComputePlan applies the descheduler formula to the target clusters of one
// binding, in order, and returns one row per cluster.
//
// For a candidate cluster (ready < spec) with 0 < unschedulable <= spec, the
// new assignment is spec - unschedulable, raised back to ready when ready is
// known and not above spec, so that running replicas are never given up. More
// unschedulable pods than the assignment changes nothing. If any candidate
// cluster could not be counted, no cluster of the binding changes. A cluster
// the scheduler refilled after a recent eviction is not evicted from again.
func ComputePlan(inputs []ClusterInput) []ClusterRow {
	blocked := false
	for _, in := range inputs {
		if in.IsCandidate() && in.CountErr != nil {
			blocked = true
			break
		}
	}
	rows := make([]ClusterRow, 0, len(inputs))
	for _, in := range inputs {
		row := ClusterRow{Cluster: in.Cluster, Spec: in.Spec, Ready: in.Ready, New: in.Spec}
		switch {
		case !in.IsCandidate():
			row.Action = ActionReady
		case in.CountErr != nil:
			row.Action, row.Err = ActionCountFailed, in.CountErr
		default:
			row.Counted, row.Unschedulable = true, in.Unschedulable
			row.New, row.Action = evictionTarget(in)
			if row.Action == ActionEvict && in.bouncedBack() {
				row.New, row.Action = in.Spec, ActionBouncedBack
			}
			if blocked && row.Action == ActionEvict {
				row.New, row.Action = in.Spec, ActionBlocked
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func evictionTarget(in ClusterInput) (int32, Action) {
	switch {
	case in.Unschedulable <= 0:
		return in.Spec, ActionNone
	case in.Unschedulable > in.Spec:
		return in.Spec, ActionOverSpec
	}
	target := in.Spec - in.Unschedulable
	// Pods that are already running must not be handed to another cluster;
	// a ready count above spec would raise the assignment, so it is ignored.
	if in.Ready != nil && target < *in.Ready && *in.Ready <= in.Spec {
		target = *in.Ready
	}
	return target, ActionEvict
}

// TotalEvicted sums the replicas that rows move away from their clusters.
func TotalEvicted(rows []ClusterRow) int32 {
	var total int32
	for _, r := range rows {
		total += r.Evicted()
	}
	return total
}

// successMessagePrefix opens the event message, worded as karmada-descheduler words it.
const successMessagePrefix = "Binding has been descheduled"

// SucceedMessage is the DescheduleBindingSucceed event text for rows, for
// example "Binding has been descheduled, 2 replica(s) in cluster(member1),
// 2 total descheduled replica(s)". It is empty when nothing is evicted.
func SucceedMessage(rows []ClusterRow) string {
	total := TotalEvicted(rows)
	if total == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(successMessagePrefix)
	for _, r := range rows {
		if n := r.Evicted(); n > 0 {
			fmt.Fprintf(&b, ", %d replica(s) in cluster(%s)", n, r.Cluster)
		}
	}
	fmt.Fprintf(&b, ", %d total descheduled replica(s)", total)
	return b.String()
}

// A Job's ready count is often unknown (rebalance.ReadyField: Karmada's Job
// interpreter does not reflect it). That costs a Job nothing here: all its
// pods are counted (Jobs have no revisions) and an unschedulable pod is never
// ready, so its ready pods are at most its parallelism less its
// unschedulable ones, and the ready floor could not raise the result.

// readyPointer returns the ready count of cluster as a pointer, nil when unknown.
func readyPointer(ready map[string]int32, cluster string) *int32 {
	n, ok := ready[cluster]
	if !ok {
		return nil
	}
	return &n
}
