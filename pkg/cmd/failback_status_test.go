package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// statusFixture is a control plane where the failback daemon pod-a leads
// and published, 5s before now, member1 recovering with 2m left, member2
// failing back, and member3 down with one displaced workload; two records.
func statusFixture(t *testing.T, now time.Time) (*kubefake.Clientset, *karmadafake.Clientset) {
	t.Helper()
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	web := rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	state := failback.PublishedState{
		Holder: "kubectl-rebalance/pod-a", PublishedAt: *at(-5 * time.Second),
		Window: metav1.Duration{Duration: 5 * time.Minute}, Cooldown: metav1.Duration{Duration: 30 * time.Minute},
		Clusters: []failback.PublishedCluster{
			{Name: "member1", Phase: failback.PhaseStabilizing, Since: *at(-3 * time.Minute), Recovery: "k1", WindowEnds: at(2 * time.Minute), Window: &metav1.Duration{Duration: 5 * time.Minute}, Displaced: 1, Workloads: []failback.PublishedWorkload{{Workload: web, Binding: "shop/web-deployment"}}},
			{Name: "member2", Phase: failback.PhaseFailingBack, Since: *at(-time.Minute), Recovery: "k2", Record: failback.RecordName("member2", "k2"), LastFailback: at(-time.Minute)},
			{Name: "member3", Phase: failback.PhaseDown, Since: *at(-time.Hour), Reason: "Ready is False (ClusterNotReachable)", Displaced: 250},
		},
	}
	data, err := json.Marshal(state)
	require.NoError(t, err)
	kube := kubefake.NewSimpleClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "karmada-system", Name: "kubectl-rebalance-failback"}, Data: map[string]string{failback.StateKey: string(data)}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "karmada-system", Name: "kubectl-rebalance-failback"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("kubectl-rebalance/pod-a"), RenewTime: &metav1.MicroTime{Time: now.Add(-time.Second)}}},
	)
	rec := func(cluster, key string, age time.Duration, result appsv1alpha1.RebalanceResult) *appsv1alpha1.WorkloadRebalancer {
		return &appsv1alpha1.WorkloadRebalancer{
			ObjectMeta: metav1.ObjectMeta{Name: failback.RecordName(cluster, key), Labels: failback.RecordLabels(cluster, key), CreationTimestamp: metav1.NewTime(now.Add(-age)), Generation: 1},
			Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []rebalance.Workload{web}, TTLSecondsAfterFinished: ptr.To[int32](86400)},
			Status:     appsv1alpha1.WorkloadRebalancerStatus{ObservedGeneration: 1, ObservedWorkloads: []appsv1alpha1.ObservedWorkload{{Workload: web, Result: result}}},
		}
	}
	karmada := karmadafake.NewSimpleClientset(
		rec("member2", "k2", time.Minute, ""),
		rec("member1", "k0", 2*time.Hour, appsv1alpha1.RebalanceSuccessful),
		&appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}},
	)
	return kube, karmada
}

func statusOptions(kube *kubefake.Clientset, karmada *karmadafake.Clientset, now time.Time, format string) (*FailbackStatusOptions, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	return &FailbackStatusOptions{
		OutputFormat: format, Timeout: time.Minute, Last: 10, LeaseNamespace: "karmada-system", LeaseName: "kubectl-rebalance-failback",
		configFlags: genericclioptions.NewConfigFlags(true), kube: kube, karmada: karmada, clock: rebalance.NewServerClock(),
		guard: &requestGuard{}, now: func() time.Time { return now },
		IOStreams: genericiooptions.IOStreams{Out: out, ErrOut: errOut},
	}, out, errOut
}

