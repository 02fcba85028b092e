package deschedule

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
)

// EvictionsAnnotation is the binding annotation in which a pass records,
// per member cluster, the assignment it lowered the cluster to and when. The
// next pass reads it to tell a replica the scheduler put straight back from a
// new one. Removing the annotation makes the descheduler try that cluster
// again at once.
const EvictionsAnnotation = "deschedule.kubectl-rebalance.io/evictions"

// ReasonDescheduleBouncedBack is the Warning event reason recorded, once per
// bounce, on a binding and its template when the scheduler put evicted
// replicas back on a cluster where they cannot run.
const ReasonDescheduleBouncedBack = "DescheduleBindingBouncedBack"

// DefaultRetryBouncedAfter is how long a bounced-back cluster is left alone
// before a pass evicts from it once more.
const DefaultRetryBouncedAfter = time.Hour

// Eviction is what a pass wrote for one cluster of a binding.
type Eviction struct {
	// To is the assignment the pass lowered the cluster to.
	To int32 `json:"to"`
	// At is when the pass wrote it.
	At time.Time `json:"at"`
	// BouncedAt is when a later pass found the scheduler had given the
	// cluster replicas again; zero until then. It is set once, so the
	// warning event is recorded once per bounce.
	BouncedAt time.Time `json:"bouncedAt,omitzero"`
}

// Evictions maps a member cluster name to its last eviction.
type Evictions map[string]Eviction

// ReadEvictions parses the evictions annotation of rb. A missing or
// unreadable annotation gives an empty record: at worst the pass evicts once
// more, as it would without a record.
func ReadEvictions(rb *workv1alpha2.ResourceBinding) Evictions {
	raw, ok := rb.Annotations[EvictionsAnnotation]
	if !ok {
		return Evictions{}
	}
	var out Evictions
	if err := json.Unmarshal([]byte(raw), &out); err != nil || out == nil {
		return Evictions{}
	}
	return out
}

// annotationValue is the JSON written to the annotation; map keys are
// sorted by encoding/json, so the same record always gives the same text.
func (e Evictions) annotationValue() string {
	data, _ := json.Marshal(e) // a map of plain structs always encodes
	return string(data)
}

// withEvictions returns e plus a record for every row that evicts, dated at.
func (e Evictions) withEvictions(rows []ClusterRow, at time.Time) Evictions {
	out := maps.Clone(e)
	if out == nil {
		out = Evictions{}
	}
	for _, r := range rows {
		if r.Evicted() > 0 {
			out[r.Cluster] = Eviction{To: r.New, At: at.UTC().Truncate(time.Second)}
		}
	}
	return out
}

// bounceCandidate returns the eviction of cluster that still counts at now:
// one recorded less than retryAfter ago. A replica the scheduler puts back on
// such a cluster, and that is unschedulable again, has bounced back.
func (e Evictions) bounceCandidate(cluster string, now time.Time, retryAfter time.Duration) *Eviction {
	ev, ok := e[cluster]
	if !ok || (retryAfter > 0 && now.Sub(ev.At) >= retryAfter) {
		return nil
	}
	return &ev
}

// newlyBounced lists the clusters of rows that bounced back and whose
// record has no BouncedAt yet, in row order.
func (e Evictions) newlyBounced(rows []ClusterRow) []string {
	var out []string
	for _, r := range rows {
		if r.Action == ActionBouncedBack && e[r.Cluster].BouncedAt.IsZero() {
			out = append(out, r.Cluster)
		}
	}
	return out
}

// markBounced returns e with BouncedAt set to at for clusters.
func (e Evictions) markBounced(clusters []string, at time.Time) Evictions {
	out := maps.Clone(e)
	for _, c := range clusters {
		ev := out[c]
		ev.BouncedAt = at.UTC().Truncate(time.Second)
		out[c] = ev
	}
	return out
}

// BounceMessage explains bounced-back rows in plain words, for the table,
// the event and the logs. It is empty when no row bounced back.
func BounceMessage(rows []ClusterRow, evictions Evictions) string {
	var parts []string
	for _, r := range rows {
		if r.Action != ActionBouncedBack {
			continue
		}
		ev := evictions[r.Cluster]
		parts = append(parts, fmt.Sprintf("karmada-scheduler gave cluster(%s) %d replica(s) again after a pass lowered it to %d at %s, and %d are unschedulable again",
			r.Cluster, r.Spec, ev.To, ev.At.UTC().Format(time.RFC3339), r.Unschedulable))
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ") + ": the scheduler still sees room there, as it does for cordoned or tainted nodes " +
		"when it runs without karmada-scheduler-estimator; not evicting again (remove annotation " +
		EvictionsAnnotation + " from the binding to retry now)"
}
