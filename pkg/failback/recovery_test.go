package failback

import (
	"fmt"
	"strings"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(seconds int) time.Time { return t0.Add(time.Duration(seconds) * time.Second) }

func cluster(generation int64, ready metav1.ConditionStatus, readyAt time.Time, taints ...corev1.Taint) *clusterv1alpha1.Cluster {
	c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1", Generation: generation}}
	c.Spec.Taints = taints
	if ready != "" {
		c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: ready, Reason: "ClusterReady", LastTransitionTime: metav1.NewTime(readyAt)}}
	}
	return c
}

func TestObserve(t *testing.T) {
	noExecute := corev1.Taint{Key: "fail", Effect: corev1.TaintEffectNoExecute}
	noSchedule := corev1.Taint{Key: "cluster.karmada.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	prefer := corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}
	deleting := cluster(1, metav1.ConditionTrue, t0)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	tests := []struct {
		name    string
		cluster *clusterv1alpha1.Cluster
		healthy bool
		reason  string
	}{
		{"ready and untainted", cluster(1, metav1.ConditionTrue, t0), true, ""},
		{"a PreferNoSchedule taint keeps nothing off", cluster(1, metav1.ConditionTrue, t0, prefer), true, ""},
		{"NoExecute", cluster(2, metav1.ConditionTrue, t0, noExecute), false, "tainted fail:NoExecute"},
		{"NoSchedule", cluster(2, metav1.ConditionTrue, t0, noSchedule, prefer), false, "tainted cluster.karmada.io/not-ready:NoSchedule"},
		{"not ready", cluster(1, metav1.ConditionFalse, t0), false, "Ready is False (ClusterReady)"},
		{"unknown", cluster(1, metav1.ConditionUnknown, t0), false, "Ready is Unknown (ClusterReady)"},
		{"no condition", cluster(1, "", t0), false, "no Ready condition yet"},
		{"deleting", deleting, false, "being deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Observe(tt.cluster, nil)
			assert.Equal(t, tt.healthy, h.Healthy)
			assert.Equal(t, tt.reason, h.Reason)
			assert.Len(t, h.Key, 8)
		})
	}
}

// TestObserveTolerated: a NoSchedule taint the workloads to fail back
// tolerate does not keep the cluster from being healthy; others still do.
func TestObserveTolerated(t *testing.T) {
	dedicated := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	fail := corev1.Taint{Key: "fail", Effect: corev1.TaintEffectNoExecute}
	tolerated := func(t corev1.Taint) bool { return t.Key == "dedicated" }
	assert.True(t, Observe(cluster(1, metav1.ConditionTrue, t0, dedicated), tolerated).Healthy)
	assert.False(t, Observe(cluster(1, metav1.ConditionTrue, t0, dedicated), nil).Healthy)
	h := Observe(cluster(1, metav1.ConditionTrue, t0, dedicated, fail), tolerated)
	assert.False(t, h.Healthy)
	assert.Equal(t, "tainted fail:NoExecute", h.Reason)
	assert.False(t, Observe(cluster(1, metav1.ConditionFalse, t0, dedicated), tolerated).Healthy, "tolerating a taint does not make a NotReady cluster healthy")
}

func TestObserveKey(t *testing.T) {
	base := Observe(cluster(3, metav1.ConditionTrue, t0), nil)
	assert.Equal(t, base.Key, Observe(cluster(3, metav1.ConditionTrue, t0), nil).Key, "the same cluster gives the same key, in any process")
	assert.NotEqual(t, base.Key, Observe(cluster(5, metav1.ConditionTrue, t0), nil).Key, "a taint added and removed changes the generation")
	assert.NotEqual(t, base.Key, Observe(cluster(3, metav1.ConditionTrue, at(60)), nil).Key, "Ready turning again changes the transition time")
	assert.Equal(t, t0, base.ReadySince)
}

func TestRecordName(t *testing.T) {
	assert.Equal(t, "failback-member1-0a1b2c3d", RecordName("member1", "0a1b2c3d"))
	long := RecordName(strings.Repeat("c", 260), "0a1b2c3d")
	assert.Len(t, long, 253)
	assert.True(t, strings.HasSuffix(long, "-0a1b2c3d"))
}

