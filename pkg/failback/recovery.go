package failback

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// Health is what failback needs to know of a Cluster at one moment.
type Health struct {
	// Healthy: the Ready condition is True and no taint keeps the
	// workloads to fail back off the cluster (effect NoSchedule or
	// NoExecute, and not tolerated by them).
	Healthy bool
	// Reason says why the cluster is not healthy, for logs and events.
	Reason string
	// Key identifies the cluster's current healthy spell: it changes with
	// every change of the Ready condition and of the spec (where taints
	// live), so a cluster that fails and recovers gets a new one.
	Key string
	// ReadySince is when the Ready condition last turned True; zero when
	// it is not True.
	ReadySince time.Time
}

// Observe reads the health of a Cluster. tolerated, when not nil, tells the
// NoSchedule and NoExecute taints the workloads to fail back tolerate: they
// do not keep the cluster from counting as healthy.
func Observe(cluster *clusterv1alpha1.Cluster, tolerated func(corev1.Taint) bool) Health {
	var h Health
	ready := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	var readyAt int64
	if ready != nil {
		readyAt = ready.LastTransitionTime.Unix()
	}
	h.Key = recoveryKey(cluster.Generation, readyAt)
	switch {
	case cluster.DeletionTimestamp != nil:
		h.Reason = "being deleted"
		return h
	case ready == nil:
		h.Reason = "no Ready condition yet"
		return h
	case ready.Status != "True":
		h.Reason = fmt.Sprintf("Ready is %s (%s)", ready.Status, ready.Reason)
		return h
	}
	h.ReadySince = ready.LastTransitionTime.Time
	var taints []string
	for _, t := range cluster.Spec.Taints {
		if blocking(t) && (tolerated == nil || !tolerated(t)) {
			taints = append(taints, t.ToString())
		}
	}
	if len(taints) > 0 {
		h.Reason = "tainted " + strings.Join(taints, ", ")
		return h
	}
	h.Healthy = true
	return h
}

// recoveryKey is a short stable hash of the spec generation and the Ready
// transition time: both daemons of a pair, and a daemon after a restart,
// compute the same key from the same Cluster.
func recoveryKey(generation, readyAt int64) string {
	f := fnv.New32a()
	fmt.Fprintf(f, "%d/%d", generation, readyAt)
	return fmt.Sprintf("%08x", f.Sum32())
}

// RecordName is the name of the WorkloadRebalancer that records the
// failback of one recovery of a cluster.
func RecordName(cluster, key string) string {
	name := "failback-" + cluster + "-" + key
	if len(name) > 253 {
		// Cluster names are DNS subdomains too; keep the key, which is
		// what makes the name unique per recovery.
		name = name[:253-len(key)-1] + "-" + key
	}
	return name
}

// Phase is where a cluster is in its recovery.
type Phase string

const (
	// PhaseUnknown: not seen yet.
	PhaseUnknown Phase = ""
	// PhaseSteady: healthy, with no recovery to act on (first seen
	// healthy, or its failback is over).
	PhaseSteady Phase = "Steady"
	// PhaseDown: not Ready, or tainted.
	PhaseDown Phase = "Down"
	// PhaseStabilizing: healthy again, waiting for the stabilization window.
	PhaseStabilizing Phase = "Stabilizing"
	// PhaseFailingBack: the window is over and the failback has fired.
	PhaseFailingBack Phase = "FailingBack"
)

// Timing is how long a recovered cluster must stay healthy before its
// failback.
type Timing struct {
	// Window is the stabilization window.
	Window time.Duration
	// Cooldown: a cluster that fails again less than Cooldown after its
	// last failback fired must then stay healthy for Cooldown (when it is
	// longer than Window) before the next failback: a cluster that keeps
	// failing is not failed back on every cycle.
	Cooldown time.Duration
}

// held is the window of a recovery that follows a failure within the
// cooldown.
func (t Timing) held() time.Duration {
	return max(t.Window, t.Cooldown)
}

// State is a cluster's recovery state.
type State struct {
	Phase Phase
	// Since is when the phase began: the start of the window while
	// Stabilizing, the moment the failback fired while FailingBack.
	Since time.Time
	// Key is the recovery's key while Stabilizing or FailingBack.
	Key string
	// Reason says why the cluster is Down.
	Reason string
	// Window is how long this recovery must stay healthy (Stabilizing).
	Window time.Duration
	// Held: the cluster failed within the cooldown after its last
	// failback; its next recovery waits for Timing.Cooldown. Kept through
	// flaps until a failback fires.
	Held bool
	// LastKey and LastFailback are the recovery whose failback fired last
	// and when, kept through every phase: workloads whose eviction from
	// the cluster ends later are failed back under that recovery while it
	// is still the cluster's current one, and the cooldown counts from it.
	LastKey      string
	LastFailback time.Time
}

