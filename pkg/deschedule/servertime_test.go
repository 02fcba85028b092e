package deschedule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The unschedulable threshold is measured with the member cluster's time:
// a member whose clock is 58 minutes behind this machine's has pods that
// became unschedulable 2 minutes ago by its clock. With the default 5m
// threshold they do not count yet; by the local clock they would count for
// 60 minutes and be evicted.
func TestPassMeasuresTheThresholdWithTheMembersTime(t *testing.T) {
	web := newBinding("default", "web", cluster{"m1", 3, 1})
	member := memberCluster(memberWorkload{"default", "web", 1, 2})
	f := newPassFixture([]*workv1alpha2.ResourceBinding{web}, map[string]*fake.Clientset{"m1": member})
	d := f.descheduler(t, Options{})
	inner := d.pods
	memberNow := testNow.Add(-58 * time.Minute)
	d.pods = podSourceFunc(func(ctx context.Context, cluster string, req ListRequest) (*ClusterObjects, error) {
		objs, err := inner.ListClusterObjects(ctx, cluster, req)
		if objs != nil {
			objs.ServerTime = memberNow
		}
		return objs, err
	})

	result, err := d.Pass(context.Background())
	require.NoError(t, err)
	require.Len(t, result.Bindings, 1)
	assert.NotEqual(t, OutcomeDescheduled, result.Bindings[0].Outcome, "nothing is evicted before the threshold passed on the member")
	assert.Equal(t, int32(0), result.EvictedReplicas)
	assert.Empty(t, updates(f.karmada.Actions()))

	// The same pods, by the member's clock 4 minutes later: they count.
	memberNow = testNow.Add(-54 * time.Minute)
	result, err = d.Pass(context.Background())
	require.NoError(t, err)
	assert.Equal(t, OutcomeDescheduled, result.Bindings[0].Outcome)
	assert.Equal(t, int32(2), result.EvictedReplicas)
}

// A member listed through a kubeconfig context (or the Karmada proxy) tells
// its time by the Date of its answers.
func TestClientPodSourceReadsTheMembersTime(t *testing.T) {
	behind := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", behind.Format(http.TimeFormat))
		w.Header().Set("Content-Type", "application/json")
		kind := map[string]string{"/apis/apps/v1/deployments": "apps/v1 DeploymentList", "/apis/apps/v1/replicasets": "apps/v1 ReplicaSetList", "/api/v1/pods": "v1 PodList"}[r.URL.Path]
		apiVersion, kind, _ := strings.Cut(kind, " ")
		_, _ = w.Write([]byte(`{"kind":"` + kind + `","apiVersion":"` + apiVersion + `","metadata":{},"items":[]}`))
	}))
	defer server.Close()
	raw := clientcmdapi.Config{
		Clusters:  map[string]*clientcmdapi.Cluster{"m1": {Server: server.URL}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"m1": {}},
		Contexts:  map[string]*clientcmdapi.Context{"m1": {Cluster: "m1", AuthInfo: "m1"}},
	}
	objs, err := NewKubeconfigPodSource(raw, nil, nil).ListClusterObjects(context.Background(), "m1", ListRequest{})
	require.NoError(t, err)
	assert.False(t, objs.ServerTime.Before(behind), "at least the member's Date")
	assert.True(t, objs.ServerTime.Before(time.Now().Add(-50*time.Minute)), "the member's time, not this machine's: %s", objs.ServerTime)
}