func TestStep(t *testing.T) {
	const window = 5 * time.Minute
	healthy := Health{Healthy: true, Key: "k1"}
	healthy2 := Health{Healthy: true, Key: "k2"}
	down := Health{Reason: "tainted fail:NoExecute", Key: "k0"}
	tests := []struct {
		name  string
		from  State
		h     Health
		now   time.Time
		want  State
		trans Transition
	}{
		{"first seen healthy: no recovery", State{}, healthy, at(0), State{Phase: PhaseSteady, Since: at(0)}, Nothing},
		{"first seen healthy, Ready less than a window ago: the window started then",
			State{}, Health{Healthy: true, Key: "k1", ReadySince: at(-60)}, at(0), State{Phase: PhaseStabilizing, Since: at(-60), Key: "k1"}, Recovering},
		{"first seen healthy, Ready a window ago: steady",
			State{}, Health{Healthy: true, Key: "k1", ReadySince: at(-300)}, at(0), State{Phase: PhaseSteady, Since: at(0)}, Nothing},
		{"first seen down", State{}, down, at(0), State{Phase: PhaseDown, Since: at(0), Reason: down.Reason}, Nothing},
		{"steady fails", State{Phase: PhaseSteady}, down, at(10), State{Phase: PhaseDown, Since: at(10), Reason: down.Reason}, Failed},
		{"down stays down, the reason follows", State{Phase: PhaseDown, Since: at(0), Reason: "x"}, down, at(10), State{Phase: PhaseDown, Since: at(0), Reason: down.Reason}, Nothing},
		{"down recovers: the window starts", State{Phase: PhaseDown, Since: at(0)}, healthy, at(10), State{Phase: PhaseStabilizing, Since: at(10), Key: "k1"}, Recovering},
		{"down recovers with no window: fires at once", State{Phase: PhaseDown}, healthy, at(10), State{Phase: PhaseFailingBack, Since: at(10), Key: "k1"}, Fire},
		{"within the window", State{Phase: PhaseStabilizing, Since: at(10), Key: "k1"}, healthy, at(309), State{Phase: PhaseStabilizing, Since: at(10), Key: "k1"}, Nothing},
		{"window over: fire", State{Phase: PhaseStabilizing, Since: at(10), Key: "k1"}, healthy, at(310), State{Phase: PhaseFailingBack, Since: at(310), Key: "k1"}, Fire},
		{"flap during the window resets it", State{Phase: PhaseStabilizing, Since: at(10), Key: "k1"}, down, at(200), State{Phase: PhaseDown, Since: at(200), Reason: down.Reason}, Flapped},
		{"a flap the watch missed resets the window too", State{Phase: PhaseStabilizing, Since: at(10), Key: "k1"}, healthy2, at(200), State{Phase: PhaseStabilizing, Since: at(200), Key: "k2"}, Flapped},
		{"failing back stays", State{Phase: PhaseFailingBack, Since: at(310), Key: "k1"}, healthy, at(400), State{Phase: PhaseFailingBack, Since: at(310), Key: "k1"}, Nothing},
		{"failing back, the key moves on: still the same failback", State{Phase: PhaseFailingBack, Since: at(310), Key: "k1"}, healthy2, at(400), State{Phase: PhaseFailingBack, Since: at(310), Key: "k1"}, Nothing},
		{"fails during the failback: abort", State{Phase: PhaseFailingBack, Since: at(310), Key: "k1"}, down, at(400), State{Phase: PhaseDown, Since: at(400), Reason: down.Reason}, Aborted},
		{"steady stays steady", State{Phase: PhaseSteady, Since: at(0)}, healthy2, at(400), State{Phase: PhaseSteady, Since: at(0)}, Nothing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := window
			if strings.Contains(tt.name, "no window") {
				w = 0
			}
			if tt.from.Phase == PhaseStabilizing {
				tt.from.Window = w
			}
			got, trans := Step(tt.from, tt.h, tt.now, Timing{Window: w})
			// The window and the memory of the last failback have their
			// own tests.
			got.Window, got.LastKey, got.LastFailback = 0, "", time.Time{}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.trans, trans)
		})
	}
}

