package record

import (
	"strconv"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var (
	deployA = rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "a"}
	deployB = rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "b"}
	deployC = rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "c"}
	roleX   = rebalance.Workload{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "x"}
)

func observed(w rebalance.Workload, result appsv1alpha1.RebalanceResult) appsv1alpha1.ObservedWorkload {
	entry := appsv1alpha1.ObservedWorkload{Workload: w, Result: result}
	if result == appsv1alpha1.RebalanceFailed {
		entry.Reason = appsv1alpha1.RebalanceObjectNotFound
	}
	return entry
}

func TestSyncStatus(t *testing.T) {
	const (
		successful = appsv1alpha1.RebalanceSuccessful
		failed     = appsv1alpha1.RebalanceFailed
		pending    = appsv1alpha1.RebalanceResult("")
	)
	finish := metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name string
		old  []appsv1alpha1.ObservedWorkload
		spec []rebalance.Workload
		want []appsv1alpha1.ObservedWorkload
	}{
		{
			name: "new rebalancer: all pending, sorted",
			spec: []rebalance.Workload{deployB, deployA},
			want: []appsv1alpha1.ObservedWorkload{observed(deployA, pending), observed(deployB, pending)},
		},
		{
			name: "entries still in spec are kept as they are",
			old:  []appsv1alpha1.ObservedWorkload{observed(deployA, successful), observed(deployB, failed), observed(deployC, pending)},
			spec: []rebalance.Workload{deployC, deployB, deployA},
			want: []appsv1alpha1.ObservedWorkload{observed(deployA, successful), observed(deployB, failed), observed(deployC, pending)},
		},
		{
			name: "removed entries survive only when successful",
			old:  []appsv1alpha1.ObservedWorkload{observed(deployA, successful), observed(deployB, failed), observed(deployC, pending)},
			spec: []rebalance.Workload{roleX},
			want: []appsv1alpha1.ObservedWorkload{observed(deployA, successful), observed(roleX, pending)},
		},
		{
			name: "an edited entry is a removal plus an addition",
			old:  []appsv1alpha1.ObservedWorkload{observed(deployA, failed)},
			spec: []rebalance.Workload{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Name: "a"}},
			want: []appsv1alpha1.ObservedWorkload{observed(rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Name: "a"}, pending)},
		},
		{
			name: "duplicate spec entries collapse",
			spec: []rebalance.Workload{deployA, deployA, deployB, deployA},
			want: []appsv1alpha1.ObservedWorkload{observed(deployA, pending), observed(deployB, pending)},
		},
		{
			name: "a repeated status entry is kept only when successful",
			old:  []appsv1alpha1.ObservedWorkload{observed(deployA, failed), observed(deployA, successful), observed(deployB, pending), observed(deployB, failed)},
			spec: []rebalance.Workload{deployA, deployB},
			want: []appsv1alpha1.ObservedWorkload{observed(deployA, failed), observed(deployA, successful), observed(deployB, pending)},
		},
		{
			name: "an unknown result counts as not successful",
			old:  []appsv1alpha1.ObservedWorkload{{Workload: deployA, Result: "Odd"}},
			spec: []rebalance.Workload{deployB},
			want: []appsv1alpha1.ObservedWorkload{observed(deployB, pending)},
		},
		{
			name: "an empty spec drops failed entries and still gives a non-nil list",
			old:  []appsv1alpha1.ObservedWorkload{observed(deployB, failed)},
			want: []appsv1alpha1.ObservedWorkload{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: tt.old, ObservedGeneration: 1, FinishTime: &finish}
			got := SyncStatus(old, appsv1alpha1.WorkloadRebalancerSpec{Workloads: tt.spec}, 7)
			assert.Equal(t, appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: tt.want, ObservedGeneration: 7}, got)
		})
	}
}

