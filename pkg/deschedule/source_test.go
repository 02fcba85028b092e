package deschedule

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestClusterProxyConfig(t *testing.T) {
	tests := []struct {
		name, host, want string
	}{
		{name: "plain host", host: "https://karmada.example:5443", want: "https://karmada.example:5443/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy"},
		{name: "trailing slash", host: "https://karmada.example:5443/", want: "https://karmada.example:5443/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy"},
		{name: "host behind a path prefix", host: "https://gw.example/karmada", want: "https://gw.example/karmada/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := &rest.Config{Host: tt.host, BearerToken: "token", QPS: 40, Burst: 60}
			cfg := ClusterProxyConfig(base, "member1")
			assert.Equal(t, tt.want, cfg.Host)
			assert.Equal(t, "token", cfg.BearerToken, "credentials are those of the Karmada API server")
			assert.Equal(t, float32(40), cfg.QPS)
			assert.Equal(t, tt.host, base.Host, "the Karmada config is left untouched")
		})
	}
}

// TestProxyClientRequestPath checks the URL a member client built on the
// proxy config really requests.
func TestProxyClientRequestPath(t *testing.T) {
	cfg := ClusterProxyConfig(&rest.Config{Host: "https://karmada.example:5443"}, "member1")
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	req := client.CoreV1().RESTClient().Get().Namespace("default").Resource("pods")
	assert.Equal(t, "https://karmada.example:5443/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy/api/v1/namespaces/default/pods", req.URL().String())
}

func TestKubeconfigPodSourceMissingContext(t *testing.T) {
	raw := clientcmdapi.Config{Contexts: map[string]*clientcmdapi.Context{"member1": {Cluster: "member1"}}}
	src := NewKubeconfigPodSource(raw, nil, nil)
	_, err := src.ListClusterObjects(context.Background(), "member2", ListRequest{})
	assert.ErrorContains(t, err, `no kubeconfig context "member2" for member cluster member2`)
}

func TestKubeconfigPodSourceContextMapping(t *testing.T) {
	raw := clientcmdapi.Config{
		Clusters:  map[string]*clientcmdapi.Cluster{"kind-member1": {Server: "https://127.0.0.1:1"}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"kind-member1": {Token: "t"}},
		Contexts:  map[string]*clientcmdapi.Context{"kind-member1": {Cluster: "kind-member1", AuthInfo: "kind-member1"}},
	}
	var configured *rest.Config
	src := NewKubeconfigPodSource(raw, func(c string) string { return "kind-" + c }, func(cfg *rest.Config) {
		cfg.Timeout = time.Millisecond
		configured = cfg
	})
	_, err := src.client("member1")
	require.NoError(t, err)
	require.NotNil(t, configured)
	assert.Equal(t, "https://127.0.0.1:1", configured.Host)
}

func TestClientPodSourceLists(t *testing.T) {
	d := newDeployment("default", "web")
	rs := newReplicaSet(d, "cur", "", testNow)
	other := newDeployment("other", "api")
	objects := []runtime.Object{&d, &rs, &other}
	for _, p := range newPods(rs, 2, pendingUnschedulable, time.Hour) {
		objects = append(objects, &p)
	}
	member := fake.NewClientset(objects...)
	calls := 0
	src := NewClientPodSource(func(cluster string) (kubernetes.Interface, error) {
		calls++
		return member, nil
	})

	all, err := src.ListClusterObjects(context.Background(), "m1", ListRequest{Workloads: []schema.GroupVersionKind{deploymentKind.WithVersion("v1")}})
	require.NoError(t, err)
	assert.Len(t, all.Deployments, 2)
	assert.Len(t, all.ReplicaSets, 1)
	assert.Len(t, all.Pods, 2)

	scoped, err := src.ListClusterObjects(context.Background(), "m1", ListRequest{Namespaces: []string{"other"}, Workloads: []schema.GroupVersionKind{deploymentKind.WithVersion("v1")}})
	require.NoError(t, err)
	assert.Equal(t, []appsv1.Deployment{other}, scoped.Deployments)
	assert.Empty(t, scoped.Pods)
	assert.Equal(t, 1, calls, "the member client is built once and reused")
}

