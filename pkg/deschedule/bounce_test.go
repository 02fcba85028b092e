package deschedule

import (
	"context"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestReadEvictions(t *testing.T) {
	at := time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		annotation *string
		want       Evictions
	}{
		{name: "no annotation", want: Evictions{}},
		{name: "unreadable annotation counts as none", annotation: ptrTo("{not json"), want: Evictions{}},
		{name: "null counts as none", annotation: ptrTo("null"), want: Evictions{}},
		{
			name:       "a record",
			annotation: ptrTo(`{"m1":{"to":0,"at":"2026-11-23T06:00:00Z"}}`),
			want:       Evictions{"m1": {To: 0, At: at}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb := newBinding("default", "web", cluster{"m1", 1, 0})
			if tt.annotation != nil {
				rb.Annotations[EvictionsAnnotation] = *tt.annotation
			}
			assert.Equal(t, tt.want, ReadEvictions(rb))
		})
	}
}

func TestEvictionsRecordAndExpire(t *testing.T) {
	at := time.Date(2026, 11, 23, 6, 0, 0, 500, time.UTC)
	rows := []ClusterRow{
		{Cluster: "m1", Spec: 3, New: 1, Action: ActionEvict},
		{Cluster: "m2", Spec: 2, New: 2, Action: ActionReady},
	}
	e := Evictions{"m2": {To: 1, At: at.Truncate(time.Second).Add(-time.Minute)}}.withEvictions(rows, at)
	assert.Equal(t, Eviction{To: 1, At: at.Truncate(time.Second)}, e["m1"])
	assert.Equal(t, `{"m1":{"to":1,"at":"2026-11-23T06:00:00Z"},"m2":{"to":1,"at":"2026-11-23T05:59:00Z"}}`, e.annotationValue())

	assert.NotNil(t, e.bounceCandidate("m1", at.Add(59*time.Minute), time.Hour))
	assert.Nil(t, e.bounceCandidate("m1", at.Add(61*time.Minute), time.Hour), "an old eviction no longer holds the cluster")
	assert.Nil(t, e.bounceCandidate("m3", at, time.Hour))
}

func TestBounceMessage(t *testing.T) {
	at := time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)
	rows := []ClusterRow{{Cluster: "member1", Spec: 1, Unschedulable: 1, New: 1, Action: ActionBouncedBack}}
	msg := BounceMessage(rows, Evictions{"member1": {To: 0, At: at}})
	assert.Contains(t, msg, "karmada-scheduler gave cluster(member1) 1 replica(s) again after a pass lowered it to 0 at 2026-11-23T06:00:00Z, and 1 are unschedulable again")
	assert.Contains(t, msg, "without karmada-scheduler-estimator")
	assert.Contains(t, msg, EvictionsAnnotation)
	assert.Empty(t, BounceMessage([]ClusterRow{{Cluster: "m1", Action: ActionEvict}}, nil))
}

// TestPassBounceBack plays the loop the descheduler falls into when the
// scheduler has no estimator: evict, see the replica put back on the same
// cluster, and then leave it there with one warning instead of evicting again.
func TestPassBounceBack(t *testing.T) {
	web := newBinding("default", "web", cluster{"m1", 1, 0}, cluster{"m2", 1, 1})
	f := newPassFixture([]*workv1alpha2.ResourceBinding{web}, map[string]*fake.Clientset{
		"m1": memberCluster(memberWorkload{"default", "web", 0, 1}),
	})
	d := f.descheduler(t, Options{})
	// Event names carry their time: give each event its own instant.
	var tick time.Duration
	d.events.(*EventClient).now = func() time.Time { tick += time.Millisecond; return testNow.Add(tick) }

	first, err := d.Pass(context.Background())
	require.NoError(t, err)
	require.Equal(t, OutcomeDescheduled, first.Bindings[0].Outcome)
	assert.Equal(t, []workv1alpha2.TargetCluster{{Name: "m1", Replicas: 0}, {Name: "m2", Replicas: 1}}, f.clusters(t, "default", "web-deployment"))

	// The scheduler, seeing room in m1, gives it the replica again.
	rb, err := f.karmada.WorkV1alpha2().ResourceBindings("default").Get(context.Background(), "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, Evictions{"m1": {To: 0, At: testNow.UTC().Truncate(time.Second)}}, ReadEvictions(rb))
	rb.Spec.Clusters[0].Replicas = 1
	_, err = f.karmada.WorkV1alpha2().ResourceBindings("default").Update(context.Background(), rb, metav1.UpdateOptions{})
	require.NoError(t, err)

	second, err := d.Pass(context.Background())
	require.NoError(t, err)
	br := second.Bindings[0]
	assert.Equal(t, OutcomeBouncedBack, br.Outcome)
	assert.Equal(t, ActionBouncedBack, br.Rows[0].Action)
	assert.Equal(t, int32(0), br.Evicted)
	assert.Equal(t, []string{"m1"}, br.NewlyBounced)
	assert.Contains(t, br.Message, "karmada-scheduler gave cluster(m1) 1 replica(s) again")
	assert.Contains(t, second.Summary(), "1 bounced back")
	assert.Equal(t, []workv1alpha2.TargetCluster{{Name: "m1", Replicas: 1}, {Name: "m2", Replicas: 1}}, f.clusters(t, "default", "web-deployment"))
	rb, err = f.karmada.WorkV1alpha2().ResourceBindings("default").Get(context.Background(), "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, ReadEvictions(rb)["m1"].BouncedAt.IsZero(), "the bounce is written down")

	// A third pass reports the same, without another warning.
	third, err := d.Pass(context.Background())
	require.NoError(t, err)
	assert.Equal(t, OutcomeBouncedBack, third.Bindings[0].Outcome)
	assert.Empty(t, third.Bindings[0].NewlyBounced)
	var warnings int
	for _, e := range f.events(t) {
		if e.reason == ReasonDescheduleBouncedBack {
			warnings++
			assert.Equal(t, corev1.EventTypeWarning, e.eventType)
		}
	}
	assert.Equal(t, 2, warnings, "one warning on the binding and one on the template, once")

	// After the hold, the cluster is tried once more.
	later := testNow.Add(2 * DefaultRetryBouncedAfter)
	d.opts.Now = func() time.Time { return later }
	fourth, err := d.Pass(context.Background())
	require.NoError(t, err)
	assert.Equal(t, OutcomeDescheduled, fourth.Bindings[0].Outcome)
}

func ptrTo[T any](v T) *T { return &v }
