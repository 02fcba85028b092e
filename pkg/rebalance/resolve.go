package rebalance

import (
	"errors"
	"fmt"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

// RebalancerGroupKind is the WorkloadRebalancer's group and kind. An object
// of this kind among the inputs is not a workload to rebalance: its
// spec.workloads are.
var RebalancerGroupKind = schema.GroupKind{Group: appsv1alpha1.GroupName, Kind: appsv1alpha1.ResourceKindWorkloadRebalancer}

// Resolved is what the inputs of a rebalance name.
type Resolved struct {
	// Targets are the workloads, in input order, possibly repeated.
	Targets []Target
	// Rebalancers are the WorkloadRebalancer manifests among the inputs.
	Rebalancers []*appsv1alpha1.WorkloadRebalancer
}

// Resolver turns what cli-runtime's resource builder found into targets.
type Resolver struct {
	// Mapper checks the workloads a WorkloadRebalancer manifest lists.
	Mapper meta.RESTMapper
}

// Add resolves one builder result. An object read from the server lends its
// uid to the target; one read from a file does not, since a manifest may
// carry the uid of an object deleted long ago. A WorkloadRebalancer given
// by name is read from the server first.
func (r Resolver) Add(resolved *Resolved, info *resource.Info) error {
	if info.Mapping == nil {
		return fmt.Errorf("%s: no resource type known for %q; use TYPE/NAME with a type the API server serves", sourceOf(info), info.Name)
	}
	gvk := info.Mapping.GroupVersionKind
	if gvk.GroupKind() == RebalancerGroupKind {
		if info.Object == nil {
			if err := info.Get(); err != nil {
				return fmt.Errorf("reading workloadrebalancer %s: %w", info.Name, err)
			}
		}
		rb, err := toRebalancer(info.Object)
		if err != nil {
			return fmt.Errorf("%s: %w", sourceOf(info), err)
		}
		targets, err := r.FromRebalancer(rb, sourceOf(info))
		if err != nil {
			return err
		}
		resolved.Targets = append(resolved.Targets, targets...)
		resolved.Rebalancers = append(resolved.Rebalancers, rb)
		return nil
	}

	target := Target{Workload: Workload{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: info.Namespace, Name: info.Name}}
	if info.Source == "" && info.Object != nil {
		if m, err := meta.Accessor(info.Object); err == nil {
			target.UID = m.GetUID()
		}
	}
	resolved.Targets = append(resolved.Targets, target)
	return nil
}

// FromRebalancer returns the workloads a WorkloadRebalancer lists, after
// checking each against the API server's types: the kind must be served, a
// namespaced kind needs a namespace and a cluster-scoped one must have none.
// The controller would record such mistakes as ReferencedBindingNotFound;
// failing before any write lets the user fix the manifest instead.
func (r Resolver) FromRebalancer(rb *appsv1alpha1.WorkloadRebalancer, source string) ([]Target, error) {
	where := fmt.Sprintf("workloadrebalancer %q", rb.Name)
	if source != "" {
		where += " in " + source
	}
	if len(rb.Spec.Workloads) == 0 {
		return nil, fmt.Errorf("%s lists no spec.workloads; add at least one workload", where)
	}
	targets, problems := r.check(rb.Spec.Workloads, "spec.workloads")
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s: %w; fix the manifest and run the command again", where, errors.Join(problems...))
	}
	return targets, nil
}

// Workloads returns workloads held as values (not read from a manifest)
// as targets, after the checks FromRebalancer makes.
func (r Resolver) Workloads(workloads []Workload) ([]Target, error) {
	targets, problems := r.check(workloads, "workloads")
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return targets, nil
}

// check checks each workload, named list[i] in the problems it finds.
func (r Resolver) check(workloads []Workload, list string) ([]Target, []error) {
	targets := make([]Target, 0, len(workloads))
	var problems []error
	for i, w := range workloads {
		if err := r.checkWorkload(w); err != nil {
			problems = append(problems, fmt.Errorf("%s[%d] (%s): %w", list, i, WorkloadRef(w), err))
			continue
		}
		targets = append(targets, Target{Workload: w})
	}
	return targets, problems
}

// checkWorkload checks one spec.workloads entry against the API server.
func (r Resolver) checkWorkload(w Workload) error {
	if w.Name == "" || w.Kind == "" || w.APIVersion == "" {
		return errors.New("apiVersion, kind and name are required")
	}
	gv, err := schema.ParseGroupVersion(w.APIVersion)
	if err != nil {
		return fmt.Errorf("invalid apiVersion: %w", err)
	}
	if r.Mapper == nil {
		return nil
	}
	mapping, err := r.Mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: w.Kind}, gv.Version)
	if meta.IsNoMatchError(err) {
		return fmt.Errorf("the API server does not serve kind %s in %s", w.Kind, w.APIVersion)
	}
	if err != nil {
		return err
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	switch {
	case namespaced && w.Namespace == "":
		return fmt.Errorf("%s is namespaced, so the entry needs a namespace", w.Kind)
	case !namespaced && w.Namespace != "":
		return fmt.Errorf("%s is cluster-scoped, so the entry must not have a namespace", w.Kind)
	}
	return nil
}

// toRebalancer converts what the builder decoded into the typed object.
func toRebalancer(obj runtime.Object) (*appsv1alpha1.WorkloadRebalancer, error) {
	switch o := obj.(type) {
	case *appsv1alpha1.WorkloadRebalancer:
		return o, nil
	case *unstructured.Unstructured:
		rb := &appsv1alpha1.WorkloadRebalancer{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, rb, true); err != nil {
			return nil, fmt.Errorf("workloadrebalancer %q is malformed: %w", o.GetName(), err)
		}
		return rb, nil
	}
	return nil, fmt.Errorf("unexpected %T where a workloadrebalancer was expected", obj)
}

// sourceOf names where an object came from, for messages.
func sourceOf(info *resource.Info) string {
	if info.Source != "" {
		return info.Source
	}
	return "the API server"
}
