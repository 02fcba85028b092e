package rebalance

import (
	"fmt"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// VerifyBinding checks that the binding found under bindingName really belongs
// to workload w before a trigger is written to it. Binding names ignore the
// API group, so two kinds with the same Kind string share one name.
//
// The binding's spec.resource must name the same API group, kind, namespace
// and name as w. The version may differ, since one object is served at
// several versions of its group. When templateUID is known, it must equal
// spec.resource.uid (if recorded) and the UID of the binding's controller
// ownerReference (if there is one).
func VerifyBinding(w Workload, templateUID types.UID, bindingName string, resource workv1alpha2.ObjectReference, owners []metav1.OwnerReference) error {
	binding := bindingRefNamed(w, bindingName)

	wantGroup, err := groupOf(w.APIVersion)
	if err != nil {
		return fmt.Errorf("workload %s has an invalid apiVersion %q: %w; fix the workload reference", WorkloadRef(w), w.APIVersion, err)
	}
	gotGroup, err := groupOf(resource.APIVersion)
	if err != nil {
		return fmt.Errorf("%s has an invalid spec.resource.apiVersion %q: %w; inspect the binding before rebalancing %s",
			binding, resource.APIVersion, err, WorkloadRef(w))
	}
	if gotGroup != wantGroup || resource.Kind != w.Kind || resource.Namespace != w.Namespace || resource.Name != w.Name {
		return fmt.Errorf("%s belongs to %s, not to %s (binding names ignore the API group); it was not touched, rebalance %s through its own kind",
			binding, WorkloadRef(Workload{APIVersion: resource.APIVersion, Kind: resource.Kind, Namespace: resource.Namespace, Name: resource.Name}),
			WorkloadRef(w), WorkloadRef(w))
	}

	if templateUID == "" {
		return nil
	}
	if resource.UID != "" && resource.UID != templateUID {
		return fmt.Errorf("%s records template uid %s but %s has uid %s; the template was probably recreated, wait for karmada to update the binding and retry",
			binding, resource.UID, WorkloadRef(w), templateUID)
	}
	if owner := controllerOf(owners); owner != nil && owner.UID != templateUID {
		return fmt.Errorf("%s is controlled by %s %s with uid %s but %s has uid %s; the template was probably recreated, wait for karmada to update the binding and retry",
			binding, owner.Kind, owner.Name, owner.UID, WorkloadRef(w), templateUID)
	}
	return nil
}

// controllerOf returns the controller among owner references, or nil.
func controllerOf(owners []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range owners {
		if owners[i].Controller != nil && *owners[i].Controller {
			return &owners[i]
		}
	}
	return nil
}

// bindingRefNamed names the binding of w for messages when its name is given
// by the caller rather than derived.
func bindingRefNamed(w Workload, bindingName string) string {
	if IsClusterScoped(w) {
		return "clusterresourcebinding " + bindingName
	}
	return "resourcebinding " + w.Namespace + "/" + bindingName
}

// groupOf returns the API group of an apiVersion ("" for the core group).
func groupOf(apiVersion string) (string, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return "", err
	}
	return gv.Group, nil
}
