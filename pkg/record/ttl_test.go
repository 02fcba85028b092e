package record

import (
	"context"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A run that outlasts a short TTL still says why the object is deleted: the
// countdown is announced whether it has time left or is already due.
func TestFollowAnnouncesTheDeletion(t *testing.T) {
	tests := []struct {
		name     string
		finished time.Duration // how long ago the run finished
		ttl      int32
		want     string
	}{
		{name: "already due", finished: time.Minute, ttl: 3, want: "(ttlSecondsAfterFinished 3), now"},
		{name: "time left", finished: 0, ttl: 1, want: "(ttlSecondsAfterFinished 1), in "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			finish := metav1.NewTime(time.Now().Add(-tt.finished).Truncate(time.Second))
			rb := &appsv1alpha1.WorkloadRebalancer{
				ObjectMeta: metav1.ObjectMeta{Name: "done", Generation: 1},
				Spec: appsv1alpha1.WorkloadRebalancerSpec{
					Workloads:               []appsv1alpha1.ObjectReference{webDeploy},
					TTLSecondsAfterFinished: ptr.To(tt.ttl),
				},
				Status: appsv1alpha1.WorkloadRebalancerStatus{
					ObservedGeneration: 1,
					FinishTime:         &finish,
					ObservedWorkloads:  []appsv1alpha1.ObservedWorkload{{Workload: webDeploy, Result: appsv1alpha1.RebalanceSuccessful}},
				},
			}
			client := karmadafake.NewSimpleClientset(rb)
			var heard []string
			rec := &Recorder{Client: client.AppsV1alpha1().WorkloadRebalancers(), Notify: func(m string) { heard = append(heard, m) }}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			res, err := rec.Follow(ctx, rb, FollowOptions{})
			require.NoError(t, err)
			assert.Equal(t, FollowDeleted, res.Outcome)
			require.NotEmpty(t, heard)
			assert.Contains(t, heard[0], "workloadrebalancer done: finished at ")
			assert.Contains(t, heard[0], tt.want)
		})
	}
}
