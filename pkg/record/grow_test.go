package record

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// growFixture holds a waved record "waves" created with the first of ws,
// and a binding per workload, scheduled an hour before serverNow.
func growFixture(t *testing.T, ws []rebalance.Workload) (*karmadafake.Clientset, *Recorder) {
	t.Helper()
	objects := []runtime.Object{&appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "waves", UID: "uid-1", Generation: 1, CreationTimestamp: metav1.NewTime(serverNow)},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: ws[:1]},
	}}
	for _, w := range ws {
		objects = append(objects, scheduled(w, w, ""))
	}
	client := karmadafake.NewSimpleClientset(objects...)
	clock := rebalance.NewServerClock()
	clock.Observe(time.Now())
	rec := &Recorder{
		Client: client.AppsV1alpha1().WorkloadRebalancers(),
		Runner: &rebalance.Runner{API: rebalance.NewBindingAPI(client), Clock: clock,
			Options: rebalance.Options{Workers: 1, Backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30}}},
		Backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30},
	}
	return client, rec
}

// oneByOne is an Execute that starts the targets one after the other, as
// waves of one would, and hands each trigger to the ledger at once.
func oneByOne(ctx context.Context, runner *rebalance.Runner, targets []rebalance.Target, fresh func(rebalance.Workload) bool, ledger func(*rebalance.Result) error) (*rebalance.Result, error) {
	out := &rebalance.Result{}
	var written []rebalance.Row
	for _, t := range targets {
		r := *runner
		if fresh(t.Workload) {
			r.TriggerAt = nil
		}
		res, err := r.Run(ctx, []rebalance.Target{t})
		if err != nil {
			return out, err
		}
		out.Rows = append(out.Rows, res.Rows...)
		out.Written += res.Written
		written = append(written, res.Rows...)
		if err := ledger(&rebalance.Result{Rows: written}); err != nil {
			return out, err
		}
	}
	return out, nil
}

// A waved record grows: each workload enters spec.workloads only once its
// binding holds a trigger at or after the record's creationTimestamp, so
// Karmada's controller (which triggers a new entry at the creationTimestamp
// unless such a trigger is there) never writes one; and every trigger after
// the first is fresh, not the creationTimestamp.
func TestReconcileGrowsTheRecordBehindTheTriggers(t *testing.T) {
	ws := []rebalance.Workload{webDeploy,
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "b"},
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "c"}}
	client, rec := growFixture(t, ws)
	controllerWrites := 0
	client.PrependReactor("patch", "workloadrebalancers", func(action clienttesting.Action) (bool, runtime.Object, error) {
		patch := action.(clienttesting.PatchAction)
		if patch.GetSubresource() != "" || patch.GetPatchType() != types.JSONPatchType {
			return false, nil, nil
		}
		var ops []jsonPatchOp
		require.NoError(t, json.Unmarshal(patch.GetPatch(), &ops))
		for _, op := range ops {
			if op.Op != "add" {
				continue
			}
			raw, _ := json.Marshal(op.Value)
			var w rebalance.Workload
			require.NoError(t, json.Unmarshal(raw, &w))
			// What Karmada's controller would do with the new entry.
			// (Through the tracker: the fake client is locked in a reactor.)
			obj, err := client.Tracker().Get(workv1alpha2.SchemeGroupVersion.WithResource("resourcebindings"), w.Namespace, rebalance.BindingNameFor(w))
			require.NoError(t, err)
			b := obj.(*workv1alpha2.ResourceBinding)
			if held := b.Spec.RescheduleTriggeredAt; held == nil || serverNow.After(held.Time) {
				controllerWrites++
			}
		}
		return false, nil, nil
	})
	rec.Planned = []rebalance.Target{{Workload: ws[0]}, {Workload: ws[1]}, {Workload: ws[2]}}
	rec.Execute = oneByOne
	ttl := int32(60)
	rec.HeldTTL = &ttl
	rb, err := client.AppsV1alpha1().WorkloadRebalancers().Get(context.Background(), "waves", metav1.GetOptions{})
	require.NoError(t, err)

	pass, err := rec.Reconcile(context.Background(), rb)
	require.NoError(t, err)
	require.NotNil(t, pass.Rebalancer.Spec.TTLSecondsAfterFinished, "the ttl is set once every workload is in the record")
	assert.Equal(t, ttl, *pass.Rebalancer.Spec.TTLSecondsAfterFinished)
	final, err := client.AppsV1alpha1().WorkloadRebalancers().Get(context.Background(), "waves", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "0", final.Annotations[UnstartedAnnotation])
	assert.Zero(t, controllerWrites, "an entry appeared before its trigger was written")
	assert.Equal(t, 3, pass.Written)
	assert.Equal(t, ws, pass.Rebalancer.Spec.Workloads)
	assert.False(t, HasPending(pass.Rebalancer.Status))
	for i, w := range ws {
		b, err := client.WorkV1alpha2().ResourceBindings(w.Namespace).Get(context.Background(), rebalance.BindingNameFor(w), metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, b.Spec.RescheduleTriggeredAt)
		if i == 0 {
			assert.True(t, b.Spec.RescheduleTriggeredAt.Time.Equal(serverNow), "the first workload is the record's own, at its creationTimestamp")
		} else {
			assert.True(t, b.Spec.RescheduleTriggeredAt.Time.After(serverNow), "%s: a fresh trigger, got %s", w.Name, b.Spec.RescheduleTriggeredAt)
		}
	}
}