// carry keeps the memory of the last failback, and the hold, from s in next.
func (s State) carry(next State) State {
	next.LastKey, next.LastFailback = s.LastKey, s.LastFailback
	next.Held = next.Held || s.Held
	return next
}

// Transition is what a Step did, for the caller to act on.
type Transition string

const (
	// Nothing worth reporting happened.
	Nothing Transition = ""
	// Failed: a healthy cluster went down.
	Failed Transition = "Failed"
	// Recovering: a down cluster became healthy; the window starts.
	Recovering Transition = "Recovering"
	// Flapped: the cluster went down during the window, which is reset.
	Flapped Transition = "Flapped"
	// Fire: the cluster stayed healthy for the whole window; fail back now.
	Fire Transition = "Fire"
	// Aborted: the cluster went down during its failback; stop it.
	Aborted Transition = "Aborted"
)

// Step is the recovery state machine. It takes a cluster's state, its
// health now, the time and the timing, and returns the next state and what
// happened. A recovery is the change from down to healthy: a cluster first
// seen healthy has none, unless its Ready condition turned True less than a
// window ago (a daemon that starts, or restarts, during a window picks it
// up). A cluster that fails less than a cooldown after its last failback
// fired is held: its next window lasts the cooldown. Step is called on
// every change of the Cluster and once more when a window is due to end.
func Step(s State, h Health, now time.Time, t Timing) (State, Transition) {
	next, tr := step0(s, h, now, t)
	if tr == Fire {
		next.LastKey, next.LastFailback, next.Held = next.Key, now, false
		next.Window = 0
		return next, tr
	}
	next = s.carry(next)
	if tr == Failed || tr == Aborted || s.Phase == PhaseUnknown && next.Phase == PhaseDown {
		next.Held = s.withinCooldown(now, t)
	}
	return next, tr
}

// withinCooldown reports whether a failure at now follows the last failback
// by less than the cooldown.
func (s State) withinCooldown(now time.Time, t Timing) bool {
	return !s.LastFailback.IsZero() && now.Sub(s.LastFailback) < t.Cooldown
}

// stabilizing is the state of a recovery that starts at since.
func (s State) stabilizing(since time.Time, key string, t Timing) State {
	w := t.Window
	if s.Held {
		w = t.held()
	}
	return State{Phase: PhaseStabilizing, Since: since, Key: key, Window: w, Held: s.Held}
}

func step0(s State, h Health, now time.Time, t Timing) (State, Transition) {
	if !h.Healthy {
		down := State{Phase: PhaseDown, Since: now, Reason: h.Reason}
		switch s.Phase {
		case PhaseDown:
			s.Reason = h.Reason
			return s, Nothing
		case PhaseStabilizing:
			return down, Flapped
		case PhaseFailingBack:
			return down, Aborted
		case PhaseSteady:
			return down, Failed
		}
		return down, Nothing
	}
	switch s.Phase {
	case PhaseUnknown:
		if !h.ReadySince.IsZero() {
			// The failure before this recovery came before ReadySince.
			s.Held = s.withinCooldown(h.ReadySince, t)
			st := s.stabilizing(h.ReadySince, h.Key, t)
			if now.Sub(h.ReadySince) < st.Window {
				return step(st, now, Recovering)
			}
		}
		return State{Phase: PhaseSteady, Since: now}, Nothing
	case PhaseDown:
		return step(s.stabilizing(now, h.Key, t), now, Recovering)
	case PhaseStabilizing:
		if h.Key != s.Key {
			// Ready turned or the spec changed between two observations
			// (a flap the watch did not show, or a new taint set):
			// the window starts again.
			return s.stabilizing(now, h.Key, t), Flapped
		}
		return step(s, now, Nothing)
	}
	return s, Nothing
}

// step fires a Stabilizing state whose window is over; otherwise it keeps
// the state and reports t.
func step(s State, now time.Time, t Transition) (State, Transition) {
	if now.Sub(s.Since) >= s.Window {
		return State{Phase: PhaseFailingBack, Since: now, Key: s.Key}, Fire
	}
	return s, t
}

// Finished ends a failback: the cluster is Steady until it fails again.
// Any other state is returned as it is.
func Finished(s State, now time.Time) State {
	if s.Phase != PhaseFailingBack {
		return s
	}
	return s.carry(State{Phase: PhaseSteady, Since: now})
}

// Current reports whether the failback of the recovery key is the last one
// that fired and the cluster has stayed healthy since (Steady or still
// FailingBack): then workloads whose eviction ends later still belong to it.
func Current(s State, key string) bool {
	return s.LastKey == key && key != "" && (s.Phase == PhaseSteady || s.Phase == PhaseFailingBack)
}

// WindowEnds is when a Stabilizing state's window is over; ok is false in
// any other phase.
func WindowEnds(s State) (time.Time, bool) {
	if s.Phase != PhaseStabilizing {
		return time.Time{}, false
	}
	return s.Since.Add(s.Window), true
}
