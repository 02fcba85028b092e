package cmd

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
)

var getNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func deployRef(ns, name string) appsv1alpha1.ObjectReference {
	return appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}
}

// getFixture holds three WorkloadRebalancers: one finished with a failure,
// one finished with a ttl running, and one never reconciled.
func getFixture() *karmadafake.Clientset {
	finished := metav1.NewTime(getNow.Add(-90 * time.Second))
	return karmadafake.NewSimpleClientset(
		&appsv1alpha1.WorkloadRebalancer{
			ObjectMeta: metav1.ObjectMeta{Name: "nightly", Generation: 2, CreationTimestamp: metav1.NewTime(getNow.Add(-48 * time.Hour))},
			Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{deployRef("shop", "web"), deployRef("shop", "ghost")}},
			Status: appsv1alpha1.WorkloadRebalancerStatus{ObservedGeneration: 2, FinishTime: &finished, ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
				{Workload: deployRef("shop", "api"), Result: appsv1alpha1.RebalanceSuccessful},
				{Workload: deployRef("shop", "ghost"), Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound},
				{Workload: deployRef("shop", "web"), Result: appsv1alpha1.RebalanceSuccessful},
			}},
		},
		&appsv1alpha1.WorkloadRebalancer{
			ObjectMeta: metav1.ObjectMeta{Name: "rebalance-20261122-115830-abcde", Generation: 1, CreationTimestamp: metav1.NewTime(getNow.Add(-91 * time.Second))},
			Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{deployRef("shop", "web")}, TTLSecondsAfterFinished: ptr.To[int32](300)},
			Status: appsv1alpha1.WorkloadRebalancerStatus{ObservedGeneration: 1, FinishTime: &finished, ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
				{Workload: deployRef("shop", "web"), Result: appsv1alpha1.RebalanceSuccessful},
			}},
		},
		&appsv1alpha1.WorkloadRebalancer{
			ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Generation: 1, CreationTimestamp: metav1.NewTime(getNow.Add(-5 * time.Second))},
			Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{deployRef("shop", "web")}, TTLSecondsAfterFinished: ptr.To[int32](0)},
		},
	)
}

func runGet(t *testing.T, name, output string) (string, string, error) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	o := NewGetOptions(streams)
	o.now = func() time.Time { return getNow }
	o.Name, o.OutputFormat = name, output
	if output != "" && output != "wide" {
		o.PrintFlags.OutputFormat = &output
		printer, err := o.PrintFlags.ToPrinter()
		require.NoError(t, err)
		o.printer = printer
	}
	o.client = getFixture().AppsV1alpha1().WorkloadRebalancers()
	err := o.Run(context.Background())
	return out.String(), errOut.String(), err
}

func TestGetList(t *testing.T) {
	out, errOut, err := runGet(t, "", "")
	require.NoError(t, err)
	assert.Empty(t, errOut)
	assert.Equal(t, strings.Join([]string{
		"NAME                              WORKLOADS   SUCCESSFUL   FAILED   PENDING   FINISHED   AGE   TTL-LEFT",
		"by-hand                           1           0            0        1         <none>     5s    <not started>",
		"nightly                           3           2            1        0         90s        2d    <none>",
		"rebalance-20261122-115830-abcde   1           1            0        0         90s        91s   3m30s",
		"",
	}, "\n"), out)

	wide, _, err := runGet(t, "", "wide")
	require.NoError(t, err)
	assert.Contains(t, wide, "GENERATION   TTL      FINISH-TIME\n")
	assert.Contains(t, wide, "1/1          300s     2026-11-22T11:58:30Z\n")
	assert.Contains(t, wide, "0/1          0s       <none>\n")

	names, _, err := runGet(t, "", "name")
	require.NoError(t, err)
	assert.Equal(t, "workloadrebalancer.apps.karmada.io/by-hand\nworkloadrebalancer.apps.karmada.io/nightly\nworkloadrebalancer.apps.karmada.io/rebalance-20261122-115830-abcde\n", names)

	asYAML, _, err := runGet(t, "", "yaml")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(asYAML, "apiVersion: apps.karmada.io/v1alpha1\nitems:\n"), asYAML)
	assert.Contains(t, asYAML, "kind: WorkloadRebalancerList\n")
}

func TestGetOne(t *testing.T) {
	out, errOut, err := runGet(t, "nightly", "")
	require.NoError(t, err)
	assert.Equal(t, strings.Join([]string{
		"WORKLOAD                RESULT       REASON                      IN-SPEC",
		"deployment.apps/api     Successful   <none>                      no",
		"deployment.apps/ghost   Failed       ReferencedBindingNotFound   yes",
		"deployment.apps/web     Successful   <none>                      yes",
		"",
	}, "\n"), out)
	assert.Equal(t, "workloadrebalancer nightly, generation 2: 3 workloads: 2 successful, 1 failed, 0 pending; finished at 2026-11-22T11:58:30Z\n", errOut)

	_, errOut, err = runGet(t, "rebalance-20261122-115830-abcde", "")
	require.NoError(t, err)
	assert.Equal(t, "workloadrebalancer rebalance-20261122-115830-abcde, generation 1: 1 workload: 1 successful, 0 failed, 0 pending; finished at 2026-11-22T11:58:30Z; ttl 300s, left: 3m30s\n", errOut)

	out, errOut, err = runGet(t, "by-hand", "wide")
	require.NoError(t, err)
	assert.Equal(t, strings.Join([]string{
		"WORKLOAD              RESULT    REASON   IN-SPEC   BINDING          API-VERSION",
		"deployment.apps/web   Pending   <none>   yes       web-deployment   apps/v1",
		"",
	}, "\n"), out)
	assert.Equal(t, "workloadrebalancer by-hand, generation 1: 1 workload: 0 successful, 0 failed, 1 pending (generation 1 not reconciled yet); ttl 0s, left: <not started>\n", errOut)

	asYAML, _, err := runGet(t, "nightly", "yaml")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(asYAML, "apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\n"), asYAML)

	_, _, err = runGet(t, "missing", "")
	require.Error(t, err)
	assert.Equal(t, "workloadrebalancer missing not found; run `kubectl rebalance get` to list them", err.Error())
}

func TestGetUsage(t *testing.T) {
	kubeconfig := writeKubeconfig(t)
	code, out, errOut := runRebalance(t, "--kubeconfig", kubeconfig, "get", "a", "b")
	assert.Equal(t, ExitError, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, `error: get takes at most 1 name, got 2 ("a" "b"); run 'kubectl rebalance get' to list every WorkloadRebalancer, or 'kubectl rebalance get NAME' for one`)
	assert.NotContains(t, errOut, "arg(s)")

	code, _, errOut = runRebalance(t, "--kubeconfig", kubeconfig, "get", "-o", "table")
	assert.Equal(t, ExitError, code)
	assert.Equal(t, `error: invalid --output "table": use one of wide, json, yaml, kyaml, name, go-template, go-template-file, template, templatefile, jsonpath, jsonpath-as-json, jsonpath-file`+"\n", errOut)

	code, out, _ = runRebalance(t, "get", "--help")
	assert.Equal(t, ExitOK, code)
	assert.Contains(t, out, "kubectl rebalance get [NAME] [-o FORMAT]")
	assert.Contains(t, out, "One of: (wide, json, yaml, kyaml, name, go-template")
}
