package rebalance

import (
	"testing"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestVerifyBinding(t *testing.T) {
	nginx := Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"}
	resourceOf := func(w Workload, uid types.UID) workv1alpha2.ObjectReference {
		return workv1alpha2.ObjectReference{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: uid}
	}
	controller := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "unrelated", UID: "other"},
			{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx", UID: uid, Controller: ptr.To(true)},
		}
	}
	tests := []struct {
		name        string
		workload    Workload
		templateUID types.UID
		resource    workv1alpha2.ObjectReference
		owners      []metav1.OwnerReference
		wantErr     string
	}{
		{
			name:        "matching everything",
			workload:    nginx,
			templateUID: "uid-1",
			resource:    resourceOf(nginx, "uid-1"),
			owners:      controller("uid-1"),
		},
		{
			name:     "unknown template uid skips the uid checks",
			workload: nginx,
			resource: resourceOf(nginx, "uid-2"),
			owners:   controller("uid-3"),
		},
		{
			name:        "no recorded uid and no controller owner",
			workload:    nginx,
			templateUID: "uid-1",
			resource:    resourceOf(nginx, ""),
			owners:      []metav1.OwnerReference{{Kind: "Deployment", Name: "nginx", UID: "uid-9"}},
		},
		{
			name:     "another version of the same group",
			workload: Workload{APIVersion: "apps/v1beta2", Kind: "Deployment", Namespace: "default", Name: "nginx"},
			resource: resourceOf(nginx, ""),
		},
		{
			name:     "same kind string in another group",
			workload: Workload{APIVersion: "example.io/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"},
			resource: resourceOf(nginx, ""),
			wantErr: "resourcebinding default/nginx-deployment belongs to apps/v1 Deployment default/nginx, not to example.io/v1 Deployment default/nginx " +
				"(binding names ignore the API group); it was not touched, rebalance example.io/v1 Deployment default/nginx through its own kind",
		},
		{
			name:     "name that maps to the same binding",
			workload: Workload{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "system:edit"},
			resource: workv1alpha2.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "system.edit"},
			wantErr: "clusterresourcebinding system.edit-clusterrole belongs to rbac.authorization.k8s.io/v1 ClusterRole system.edit, not to " +
				"rbac.authorization.k8s.io/v1 ClusterRole system:edit (binding names ignore the API group); it was not touched, " +
				"rebalance rbac.authorization.k8s.io/v1 ClusterRole system:edit through its own kind",
		},
		{
			name:     "namespace mismatch",
			workload: nginx,
			resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Name: "nginx"},
			wantErr:  "resourcebinding default/nginx-deployment belongs to apps/v1 Deployment other/nginx, not to apps/v1 Deployment default/nginx",
		},
		{
			name:        "recorded uid differs",
			workload:    nginx,
			templateUID: "uid-1",
			resource:    resourceOf(nginx, "uid-0"),
			wantErr: "resourcebinding default/nginx-deployment records template uid uid-0 but apps/v1 Deployment default/nginx has uid uid-1; " +
				"the template was probably recreated, wait for karmada to update the binding and retry",
		},
		{
			name:        "controller owner differs",
			workload:    nginx,
			templateUID: "uid-1",
			resource:    resourceOf(nginx, ""),
			owners:      controller("uid-0"),
			wantErr: "resourcebinding default/nginx-deployment is controlled by Deployment nginx with uid uid-0 but apps/v1 Deployment default/nginx has uid uid-1; " +
				"the template was probably recreated, wait for karmada to update the binding and retry",
		},
		{
			name:     "invalid apiVersion in the binding",
			workload: nginx,
			resource: workv1alpha2.ObjectReference{APIVersion: "a/b/c", Kind: "Deployment", Namespace: "default", Name: "nginx"},
			wantErr:  `resourcebinding default/nginx-deployment has an invalid spec.resource.apiVersion "a/b/c"`,
		},
		{
			name:     "invalid apiVersion in the workload",
			workload: Workload{APIVersion: "a/b/c", Kind: "Deployment", Namespace: "default", Name: "nginx"},
			resource: resourceOf(nginx, ""),
			wantErr:  `workload a/b/c Deployment default/nginx has an invalid apiVersion "a/b/c"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyBinding(tt.workload, tt.templateUID, BindingNameFor(tt.workload), tt.resource, tt.owners)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			if assert.Error(t, err) {
				assert.Contains(t, err.Error(), tt.wantErr)
			}
		})
	}
}
