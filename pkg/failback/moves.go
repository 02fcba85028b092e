package failback

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// MovesAnnotation on a failback record says how each workload it moved
// got there: made before break (what was staged before the release), in
// one write (and why), or stopped before its release (undone). The status
// only says a trigger was written; this says what the replicas went
// through. A resumed failback adds to it.
const MovesAnnotation = "failback.kubectl-rebalance.io/moves"

// maxMovesListed bounds the workloads MovesAnnotation names one by one
// (an annotation must stay small); the counts cover them all.
const maxMovesListed = 100

// Moves is the value of MovesAnnotation.
type Moves struct {
	// MadeBeforeBreak, OneWrite and Stopped count the workloads.
	MadeBeforeBreak int `json:"madeBeforeBreak"`
	OneWrite        int `json:"oneWrite"`
	Stopped         int `json:"stopped,omitempty"`
	// Workloads says, per workload (kind namespace/name), how it moved; at
	// most maxMovesListed of them.
	Workloads map[string]string `json:"workloads,omitempty"`
}

// MoveOf says how row's workload moved, and under which count; "" when it
// did not move (no trigger, nothing staged). oneWrite is why every
// workload of the run moved in one write ("" when they moved through a
// make-before-break mover).
func MoveOf(row rebalance.Row, oneWrite string) (count, how string) {
	switch {
	case len(row.Staged) > 0:
		return "madeBeforeBreak", "made before break: staged " + rebalance.FormatPlacement(row.Staged) + " before the release"
	case row.TriggeredAt != nil && row.OneWrite != "":
		return "oneWrite", "one write: " + row.OneWrite
	case row.TriggeredAt != nil && oneWrite != "":
		return "oneWrite", "one write: " + oneWrite
	case row.TriggeredAt != nil:
		return "oneWrite", "one write"
	case row.Message != "" && strings.Contains(row.Message, "make-before-break move stopped before the release"):
		return "stopped", "stopped before the release, undone: " + row.Message
	}
	return "", ""
}

// AddMoves adds the moves of rows to m (a resumed failback's to its
// earlier ones: a workload moved again counts once, as it moved last).
func (m *Moves) AddMoves(rows []rebalance.Row, oneWrite string) {
	if m.Workloads == nil {
		m.Workloads = map[string]string{}
	}
	for _, row := range rows {
		count, how := MoveOf(row, oneWrite)
		if count == "" {
			continue
		}
		key := workloadText(row.Workload)
		if _, seen := m.Workloads[key]; !seen && len(m.Workloads) >= maxMovesListed {
			m.count(count)
			continue
		}
		if old, seen := m.Workloads[key]; seen {
			m.uncount(old)
		}
		m.Workloads[key] = how
		m.count(count)
	}
}

func (m *Moves) count(what string) {
	switch what {
	case "madeBeforeBreak":
		m.MadeBeforeBreak++
	case "oneWrite":
		m.OneWrite++
	case "stopped":
		m.Stopped++
	}
}

// uncount takes back the count of an earlier note of a workload.
func (m *Moves) uncount(how string) {
	switch {
	case strings.HasPrefix(how, "made before break"):
		m.MadeBeforeBreak--
	case strings.HasPrefix(how, "one write"):
		m.OneWrite--
	default:
		m.Stopped--
	}
}

// Text is a short line for logs: "2 made before break, 1 in one write".
func (m Moves) Text() string {
	s := fmt.Sprintf("%d made before break, %d in one write", m.MadeBeforeBreak, m.OneWrite)
	if m.Stopped > 0 {
		s += fmt.Sprintf(", %d stopped before the release", m.Stopped)
	}
	return s
}

// ReadMoves reads MovesAnnotation of annotations (zero when absent or
// unreadable).
func ReadMoves(annotations map[string]string) Moves {
	var m Moves
	if raw := annotations[MovesAnnotation]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &m)
	}
	return m
}

// NoteMoves adds the moves of rows to MovesAnnotation on the record name.
func (l Ledger) NoteMoves(ctx context.Context, name string, rows []rebalance.Row, oneWrite string) (Moves, error) {
	rb, err := l.Client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Moves{}, fmt.Errorf("cannot read workloadrebalancer %s to note its moves: %w", name, err)
	}
	m := ReadMoves(rb.Annotations)
	m.AddMoves(rows, oneWrite)
	data, err := json.Marshal(m)
	if err != nil {
		return m, err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": rb.ResourceVersion,
		"annotations":     map[string]string{MovesAnnotation: string(data)},
	}})
	if err != nil {
		return m, err
	}
	if _, err := l.Client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return m, fmt.Errorf("cannot annotate workloadrebalancer %s with its moves: %w", name, err)
	}
	return m, nil
}