func TestClientPodSourceErrors(t *testing.T) {
	src := NewClientPodSource(func(cluster string) (kubernetes.Interface, error) {
		return nil, errors.New("no route to host")
	})
	_, err := src.ListClusterObjects(context.Background(), "m1", ListRequest{Workloads: []schema.GroupVersionKind{deploymentKind.WithVersion("v1")}})
	assert.ErrorContains(t, err, "no route to host")

	member := fake.NewClientset()
	member.PrependReactor("list", "pods", func(_ k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	src = NewClientPodSource(func(string) (kubernetes.Interface, error) { return member, nil })
	src.hint = func(string, error) string { return "grant it" }
	_, err = src.ListClusterObjects(context.Background(), "m1", ListRequest{Namespaces: []string{"default"}})
	assert.ErrorContains(t, err, "cannot list pods in namespace default of member cluster m1 (grant it): forbidden")
}

func TestProxyHint(t *testing.T) {
	karmadaSide := apierrors.NewForbidden(schema.GroupResource{Group: "cluster.karmada.io", Resource: "clusters"}, "member1", errors.New("no"))
	memberSide := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "", errors.New("no"))
	assert.Contains(t, proxyHint("member1", karmadaSide), "grant get on clusters/proxy in the Karmada apiserver")
	assert.Contains(t, proxyHint("member1", fmt.Errorf("wrapped: %w", memberSide)), "the member cluster refused the identity Karmada forwards")
	assert.Equal(t, "check that the cluster is Ready in Karmada; a Pull-mode cluster is usually not reachable through the proxy: "+
		"if member3 is one, give a kubeconfig with a context named member3, through which it is read (--member-kubeconfig FILE, e.g. local-up-karmada's members.config)",
		proxyHint("member3", errors.New("connection refused")))
}

// TestPullAwareProxyPodSource: a Pull member with a context of its name is
// read through that context, any other member (and a Pull member without a
// context) through the cluster proxy.
func TestPullAwareProxyPodSource(t *testing.T) {
	raw := clientcmdapi.Config{
		Clusters:  map[string]*clientcmdapi.Cluster{"m3": {Server: "https://member3.example:6443"}, "m1": {Server: "https://member1.example:6443"}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"admin": {Token: "t"}},
		Contexts: map[string]*clientcmdapi.Context{
			"member3": {Cluster: "m3", AuthInfo: "admin"},
			"member1": {Cluster: "m1", AuthInfo: "admin"},
		},
	}
	pull := map[string]bool{"member3": true, "member4": true}
	karmada := &rest.Config{Host: "https://karmada.example:5443"}
	tests := []struct{ cluster, wantHost string }{
		{cluster: "member1", wantHost: "https://karmada.example:5443/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy"},
		{cluster: "member3", wantHost: "https://member3.example:6443"},
		{cluster: "member4", wantHost: "https://karmada.example:5443/apis/cluster.karmada.io/v1alpha1/clusters/member4/proxy"},
	}
	for _, tt := range tests {
		t.Run(tt.cluster, func(t *testing.T) {
			var configured []string
			src := NewPullAwareProxyPodSource(karmada, func(c string) (bool, error) { return pull[c], nil }, raw,
				func(cfg *rest.Config) { configured = append(configured, cfg.Host) })
			c, err := src.client(tt.cluster)
			require.NoError(t, err)
			req := c.Kube.CoreV1().RESTClient().Get().Resource("pods")
			assert.Equal(t, tt.wantHost+"/api/v1/pods", req.URL().String())
			if tt.wantHost == "https://member3.example:6443" {
				assert.Equal(t, []string{tt.wantHost}, configured, "a context's config goes through configure")
			}
		})
	}

	src := NewPullAwareProxyPodSource(karmada, func(string) (bool, error) { return false, errors.New("connection refused") }, raw, nil)
	_, err := src.client("member3")
	assert.ErrorContains(t, err, "cannot tell whether member cluster member3 is in Pull mode: connection refused")

	// No context, no question; a refusal to read Clusters means the proxy.
	asked := false
	src = NewPullAwareProxyPodSource(karmada, func(string) (bool, error) { asked = true; return true, nil }, raw, nil)
	c, err := src.client("member9")
	require.NoError(t, err)
	assert.False(t, asked, "a member without a context is not looked up")
	assert.Contains(t, c.Kube.CoreV1().RESTClient().Get().URL().String(), "/clusters/member9/proxy")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "cluster.karmada.io", Resource: "clusters"}, "member3", errors.New("no"))
	src = NewPullAwareProxyPodSource(karmada, func(string) (bool, error) { return false, forbidden }, raw, nil)
	c, err = src.client("member3")
	require.NoError(t, err)
	assert.Contains(t, c.Kube.CoreV1().RESTClient().Get().URL().String(), "/clusters/member3/proxy")
}