func TestSetResult(t *testing.T) {
	tests := []struct {
		name      string
		status    []appsv1alpha1.ObservedWorkload
		workload  rebalance.Workload
		result    appsv1alpha1.RebalanceResult
		reason    appsv1alpha1.RebalanceFailedReason
		wantFound bool
		want      []appsv1alpha1.ObservedWorkload
	}{
		{
			name:      "success",
			status:    []appsv1alpha1.ObservedWorkload{observed(deployA, ""), observed(deployB, "")},
			workload:  deployB,
			result:    appsv1alpha1.RebalanceSuccessful,
			wantFound: true,
			want:      []appsv1alpha1.ObservedWorkload{observed(deployA, ""), observed(deployB, appsv1alpha1.RebalanceSuccessful)},
		},
		{
			name:      "binding not found",
			status:    []appsv1alpha1.ObservedWorkload{observed(deployA, "")},
			workload:  deployA,
			result:    appsv1alpha1.RebalanceFailed,
			reason:    appsv1alpha1.RebalanceObjectNotFound,
			wantFound: true,
			want:      []appsv1alpha1.ObservedWorkload{observed(deployA, appsv1alpha1.RebalanceFailed)},
		},
		{
			name:     "unknown workload changes nothing",
			status:   []appsv1alpha1.ObservedWorkload{observed(deployA, "")},
			workload: deployC,
			result:   appsv1alpha1.RebalanceSuccessful,
			want:     []appsv1alpha1.ObservedWorkload{observed(deployA, "")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: tt.status}
			assert.Equal(t, tt.wantFound, SetResult(&status, tt.workload, tt.result, tt.reason))
			assert.Equal(t, tt.want, status.ObservedWorkloads)
		})
	}
}

func TestPending(t *testing.T) {
	tests := []struct {
		name   string
		status []appsv1alpha1.ObservedWorkload
		want   []rebalance.Workload
	}{
		{name: "none observed"},
		{
			name:   "all finished",
			status: []appsv1alpha1.ObservedWorkload{observed(deployA, appsv1alpha1.RebalanceSuccessful), observed(deployB, appsv1alpha1.RebalanceFailed)},
		},
		{
			name:   "empty and unknown results are pending",
			status: []appsv1alpha1.ObservedWorkload{observed(deployA, ""), observed(deployB, appsv1alpha1.RebalanceSuccessful), {Workload: deployC, Result: "Odd"}},
			want:   []rebalance.Workload{deployA, deployC},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: tt.status}
			assert.Equal(t, tt.want, PendingWorkloads(status))
			assert.Equal(t, len(tt.want) > 0, HasPending(status))
		})
	}
}

func TestSetFinishTime(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(time.Date(2024, 1, 1, 1, 0, 0, 0, time.UTC))
	done := []appsv1alpha1.ObservedWorkload{observed(deployA, appsv1alpha1.RebalanceSuccessful)}
	notDone := []appsv1alpha1.ObservedWorkload{observed(deployA, appsv1alpha1.RebalanceSuccessful), observed(deployB, "")}

	tests := []struct {
		name        string
		old         appsv1alpha1.WorkloadRebalancerStatus
		updated     appsv1alpha1.WorkloadRebalancerStatus
		wantChanged bool
		wantFinish  *metav1.Time
	}{
		{
			name:        "first pass finishes",
			updated:     appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: done, ObservedGeneration: 1},
			wantChanged: true,
			wantFinish:  &now,
		},
		{
			name:        "first pass with pending entries leaves it unset",
			updated:     appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: notDone, ObservedGeneration: 1},
			wantChanged: true,
		},
		{
			name:        "changed but still pending keeps the old finish time",
			old:         appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: done, ObservedGeneration: 1, FinishTime: &earlier},
			updated:     appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: notDone, ObservedGeneration: 2},
			wantChanged: true,
			wantFinish:  &earlier,
		},
		{
			name:       "unchanged keeps the old finish time",
			old:        appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: done, ObservedGeneration: 1, FinishTime: &earlier},
			updated:    appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: done, ObservedGeneration: 1},
			wantFinish: &earlier,
		},
		{
			name:        "a new generation alone refreshes it",
			old:         appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: done, ObservedGeneration: 1, FinishTime: &earlier},
			updated:     appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: done, ObservedGeneration: 2},
			wantChanged: true,
			wantFinish:  &now,
		},
		{
			name:       "unchanged and unfinished stays unset",
			old:        appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: notDone, ObservedGeneration: 1},
			updated:    appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: notDone, ObservedGeneration: 1},
			wantFinish: nil,
		},
		{
			name:        "nil and empty lists differ, as in the controller",
			updated:     appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: []appsv1alpha1.ObservedWorkload{}},
			wantChanged: true,
			wantFinish:  &now,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			updated := tt.updated
			updated.FinishTime = &metav1.Time{} // whatever the caller left there is replaced
			assert.Equal(t, tt.wantChanged, SetFinishTime(&tt.old, &updated, now))
			assert.Equal(t, tt.wantFinish, updated.FinishTime)
		})
	}
}