func TestFailbackStatusTables(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	kube, karmada := statusFixture(t, now)
	o, out, errOut := statusOptions(kube, karmada, now, "")
	require.NoError(t, o.Run(context.Background()))
	assert.Equal(t, "failback daemon kubectl-rebalance/pod-a: view published 5s ago (stabilization window 5m0s, cooldown 30m0s)\n"+
		"displaced workloads listed (the daemon publishes at most 100 per cluster): member3: 0 of 250\n", errOut.String())
	assert.Equal(t, `CLUSTER   STATE         SINCE   TIME-LEFT   DISPLACED   DETAIL
member1   Recovering    3m      2m          1           stabilization window 5m0s
member2   FailingBack   60s     <none>      0           failing back, recorded as workloadrebalancer failback-member2-k2
member3   Failed        60m     <none>      250         Ready is False (ClusterNotReachable)

CLUSTER   NAMESPACE   WORKLOAD              EVICTING
member1   shop        deployment.apps/web   no

NAME                  CLUSTER   STATE      WORKLOADS   SUCCESSFUL   FAILED   PENDING   AGE
failback-member2-k2   member2   Running    1           0            0        1         60s
failback-member1-k0   member1   Finished   1           1            0        0         120m
`, out.String())
}

func TestFailbackStatusYAML(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	kube, karmada := statusFixture(t, now)
	o, out, _ := statusOptions(kube, karmada, now, "yaml")
	require.NoError(t, o.Run(context.Background()))
	var got FailbackStatus
	require.NoError(t, yaml.Unmarshal(out.Bytes(), &got))
	assert.Equal(t, "FailbackStatus", got.Kind)
	require.NotNil(t, got.Daemon)
	assert.Equal(t, "kubectl-rebalance/pod-a", got.Daemon.Leader)
	assert.False(t, got.Daemon.Stale)
	require.Len(t, got.Clusters, 3)
	assert.Equal(t, failback.StateRecovering, got.Clusters[0].State)
	require.NotNil(t, got.Clusters[0].TimeLeft)
	assert.Equal(t, 2*time.Minute, got.Clusters[0].TimeLeft.Duration)
	require.Len(t, got.Failbacks, 2)
	assert.Equal(t, failback.RecordRunning, got.Failbacks[0].State)
}

// TestFailbackStatusStaleOrMissing: a view not refreshed for long is
// shown as the daemon's last, said so; without one, the records are
// still listed.
func TestFailbackStatusStaleOrMissing(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	kube, karmada := statusFixture(t, now)
	o, out, errOut := statusOptions(kube, karmada, now.Add(10*time.Minute), "")
	require.NoError(t, o.Run(context.Background()))
	assert.Contains(t, errOut.String(), "warning: the failback daemon has not published its view for 10m (last by kubectl-rebalance/pod-a, at 2026-03-01T11:59:55Z): it may not be running; this is its last view")
	assert.Contains(t, out.String(), "failback-member2-k2   member2   Interrupted", "a stale view says nothing runs")

	require.NoError(t, kube.CoreV1().ConfigMaps("karmada-system").Delete(context.Background(), "kubectl-rebalance-failback", metav1.DeleteOptions{}))
	o, out, errOut = statusOptions(kube, karmada, now, "")
	require.NoError(t, o.Run(context.Background()))
	assert.Contains(t, errOut.String(), "no failback daemon has published its view in configmap karmada-system/kubectl-rebalance-failback")
	assert.Contains(t, out.String(), "failback-member1-k0")
	assert.NotContains(t, out.String(), "TIME-LEFT", "no clusters to show")
}

// TestFailbackStatusForbidden: without permission to read the view, the
// error names the request and where the permission is.
func TestFailbackStatusForbidden(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	kube, karmada := statusFixture(t, now)
	kube.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "kubectl-rebalance-failback", errors.New(`User "alice" cannot get resource "configmaps"`))
	})
	o, _, _ := statusOptions(kube, karmada, now, "")
	err := o.Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `not allowed to get configmaps in namespace "karmada-system"`)
	assert.Contains(t, err.Error(), "(reading the failback daemon's view; deploy/rbac/kubectl-rebalance-optional.yaml grants it)")
}

func TestFailbackStatusFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "x"}, `failback status takes no arguments, got ["x"]`},
		{[]string{"status", "-o", "name"}, `invalid --output "name": use wide, yaml or json`},
		{[]string{"status", "--last", "-1"}, "--last must be 0 (all) or more, got -1"},
		{[]string{"status", "--timeout", "0s"}, "--timeout must be greater than zero, got 0s"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			streams, _, _, _ := genericiooptions.NewTestIOStreams()
			cmd := NewCmdFailback(streams)
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
