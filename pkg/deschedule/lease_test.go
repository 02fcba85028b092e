package deschedule

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func TestHolderIdentity(t *testing.T) {
	assert.Equal(t, "kubectl-rebalance/pod-1", HolderIdentity("pod-1"))
	assert.Equal(t, "kubectl-rebalance/pod-1", HolderIdentity("kubectl-rebalance/pod-1"), "never twice")
}

func TestFindForeignLeader(t *testing.T) {
	server := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lease := func(holder string, renewedAgo time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "karmada-system", Name: "karmada-descheduler"},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(holder),
				LeaseDurationSeconds: ptr.To[int32](15),
				RenewTime:            ptr.To(metav1.NewMicroTime(server.Add(-renewedAgo))),
			},
		}
	}
	tests := []struct {
		name       string
		lease      *coordinationv1.Lease
		noServer   bool
		wantHolder string
	}{
		{name: "no lease"},
		{name: "karmada-descheduler renewing", lease: lease("karmada-descheduler-5d8f-x2k_0c9a", 3*time.Second), wantHolder: "karmada-descheduler-5d8f-x2k_0c9a"},
		{name: "karmada-descheduler gone", lease: lease("karmada-descheduler-5d8f-x2k_0c9a", 16*time.Second)},
		{name: "just expired", lease: lease("karmada-descheduler-5d8f-x2k_0c9a", 15*time.Second)},
		{name: "one of ours", lease: lease("kubectl-rebalance/pod-1", time.Second)},
		{name: "released", lease: lease("", time.Second)},
		{name: "server time unknown", lease: lease("other_1", time.Hour), noServer: true, wantHolder: "other_1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objects []runtime.Object
			if tt.lease != nil {
				objects = append(objects, tt.lease)
			}
			client := fake.NewClientset(objects...)
			found, err := FindForeignLeader(context.Background(), client, "karmada-system", "karmada-descheduler", func() (time.Time, bool) {
				return server, !tt.noServer
			})
			require.NoError(t, err)
			if tt.wantHolder == "" {
				assert.Nil(t, found)
				return
			}
			require.NotNil(t, found)
			assert.Equal(t, tt.wantHolder, found.Holder)
			assert.Contains(t, found.Error(), `lease karmada-system/karmada-descheduler is held by "`+tt.wantHolder+`", which is not a kubectl-rebalance daemon`)
			assert.Contains(t, found.Error(), "pass --force")
		})
	}

	client := fake.NewClientset()
	client.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "karmada-descheduler", nil)
	})
	_, err := FindForeignLeader(context.Background(), client, "karmada-system", "karmada-descheduler", func() (time.Time, bool) { return server, true })
	assert.ErrorContains(t, err, "cannot read lease karmada-system/karmada-descheduler to check that karmada-descheduler is not running: ")
	assert.True(t, apierrors.IsForbidden(err), "the cause stays, for the command to explain")
}
