package record

import (
	"context"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

var (
	// mismatched has a binding that belongs to another workload.
	mismatched = rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "cart"}
	// recreated has a binding left from an older template (another uid).
	recreated = rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "pay"}
	// rejected has a binding whose trigger write the API server refuses.
	rejected = rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "odd"}
)

// scheduled is a binding of w scheduled an hour before serverNow, whose
// spec.resource names owner.
func scheduled(w, owner rebalance.Workload, uid types.UID) *workv1alpha2.ResourceBinding {
	last := metav1.NewTime(serverNow.Add(-time.Hour))
	return &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: rebalance.BindingNameFor(w), ResourceVersion: "1", Generation: 1,
			Labels: map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: "p-1"}},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Namespace: owner.Namespace, Name: owner.Name, UID: uid},
			Clusters: []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 1}},
		},
		Status: workv1alpha2.ResourceBindingStatus{LastScheduledTime: &last, SchedulerObservedGeneration: 1},
	}
}

// newReconcileFixture holds a WorkloadRebalancer "demo" of webDeploy, gone
// (no binding), mismatched, recreated and rejected, none triggered yet.
func newReconcileFixture(t *testing.T) (*karmadafake.Clientset, *Recorder) {
	t.Helper()
	other := rebalance.Workload{APIVersion: "apps.example.io/v1", Kind: "Deployment", Namespace: "shop", Name: "cart"}
	client := karmadafake.NewSimpleClientset(
		scheduled(webDeploy, webDeploy, ""),
		scheduled(mismatched, other, ""),
		scheduled(recreated, recreated, "old-uid"),
		scheduled(rejected, rejected, ""),
		&appsv1alpha1.WorkloadRebalancer{
			ObjectMeta: metav1.ObjectMeta{Name: "demo", Generation: 1, CreationTimestamp: metav1.NewTime(serverNow)},
			Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{webDeploy, gone, mismatched, recreated, rejected}},
		},
	)
	client.PrependReactor("patch", "resourcebindings", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.(clienttesting.PatchAction).GetName() != rebalance.BindingNameFor(rejected) {
			return false, nil, nil
		}
		// A 422 that names the object and field is a rejection, not a
		// failed patch test.
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "work.karmada.io", Kind: "ResourceBinding"}, rebalance.BindingNameFor(rejected),
			field.ErrorList{field.Forbidden(field.NewPath("spec", "rescheduleTriggeredAt"), "refused by a webhook")})
	})
	rec := &Recorder{
		Client: client.AppsV1alpha1().WorkloadRebalancers(),
		Runner: &rebalance.Runner{
			API:   rebalance.NewBindingAPI(client),
			Clock: rebalance.NewServerClock(),
			Options: rebalance.Options{Workers: 2,
				Backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30}},
		},
		Known:   map[rebalance.Workload]rebalance.Target{recreated: {UID: "new-uid"}},
		Backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30},
	}
	return client, rec
}

func reconcileDemo(t *testing.T, client *karmadafake.Clientset, rec *Recorder) *Pass {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rb, err := client.AppsV1alpha1().WorkloadRebalancers().Get(ctx, "demo", metav1.GetOptions{})
	require.NoError(t, err)
	pass, err := rec.Reconcile(ctx, rb)
	require.NoError(t, err)
	return pass
}

func statusOf(t *testing.T, client *karmadafake.Clientset) map[rebalance.Workload]appsv1alpha1.ObservedWorkload {
	t.Helper()
	rb, err := client.AppsV1alpha1().WorkloadRebalancers().Get(context.Background(), "demo", metav1.GetOptions{})
	require.NoError(t, err)
	out := map[rebalance.Workload]appsv1alpha1.ObservedWorkload{}
	for _, entry := range rb.Status.ObservedWorkloads {
		out[entry.Workload] = entry
	}
	return out
}