// TestStepStory plays the seed's failover and recovery, with a flap, as a
// sequence: exactly one Fire, at the end of the window after the last flap.
func TestStepStory(t *testing.T) {
	const window = 20 * time.Second
	healthy := Health{Healthy: true, Key: "k1"}
	tainted := Health{Reason: "tainted", Key: "k0"}
	events := []struct {
		at int
		h  Health
	}{
		{0, healthy}, {5, tainted}, {30, healthy}, {40, tainted}, {45, healthy},
		{50, healthy}, {64, healthy}, {65, healthy}, {70, healthy}, {100, healthy},
	}
	var s State
	var got []string
	for _, e := range events {
		var tr Transition
		s, tr = Step(s, e.h, at(e.at), Timing{Window: window})
		if tr != Nothing {
			got = append(got, string(tr)+"@"+time.Duration(e.at*int(time.Second)).String())
		}
	}
	require.Equal(t, []string{"Failed@5s", "Recovering@30s", "Flapped@40s", "Recovering@45s", "Fire@1m5s"}, got)
	assert.Equal(t, PhaseSteady, Finished(s, at(120)).Phase)
	assert.Equal(t, PhaseDown, Finished(State{Phase: PhaseDown}, at(120)).Phase, "only a failback finishes")
}

func TestWindowEnds(t *testing.T) {
	end, ok := WindowEnds(State{Phase: PhaseStabilizing, Since: at(10), Window: time.Minute})
	assert.True(t, ok)
	assert.Equal(t, at(70), end)
	_, ok = WindowEnds(State{Phase: PhaseDown, Window: time.Minute})
	assert.False(t, ok)
}

// play steps a cluster through health changes at the given seconds and
// returns the transitions worth reporting, as "Transition@seconds".
func play(t Timing, events []struct {
	at int
	h  Health
}) (State, []string) {
	var s State
	var got []string
	for _, e := range events {
		var tr Transition
		s, tr = Step(s, e.h, at(e.at), t)
		if tr == Fire {
			s = Finished(s, at(e.at))
		}
		if tr != Nothing {
			got = append(got, fmt.Sprintf("%s@%d", tr, e.at))
		}
	}
	return s, got
}

// TestStepCooldown: a slow flap (up longer than the window, down shorter)
// fails back once; the failures that follow within the cooldown hold the
// next recovery for the cooldown, so the fleet does not move on every
// cycle. Once the cluster stays up for the cooldown it fails back again.
func TestStepCooldown(t *testing.T) {
	timing := Timing{Window: 20 * time.Second, Cooldown: 120 * time.Second}
	up := func(k string) Health { return Health{Healthy: true, Key: k} }
	down := Health{Reason: "tainted"}
	events := []struct {
		at int
		h  Health
	}{
		{0, up("k0")}, {10, down}, {20, up("k1")}, {40, up("k1")}, // fires at 40
		{70, down}, {80, up("k2")}, {110, up("k2")}, // up 30 s > window: held, no fire
		{140, down}, {150, up("k3")}, {180, up("k3")}, {250, up("k3")}, {269, up("k3")}, // held for the cooldown from 150
		{270, up("k3")},                               // fires at 270
		{400, down}, {410, up("k4")}, {430, up("k4")}, // a failure after the cooldown: the plain window
	}
	s, got := play(timing, events)
	assert.Equal(t, []string{"Failed@10", "Recovering@20", "Fire@40", "Failed@70", "Recovering@80", "Flapped@140", "Recovering@150", "Fire@270",
		"Failed@400", "Recovering@410", "Fire@430"}, got)
	assert.Equal(t, "k4", s.LastKey)
	assert.Equal(t, at(430), s.LastFailback)

	// Without a cooldown the slow flap fails back on every cycle.
	_, got = play(Timing{Window: 20 * time.Second}, events[:7])
	assert.Equal(t, []string{"Failed@10", "Recovering@20", "Fire@40", "Failed@70", "Recovering@80", "Fire@110"}, got)
}

// TestStepCooldownFromRecords: a daemon that starts knowing the last
// failback (from its record) holds a recovery that follows it closely.
func TestStepCooldownFromRecords(t *testing.T) {
	timing := Timing{Window: 20 * time.Second, Cooldown: 120 * time.Second}
	known := State{LastKey: "k1", LastFailback: at(0)}
	s, tr := Step(known, Health{Healthy: true, Key: "k2", ReadySince: at(60)}, at(70), timing)
	assert.Equal(t, Recovering, tr)
	assert.Equal(t, PhaseStabilizing, s.Phase)
	assert.Equal(t, 120*time.Second, s.Window)
	assert.True(t, s.Held)
	s, tr = Step(known, Health{Healthy: true, Key: "k2", ReadySince: at(200)}, at(210), timing)
	assert.Equal(t, Recovering, tr)
	assert.Equal(t, 20*time.Second, s.Window, "a failure after the cooldown")
	s, tr = Step(known, Health{Reason: "down"}, at(60), timing)
	assert.Equal(t, Nothing, tr)
	assert.True(t, s.Held, "first seen down within the cooldown")
}
