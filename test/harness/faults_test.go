package harness

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBindingUpdate(t *testing.T) {
	body := `{"kind":"ResourceBinding","spec":{"clusters":[{"name":"member1","replicas":0},{"name":"member2","replicas":2}]}}`
	tests := []struct {
		name, method, target string
		want                 *BindingWrite
	}{
		{"update", "PUT", "/apis/work.karmada.io/v1alpha2/namespaces/ns/resourcebindings/web-deployment",
			&BindingWrite{Binding: "ns/web-deployment", Clusters: "member1:0,member2:2"}},
		{"cluster-scoped", "PUT", "/apis/work.karmada.io/v1alpha2/clusterresourcebindings/admin-clusterrole",
			&BindingWrite{Binding: "admin-clusterrole", Clusters: "member1:0,member2:2"}},
		{"status", "PUT", "/apis/work.karmada.io/v1alpha2/namespaces/ns/resourcebindings/web-deployment/status", nil},
		{"dry run", "PUT", "/apis/work.karmada.io/v1alpha2/namespaces/ns/resourcebindings/web-deployment?dryRun=All", nil},
		{"patch", "PATCH", "/apis/work.karmada.io/v1alpha2/namespaces/ns/resourcebindings/web-deployment", nil},
		{"other object", "PUT", "/apis/apps/v1/namespaces/ns/deployments/web", nil},
		{"lease", "PUT", "/apis/coordination.k8s.io/v1/namespaces/karmada-system/leases/karmada-descheduler", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bindingUpdate(httptest.NewRequest(tt.method, tt.target, nil), []byte(body))
			if tt.want == nil {
				assert.Nil(t, got)
				return
			}
			if assert.NotNil(t, got) {
				assert.Equal(t, tt.want.Binding, got.Binding)
				assert.Equal(t, tt.want.Clusters, got.Clusters)
				assert.False(t, got.Sent.IsZero())
			}
		})
	}
}

func TestIsMemberProxyPath(t *testing.T) {
	assert.True(t, isMemberProxyPath("/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy/api/v1/namespaces/ns/pods"))
	assert.False(t, isMemberProxyPath("/apis/cluster.karmada.io/v1alpha1/clusters/member1"))
	assert.False(t, isMemberProxyPath("/api/v1/namespaces/proxy/pods"))
}