// The status only ever holds what Karmada's controller could write:
// Successful, or Failed with ReferencedBindingNotFound. A binding of another
// workload, a binding of an older template and a rejected write leave the
// entry pending, explained in the rows, and a later pass tries them again.
func TestReconcileRecordsOnlyWhatTheControllerCould(t *testing.T) {
	client, rec := newReconcileFixture(t)
	pass := reconcileDemo(t, client, rec)

	status := statusOf(t, client)
	require.Len(t, status, 5)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, status[webDeploy].Result)
	assert.Equal(t, appsv1alpha1.ObservedWorkload{Workload: gone, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound}, status[gone])
	for _, w := range []rebalance.Workload{mismatched, recreated, rejected} {
		assert.Equal(t, appsv1alpha1.ObservedWorkload{Workload: w}, status[w], "%s stays pending, as the controller would leave it", w.Name)
	}
	rb, err := client.AppsV1alpha1().WorkloadRebalancers().Get(context.Background(), "demo", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, rb.Status.FinishTime, "not finished while entries are pending")

	rows := map[rebalance.Workload]rebalance.Row{}
	for _, row := range pass.Rows {
		rows[row.Workload] = row
	}
	for w, reason := range map[rebalance.Workload]string{mismatched: rebalance.ReasonBindingMismatch, recreated: rebalance.ReasonBindingMismatch, rejected: rebalance.ReasonTriggerRejected} {
		row := rows[w]
		assert.Empty(t, row.Result, "%s is shown pending", w.Name)
		assert.Equal(t, reason, row.ClientReason, w.Name)
		assert.Contains(t, row.Message, "left pending in the status", w.Name)
	}
	assert.Contains(t, rows[mismatched].Message, "belongs to")
	assert.Contains(t, rows[rejected].Message, "refused by a webhook")
	assert.Len(t, pass.Ran, 5, "the first pass ran every workload")
	failed, pending := rebalance.CountRows(pass.Rows)
	assert.Equal(t, 1, failed, "only the missing binding failed")
	assert.Equal(t, 3, pending)

	// The causes go away: the next pass triggers exactly those three.
	ctx := context.Background()
	for _, w := range []rebalance.Workload{mismatched, recreated} {
		b, err := client.WorkV1alpha2().ResourceBindings("shop").Get(ctx, rebalance.BindingNameFor(w), metav1.GetOptions{})
		require.NoError(t, err)
		b.Spec.Resource = workv1alpha2.ObjectReference{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: "new-uid"}
		_, err = client.WorkV1alpha2().ResourceBindings("shop").Update(ctx, b, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	rec.Known[mismatched] = rebalance.Target{UID: "new-uid"}
	client.ReactionChain = client.ReactionChain[1:] // the webhook no longer refuses
	second := reconcileDemo(t, client, rec)
	assert.Equal(t, 3, second.Triggered, "only the pending entries are tried again")
	assert.Equal(t, map[rebalance.Workload]bool{mismatched: true, recreated: true, rejected: true}, second.Ran,
		"the rows of the others come from the status the first pass wrote")
	status = statusOf(t, client)
	for _, w := range []rebalance.Workload{webDeploy, mismatched, recreated, rejected} {
		assert.Equal(t, appsv1alpha1.RebalanceSuccessful, status[w].Result, w.Name)
	}
	assert.Equal(t, appsv1alpha1.RebalanceFailed, status[gone].Result, "never retried")
}

// The WorkloadRebalancer printed for a plain run (-o yaml) follows the same
// rule: a refusal of the plugin's own is no result.
func TestRebalancerLeavesClientRefusalsPending(t *testing.T) {
	rows := []rebalance.Row{
		{Workload: webDeploy, Result: appsv1alpha1.RebalanceSuccessful},
		{Workload: mismatched, Result: appsv1alpha1.RebalanceFailed, ClientReason: rebalance.ReasonBindingMismatch},
		{Workload: gone, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound},
	}
	rb := Rebalancer("x", rows, 1, nil)
	got := map[rebalance.Workload]appsv1alpha1.ObservedWorkload{}
	for _, entry := range rb.Status.ObservedWorkloads {
		got[entry.Workload] = entry
	}
	assert.Equal(t, appsv1alpha1.ObservedWorkload{Workload: mismatched}, got[mismatched])
	assert.Equal(t, appsv1alpha1.RebalanceFailed, got[gone].Result)
	assert.Equal(t, appsv1alpha1.RebalanceSuccessful, got[webDeploy].Result)
}

func TestRecordable(t *testing.T) {
	assert.True(t, Recordable("", ""))
	assert.True(t, Recordable(appsv1alpha1.RebalanceSuccessful, ""))
	assert.True(t, Recordable(appsv1alpha1.RebalanceFailed, appsv1alpha1.RebalanceObjectNotFound))
	assert.False(t, Recordable(appsv1alpha1.RebalanceFailed, ""))
	assert.False(t, Recordable(appsv1alpha1.RebalanceSuccessful, appsv1alpha1.RebalanceObjectNotFound))
	assert.False(t, Recordable("Unknown", ""))
}

// A creation whose answer was lost is not an error: the retry finds the
// object the first attempt created, for a named object through Create and
// through Apply alike.
func TestCreateAfterALostAnswer(t *testing.T) {
	for _, viaApply := range []bool{false, true} {
		client := karmadafake.NewSimpleClientset()
		lost := 0
		client.PrependReactor("create", "workloadrebalancers", func(action clienttesting.Action) (bool, runtime.Object, error) {
			if lost > 0 {
				return false, nil, nil
			}
			lost++
			// Let the create land, then lose its answer.
			obj := action.(clienttesting.CreateAction).GetObject()
			if err := client.Tracker().Create(action.GetResource(), obj, ""); err != nil {
				return true, nil, err
			}
			return true, nil, apierrors.NewServiceUnavailable("answer lost")
		})
		rec := &Recorder{Client: client.AppsV1alpha1().WorkloadRebalancers(), Backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30}}
		desired := &appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: "lost"}, Spec: appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{webDeploy}}}
		var got *appsv1alpha1.WorkloadRebalancer
		var err error
		if viaApply {
			got, _, err = rec.Apply(context.Background(), desired, ApplyOptions{})
		} else {
			got, err = rec.Create(context.Background(), desired)
		}
		require.NoError(t, err, "via Apply: %v", viaApply)
		assert.Equal(t, "lost", got.Name)
		list, err := client.AppsV1alpha1().WorkloadRebalancers().List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, list.Items, 1, "one object")
	}
}