// Resumed, a record does not trigger a second time a planned workload that
// is not in its spec yet but already holds a trigger at or after its
// creationTimestamp (written just before a crash): it is appended as is.
func TestReconcileGrowKeepsATriggerWrittenBeforeACrash(t *testing.T) {
	ws := []rebalance.Workload{webDeploy, {APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "b"}}
	client, rec := growFixture(t, ws)
	ctx := context.Background()
	b, err := client.WorkV1alpha2().ResourceBindings("shop").Get(ctx, rebalance.BindingNameFor(ws[1]), metav1.GetOptions{})
	require.NoError(t, err)
	crashed := metav1.NewTime(serverNow.Add(time.Minute))
	b.Spec.RescheduleTriggeredAt = &crashed
	_, err = client.WorkV1alpha2().ResourceBindings("shop").Update(ctx, b, metav1.UpdateOptions{})
	require.NoError(t, err)
	rec.Planned = []rebalance.Target{{Workload: ws[0]}, {Workload: ws[1]}}
	rec.Execute = oneByOne
	rb, err := client.AppsV1alpha1().WorkloadRebalancers().Get(ctx, "waves", metav1.GetOptions{})
	require.NoError(t, err)

	pass, err := rec.Reconcile(ctx, rb)
	require.NoError(t, err)
	assert.Equal(t, 1, pass.Written, "only the first workload is written")
	b, err = client.WorkV1alpha2().ResourceBindings("shop").Get(ctx, rebalance.BindingNameFor(ws[1]), metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, b.Spec.RescheduleTriggeredAt.Equal(&crashed))
	assert.Equal(t, ws, pass.Rebalancer.Spec.Workloads)
}

// Deleting the record mid-run makes the ledger say so, and the pass ends
// with ErrRebalancerGone.
func TestReconcileGrowStopsWhenTheRecordIsDeleted(t *testing.T) {
	ws := []rebalance.Workload{webDeploy, {APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "b"}, {APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "c"}}
	client, rec := growFixture(t, ws)
	ctx := context.Background()
	started := 0
	rec.Planned = []rebalance.Target{{Workload: ws[0]}, {Workload: ws[1]}, {Workload: ws[2]}}
	rec.Execute = func(ctx context.Context, runner *rebalance.Runner, targets []rebalance.Target, fresh func(rebalance.Workload) bool, ledger func(*rebalance.Result) error) (*rebalance.Result, error) {
		return oneByOne(ctx, runner, targets, fresh, func(r *rebalance.Result) error {
			started++
			if started == 1 {
				require.NoError(t, client.AppsV1alpha1().WorkloadRebalancers().Delete(ctx, "waves", metav1.DeleteOptions{}))
			}
			return ledger(r)
		})
	}
	rb, err := client.AppsV1alpha1().WorkloadRebalancers().Get(ctx, "waves", metav1.GetOptions{})
	require.NoError(t, err)
	ttl := int32(0)
	rec.HeldTTL = &ttl
	_, err = rec.Reconcile(ctx, rb)
	assert.ErrorIs(t, err, ErrRebalancerGone)
	assert.Equal(t, 1, started, "no workload was started once the record was gone")
}

// The failures of a waved run are kept on its record, added to those of
// earlier runs, so that a resumed run counts them against --max-failures.
func TestGrowerKeepsTheFailuresSpent(t *testing.T) {
	ws := []rebalance.Workload{webDeploy}
	client, rec := growFixture(t, ws)
	ctx := context.Background()
	rec.Execute = oneByOne
	_, err := client.AppsV1alpha1().WorkloadRebalancers().Patch(ctx, "waves", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+FailuresAnnotation+`":"1"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	rb, err := client.AppsV1alpha1().WorkloadRebalancers().Get(ctx, "waves", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, 1, FailuresSpent(rb))

	g := newGrower(rec, rb)
	g.ran[webDeploy] = true
	failed := rebalance.Row{Workload: webDeploy, Result: appsv1alpha1.RebalanceSuccessful,
		Observation: rebalance.Observation{Outcome: rebalance.OutcomeSchedulingFailed, Reason: "NoClusterFit"}}
	_, err = g.record(ctx, []rebalance.Row{failed})
	require.NoError(t, err)
	rb, err = client.AppsV1alpha1().WorkloadRebalancers().Get(ctx, "waves", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, 2, FailuresSpent(rb), "one failure before, one now")
	// Handing the same rows again counts nothing twice.
	_, err = g.record(ctx, []rebalance.Row{failed})
	require.NoError(t, err)
	rb, err = client.AppsV1alpha1().WorkloadRebalancers().Get(ctx, "waves", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, 2, FailuresSpent(rb))
}