func TestExpiry(t *testing.T) {
	finish := metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	rebalancer := func(ttl *int32, finish *metav1.Time) *appsv1alpha1.WorkloadRebalancer {
		return &appsv1alpha1.WorkloadRebalancer{
			Spec:   appsv1alpha1.WorkloadRebalancerSpec{TTLSecondsAfterFinished: ttl},
			Status: appsv1alpha1.WorkloadRebalancerStatus{FinishTime: finish},
		}
	}
	tests := []struct {
		name        string
		rb          *appsv1alpha1.WorkloadRebalancer
		now         time.Time
		wantAt      time.Time
		wantOK      bool
		wantExpired bool
	}{
		{name: "nil rebalancer", now: finish.Add(time.Hour)},
		{name: "ttl unset never expires", rb: rebalancer(nil, &finish), now: finish.Add(1000 * time.Hour)},
		{name: "not finished", rb: rebalancer(ptr.To[int32](0), nil), now: finish.Add(time.Hour)},
		{name: "zero ttl expires at finish", rb: rebalancer(ptr.To[int32](0), &finish), now: finish.Time, wantAt: finish.Time, wantOK: true, wantExpired: true},
		{name: "before expiry", rb: rebalancer(ptr.To[int32](60), &finish), now: finish.Add(59 * time.Second), wantAt: finish.Add(time.Minute), wantOK: true},
		{name: "exactly at expiry", rb: rebalancer(ptr.To[int32](60), &finish), now: finish.Add(time.Minute), wantAt: finish.Add(time.Minute), wantOK: true, wantExpired: true},
		{name: "negative ttl is not validated and expires early", rb: rebalancer(ptr.To[int32](-10), &finish), now: finish.Time, wantAt: finish.Add(-10 * time.Second), wantOK: true, wantExpired: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, ok := ExpiresAt(tt.rb)
			assert.Equal(t, tt.wantOK, ok)
			assert.True(t, tt.wantAt.Equal(at), "expires at %s, want %s", at, tt.wantAt)
			assert.Equal(t, tt.wantExpired, Expired(tt.rb, tt.now))
		})
	}
}

// BenchmarkSyncStatus measures a large rebalancer edit: half of the observed
// workloads stay in spec, half are replaced.
func BenchmarkSyncStatus(b *testing.B) {
	const size = 5000
	old := appsv1alpha1.WorkloadRebalancerStatus{}
	spec := appsv1alpha1.WorkloadRebalancerSpec{}
	for i := range size {
		w := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "app-" + strconv.Itoa(i)}
		old.ObservedWorkloads = append(old.ObservedWorkloads, observed(w, appsv1alpha1.RebalanceSuccessful))
		if i%2 == 0 {
			spec.Workloads = append(spec.Workloads, w)
		} else {
			spec.Workloads = append(spec.Workloads, rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Name: w.Name})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		SyncStatus(old, spec, 2)
	}
}
