package rebalance

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBindingName(t *testing.T) {
	tests := []struct {
		name, objectName, kind, want string
	}{
		{name: "deployment", objectName: "nginx", kind: "Deployment", want: "nginx-deployment"},
		{name: "colons become dots", objectName: "system:aggregate-to-edit", kind: "ClusterRole", want: "system.aggregate-to-edit-clusterrole"},
		{name: "every colon is replaced", objectName: "a:b:c", kind: "RoleBinding", want: "a.b.c-rolebinding"},
		{name: "upper case name is lowered", objectName: "MyApp", kind: "CronTab", want: "myapp-crontab"},
		{name: "dots are kept", objectName: "app.v1", kind: "Service", want: "app.v1-service"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, BindingName(tt.objectName, tt.kind))
			assert.Equal(t, tt.want, BindingNameFor(Workload{APIVersion: "x/v1", Kind: tt.kind, Name: tt.objectName}))
		})
	}
}

func TestBindingKindAndRefs(t *testing.T) {
	tests := []struct {
		name        string
		workload    Workload
		clusterWide bool
		kind        string
		bindingRef  string
		workloadRef string
	}{
		{
			name:        "namespaced",
			workload:    Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"},
			kind:        "ResourceBinding",
			bindingRef:  "resourcebinding default/nginx-deployment",
			workloadRef: "apps/v1 Deployment default/nginx",
		},
		{
			name:        "cluster-scoped",
			workload:    Workload{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "system:edit"},
			clusterWide: true,
			kind:        "ClusterResourceBinding",
			bindingRef:  "clusterresourcebinding system.edit-clusterrole",
			workloadRef: "rbac.authorization.k8s.io/v1 ClusterRole system:edit",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.clusterWide, IsClusterScoped(tt.workload))
			assert.Equal(t, tt.kind, BindingKind(tt.workload))
			assert.Equal(t, tt.bindingRef, BindingRef(tt.workload))
			assert.Equal(t, tt.workloadRef, WorkloadRef(tt.workload))
		})
	}
}
