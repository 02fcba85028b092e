package rebalance

import (
	"context"
	"encoding/json"
	"fmt"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Binding is what a rebalance needs of a ResourceBinding or a
// ClusterResourceBinding; both kinds share one spec and status.
type Binding struct {
	// Namespace is empty for a ClusterResourceBinding.
	Namespace, Name string
	// ResourceVersion guards the trigger write against concurrent changes.
	ResourceVersion string
	// Generation changes with every spec write, the trigger included.
	Generation int64
	// Deleting is true once the binding has a deletion timestamp.
	Deleting bool
	// Labels and OwnerReferences come from the binding's metadata.
	Labels          map[string]string
	OwnerReferences []metav1.OwnerReference
	// Spec and Status are the binding's.
	Spec   workv1alpha2.ResourceBindingSpec
	Status workv1alpha2.ResourceBindingStatus
}

// bindingKey identifies a binding: its namespace ("" when cluster-scoped) and name.
type bindingKey struct{ namespace, name string }

func (b *Binding) key() bindingKey { return bindingKey{b.Namespace, b.Name} }

func fromResourceBinding(rb *workv1alpha2.ResourceBinding) *Binding {
	return &Binding{
		Namespace: rb.Namespace, Name: rb.Name, ResourceVersion: rb.ResourceVersion, Generation: rb.Generation,
		Deleting: rb.DeletionTimestamp != nil, Labels: rb.Labels, OwnerReferences: rb.OwnerReferences,
		Spec: rb.Spec, Status: rb.Status,
	}
}

func fromClusterResourceBinding(crb *workv1alpha2.ClusterResourceBinding) *Binding {
	return &Binding{
		Name: crb.Name, ResourceVersion: crb.ResourceVersion, Generation: crb.Generation,
		Deleting: crb.DeletionTimestamp != nil, Labels: crb.Labels, OwnerReferences: crb.OwnerReferences,
		Spec: crb.Spec, Status: crb.Status,
	}
}

// fromObject converts a watched object; it returns nil for anything else.
func fromObject(obj runtime.Object) *Binding {
	switch b := obj.(type) {
	case *workv1alpha2.ResourceBinding:
		return fromResourceBinding(b)
	case *workv1alpha2.ClusterResourceBinding:
		return fromClusterResourceBinding(b)
	}
	return nil
}

// Scope is a set of bindings one watch covers: the ResourceBindings of a
// namespace (all namespaces when Namespace is empty), or the
// ClusterResourceBindings; Name narrows it to one binding.
type Scope struct {
	ClusterScoped bool
	Namespace     string
	Name          string
}

// String names a scope for messages.
func (s Scope) String() string {
	resource := "resourcebindings"
	if s.ClusterScoped {
		resource = "clusterresourcebindings"
	}
	switch {
	case s.Name != "" && s.Namespace != "":
		return resource + " " + s.Namespace + "/" + s.Name
	case s.Name != "":
		return resource + " " + s.Name
	case s.ClusterScoped:
		return resource
	case s.Namespace == "":
		return resource + " in all namespaces"
	}
	return resource + " in namespace " + s.Namespace
}

// contains reports whether the scope covers the binding k.
func (s Scope) contains(k bindingKey) bool {
	if s.ClusterScoped != (k.namespace == "") {
		return false
	}
	if s.Namespace != "" && s.Namespace != k.namespace {
		return false
	}
	return s.Name == "" || s.Name == k.name
}

// BindingAPI is the slice of the Karmada API a rebalance uses. Every method
// is one request, so counting calls counts API requests.
type BindingAPI interface {
	// Get reads the binding namespace/name ("" namespace: cluster-scoped).
	Get(ctx context.Context, namespace, name string) (*Binding, error)
	// PatchTrigger sets spec.rescheduleTriggeredAt to at, on the condition that
	// the binding still has resourceVersion; dryRun asks the server to check
	// the write without persisting it.
	PatchTrigger(ctx context.Context, namespace, name, resourceVersion string, at metav1.Time, dryRun bool) (*Binding, error)
	// CurrentResourceVersion returns a resource version from which a watch of
	// scope sees every later change, at the cost of listing at most one binding.
	CurrentResourceVersion(ctx context.Context, scope Scope) (string, error)
	// Watch streams the changes in scope after resourceVersion.
	Watch(ctx context.Context, scope Scope, resourceVersion string) (watch.Interface, error)
}

// NewBindingAPI returns a BindingAPI backed by the Karmada typed clientset.
func NewBindingAPI(client karmadaclient.Interface) BindingAPI {
	return &clientsetAPI{client: client}
}

type clientsetAPI struct {
	client karmadaclient.Interface
}

func (c *clientsetAPI) Get(ctx context.Context, namespace, name string) (*Binding, error) {
	if namespace == "" {
		crb, err := c.client.WorkV1alpha2().ClusterResourceBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return fromClusterResourceBinding(crb), nil
	}
	rb, err := c.client.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromResourceBinding(rb), nil
}

func (c *clientsetAPI) PatchTrigger(ctx context.Context, namespace, name, resourceVersion string, at metav1.Time, dryRun bool) (*Binding, error) {
	patch, err := TriggerPatch(resourceVersion, at)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if namespace == "" {
		crb, err := c.client.WorkV1alpha2().ClusterResourceBindings().Patch(ctx, name, types.MergePatchType, patch, opts)
		if err != nil {
			return nil, err
		}
		return fromClusterResourceBinding(crb), nil
	}
	rb, err := c.client.WorkV1alpha2().ResourceBindings(namespace).Patch(ctx, name, types.MergePatchType, patch, opts)
	if err != nil {
		return nil, err
	}
	return fromResourceBinding(rb), nil
}

func (c *clientsetAPI) CurrentResourceVersion(ctx context.Context, scope Scope) (string, error) {
	opts := scope.listOptions()
	// The list's own resource version is what matters; one item is the least
	// the API server will send.
	opts.Limit = 1
	if scope.ClusterScoped {
		list, err := c.client.WorkV1alpha2().ClusterResourceBindings().List(ctx, opts)
		if err != nil {
			return "", err
		}
		return list.ResourceVersion, nil
	}
	list, err := c.client.WorkV1alpha2().ResourceBindings(scope.Namespace).List(ctx, opts)
	if err != nil {
		return "", err
	}
	return list.ResourceVersion, nil
}

func (c *clientsetAPI) Watch(ctx context.Context, scope Scope, resourceVersion string) (watch.Interface, error) {
	opts := scope.listOptions()
	opts.ResourceVersion = resourceVersion
	opts.AllowWatchBookmarks = true
	if scope.ClusterScoped {
		return c.client.WorkV1alpha2().ClusterResourceBindings().Watch(ctx, opts)
	}
	return c.client.WorkV1alpha2().ResourceBindings(scope.Namespace).Watch(ctx, opts)
}

func (s Scope) listOptions() metav1.ListOptions {
	if s.Name == "" {
		return metav1.ListOptions{}
	}
	return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", s.Name).String()}
}

// TriggerPatch returns the JSON merge patch that sets
// spec.rescheduleTriggeredAt to at. Carrying resourceVersion turns it into a
// conditional write: the API server answers Conflict when the binding changed
// since it was read, so a newer trigger or a schedule that happened in between
// is never overwritten blindly.
func TriggerPatch(resourceVersion string, at metav1.Time) ([]byte, error) {
	patch := map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"spec":     map[string]any{"rescheduleTriggeredAt": at.UTC().Format("2006-01-02T15:04:05Z")},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encoding the trigger patch: %w", err)
	}
	return data, nil
}
