package run

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

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
)

// TestTTLLeftToTheController: a finished record with a ttl that Karmada's
// workloadRebalancer controller is seen to handle, on a release whose
// controller deletes finished records, is left to it: the run says when it
// is due and returns at once. Without a sign of the controller, on v1.12, or
// with --wait-ttl given, the run stays to delete it (here: until Ctrl-C).
func TestTTLLeftToTheController(t *testing.T) {
	finished := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	record1 := func(managers ...string) *appsv1alpha1.WorkloadRebalancer {
		rb := &appsv1alpha1.WorkloadRebalancer{
			ObjectMeta: metav1.ObjectMeta{Name: "after-failover", Generation: 1},
			Spec:       appsv1alpha1.WorkloadRebalancerSpec{TTLSecondsAfterFinished: ptr.To[int32](3600)},
			Status:     appsv1alpha1.WorkloadRebalancerStatus{ObservedGeneration: 1, FinishTime: &finished},
		}
		for _, m := range managers {
			rb.ManagedFields = append(rb.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"})
		}
		return rb
	}
	release := func(minor int) func() (karmadaversion.Info, error) {
		return func() (karmadaversion.Info, error) {
			return karmadaversion.Info{Oldest: karmadaversion.Release{Minor: minor}, Newest: karmadaversion.Release{Minor: minor}, Evidence: "evidence"}, nil
		}
	}
	due := finished.Add(time.Hour).UTC().Format(time.RFC3339)
	tests := []struct {
		name     string
		obj      *appsv1alpha1.WorkloadRebalancer
		onServer *appsv1alpha1.WorkloadRebalancer
		minor    int
		leave    bool
		serverSd bool
		left     bool
	}{
		{name: "the controller wrote it", obj: record1("kubectl-rebalance", controllerManager), minor: 16, leave: true, left: true},
		{name: "the controller built as controller-manager wrote it", obj: record1("kubectl-rebalance", "controller-manager"), minor: 18, leave: true, left: true},
		{name: "the controller wrote it after the run's last read", obj: record1("kubectl-rebalance"), onServer: record1("kubectl-rebalance", controllerManager), minor: 16, leave: true, left: true},
		{name: "a server-side run followed the controller", obj: record1(), minor: 18, leave: true, serverSd: true, left: true},
		{name: "no sign of the controller", obj: record1("kubectl-rebalance"), minor: 16, leave: true},
		{name: "v1.12's controller never deletes it", obj: record1(controllerManager), minor: 12, leave: true},
		{name: "--wait-ttl given", obj: record1(controllerManager), minor: 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			onServer := tt.onServer
			if onServer == nil {
				onServer = tt.obj
			}
			client := karmadafake.NewSimpleClientset(onServer.DeepCopy())
			e := &Engine{Karmada: client, Release: release(tt.minor)}
			rec := &record.Recorder{Client: client.AppsV1alpha1().WorkloadRebalancers()}
			var notices []string
			req := Request{Record: Recording{WaitTTL: true, LeaveTTLToController: tt.leave, ServerSide: tt.serverSd},
				Hooks: Hooks{Notice: func(s string) { notices = append(notices, s) }}}
			// Staying is seen as the follow that Ctrl-C cuts short at once.
			ctx, cancel := context.WithCancel(context.Background())
			if !tt.left {
				cancel()
			}
			defer cancel()
			_, cutShort, err := e.followTTL(ctx, req, rec, tt.obj)
			require.NoError(t, err)
			if !tt.left {
				assert.True(t, cutShort, "the run stayed to delete it: %q", notices)
				for _, n := range notices {
					assert.NotContains(t, n, "does not wait")
				}
				return
			}
			assert.False(t, cutShort)
			require.Len(t, notices, 1, "%q", notices)
			assert.Equal(t, "workloadrebalancer after-failover is complete; Karmada's workloadRebalancer controller, which handles it, deletes it at "+due+
				" (ttlSecondsAfterFinished 3600 after its finish time), so this command does not wait for it: `kubectl rebalance get after-failover` shows it until then, "+
				"and --wait-ttl makes the command wait and delete it itself", notices[0])
			got, err := client.AppsV1alpha1().WorkloadRebalancers().Get(context.Background(), "after-failover", metav1.GetOptions{})
			require.NoError(t, err)
			assert.NotNil(t, got, "left in place for the controller")
		})
	}
}
