package rebalance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Binding is what a rebalance needs of a ResourceBinding or a
// ClusterResourceBinding; both kinds share one spec and status.
type Binding struct {
	// Namespace is empty for a ClusterResourceBinding.
	Namespace, Name string
	// UID tells the binding's events from those of a namesake.
	UID types.UID
	// ResourceVersion guards the trigger write against concurrent changes.
	ResourceVersion string
	// Generation changes with every spec write, the trigger included.
	Generation int64
	// Deleting is true once the binding has a deletion timestamp.
	Deleting bool
	// Labels holds the binding's policy labels (the only ones a rebalance
	// reads); OwnerReferences comes from its metadata.
	Labels          map[string]string
	OwnerReferences []metav1.OwnerReference
	// Handover is true while the binding carries HandoverAnnotation: a
	// make-before-break move holds it or did not end. The annotation itself
	// is not kept (it can be long), only that it is there, so that a run
	// that judges bindings from a list does not take such a one as settled.
	Handover bool
	// Spec and Status are the binding's.
	Spec   workv1alpha2.ResourceBindingSpec
	Status workv1alpha2.ResourceBindingStatus
}

// HandoverAnnotation marks a binding whose scheduling a make-before-break
// move suspended; its value is that move's ledger (package handover).
const HandoverAnnotation = "kubectl-rebalance.io/handover"

// hasHandover reports whether annotations hold HandoverAnnotation.
func hasHandover(annotations map[string]string) bool {
	_, ok := annotations[HandoverAnnotation]
	return ok
}

// bindingKey identifies a binding: its namespace ("" when cluster-scoped) and name.
type bindingKey struct{ namespace, name string }

func (b *Binding) key() bindingKey { return bindingKey{b.Namespace, b.Name} }

func fromResourceBinding(rb *workv1alpha2.ResourceBinding) *Binding {
	return &Binding{
		Namespace: rb.Namespace, Name: rb.Name, UID: rb.UID, ResourceVersion: rb.ResourceVersion, Generation: rb.Generation,
		Deleting: rb.DeletionTimestamp != nil, Labels: PolicyLabels(rb.Labels), OwnerReferences: rb.OwnerReferences,
		Handover: hasHandover(rb.Annotations), Spec: withSharedPlacement(rb.Spec), Status: rb.Status,
	}
}

func fromClusterResourceBinding(crb *workv1alpha2.ClusterResourceBinding) *Binding {
	return &Binding{
		Name: crb.Name, UID: crb.UID, ResourceVersion: crb.ResourceVersion, Generation: crb.Generation,
		Deleting: crb.DeletionTimestamp != nil, Labels: PolicyLabels(crb.Labels), OwnerReferences: crb.OwnerReferences,
		Handover: hasHandover(crb.Annotations), Spec: withSharedPlacement(crb.Spec), Status: crb.Status,
	}
}

// fromObject converts a watched object; it returns nil for anything else.
func fromObject(obj runtime.Object) *Binding {
	switch b := obj.(type) {
	case *workv1alpha2.ResourceBinding:
		return fromResourceBinding(b)
	case *workv1alpha2.ClusterResourceBinding:
		return fromClusterResourceBinding(b)
	case watchedBinding:
		return b.Binding
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

// TriggerWrite is one conditional write of spec.rescheduleTriggeredAt.
type TriggerWrite struct {
	// Namespace ("" when cluster-scoped) and Name locate the binding.
	Namespace, Name string
	// At is the trigger time to write.
	At metav1.Time
	// Expected is the trigger the binding held when read (nil: none). The
	// write applies only while the binding still holds it, so a trigger
	// written meanwhile by someone else is never replaced by an older one.
	Expected *metav1.Time
	// ResourceVersion, when set, makes the write conditional on the whole
	// binding being unchanged instead. It is the fallback for a trigger
	// stored in a form that cannot be compared as text.
	ResourceVersion string
	// DryRun asks the server to check the write without persisting it.
	DryRun bool
}

// ErrTriggerChanged says that a TriggerWrite did not apply because the
// binding no longer holds the expected trigger, or holds it in a form that
// does not compare equal as text.
var ErrTriggerChanged = errors.New("the binding's spec.rescheduleTriggeredAt changed since it was read")

// BindingAPI is the slice of the Karmada API a rebalance uses. Every method
// is one request, so counting calls counts API requests.
type BindingAPI interface {
	// Get reads the binding namespace/name ("" namespace: cluster-scoped).
	Get(ctx context.Context, namespace, name string) (*Binding, error)
	// PatchTrigger performs w and returns the binding as written. It fails
	// with ErrTriggerChanged when w.Expected no longer holds, and with a
	// Conflict when w.ResourceVersion is stale.
	PatchTrigger(ctx context.Context, w TriggerWrite) (*Binding, error)
	// CurrentResourceVersion returns a resource version from which a watch of
	// scope sees every later change, at the cost of listing at most one binding.
	CurrentResourceVersion(ctx context.Context, scope Scope) (string, error)
	// Watch streams the changes in scope after resourceVersion.
	Watch(ctx context.Context, scope Scope, resourceVersion string) (watch.Interface, error)
}

// NewBindingAPI returns a BindingAPI backed by the Karmada typed clientset.
func NewBindingAPI(client karmadaclient.Interface) BindingAPI {
	return &clientsetAPI{client: client, wire: newWireClient(client)}
}

type clientsetAPI struct {
	client karmadaclient.Interface
	// wire decodes trigger answers and watch events off the wire (wire.go);
	// nil for a clientset that sends no requests (a fake).
	wire *wireClient
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

func (c *clientsetAPI) PatchTrigger(ctx context.Context, w TriggerWrite) (*Binding, error) {
	patchType, patch, err := TriggerPatch(w)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{}
	if w.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var b *Binding
	switch {
	case c.wire != nil:
		b, err = c.wire.patch(ctx, w.Namespace, w.Name, patchType, patch, opts)
	case w.Namespace == "":
		crb, patchErr := c.client.WorkV1alpha2().ClusterResourceBindings().Patch(ctx, w.Name, patchType, patch, opts)
		if patchErr == nil {
			b = fromClusterResourceBinding(crb)
		}
		err = patchErr
	default:
		rb, patchErr := c.client.WorkV1alpha2().ResourceBindings(w.Namespace).Patch(ctx, w.Name, patchType, patch, opts)
		if patchErr == nil {
			b = fromResourceBinding(rb)
		}
		err = patchErr
	}
	if isFailedTest(err) {
		return nil, fmt.Errorf("%w: %v", ErrTriggerChanged, err)
	}
	return b, err
}

// isFailedTest recognises the API server's answer to a JSON patch that did
// not apply: 422, reason Invalid, the generic message the server puts in
// place of the patch library's words, and no details. A 422 that names the
// object or its fields (the schema refused the value, say) is a rejection,
// not a changed trigger. The server gives the same answer for any patch
// operation that cannot apply, but the trigger patch only tests and sets a
// field under spec, which every binding has: the test is what failed. The
// caller re-reads the binding: a changed trigger explains it; otherwise the
// resource-version guarded write follows and brings any real problem to
// light.
func isFailedTest(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	s := status.Status()
	if s.Code != http.StatusUnprocessableEntity || s.Reason != metav1.StatusReasonInvalid || s.Message != unappliedPatchMessage {
		return false
	}
	d := s.Details
	return d == nil || d.Name == "" && d.Kind == "" && d.Group == "" && len(d.Causes) == 0
}

// unappliedPatchMessage is the message of the API server's answer to a JSON
// patch that does not apply, as the API machinery words it.
var unappliedPatchMessage = apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", "", 0, false).ErrStatus.Message

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
	if c.wire != nil {
		return c.wire.watch(ctx, scope.Namespace, scope.ClusterScoped, opts)
	}
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

// triggerPath is where the trigger lives, as a JSON pointer.
const triggerPath = "/spec/rescheduleTriggeredAt"

// TriggerPatch returns the patch that performs w.
//
// By default it is a JSON patch that first tests that the binding still
// holds w.Expected (a null value matches a binding without a trigger) and
// then sets the trigger. Only a change of the trigger makes it fail; the
// status updates Karmada's controllers keep making do not, so a busy
// binding costs no extra round trips.
//
// With w.ResourceVersion set it is a JSON merge patch carrying that
// resourceVersion, which the API server answers with Conflict when
// anything in the binding changed.
func TriggerPatch(w TriggerWrite) (types.PatchType, []byte, error) {
	at := formatTrigger(w.At)
	if w.ResourceVersion != "" {
		data, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": w.ResourceVersion},
			"spec":     map[string]any{"rescheduleTriggeredAt": at},
		})
		if err != nil {
			return "", nil, fmt.Errorf("encoding the trigger patch: %w", err)
		}
		return types.MergePatchType, data, nil
	}
	var expected any
	if w.Expected != nil {
		expected = formatTrigger(*w.Expected)
	}
	data, err := json.Marshal([]map[string]any{
		{"op": "test", "path": triggerPath, "value": expected},
		{"op": "add", "path": triggerPath, "value": at},
	})
	if err != nil {
		return "", nil, fmt.Errorf("encoding the trigger patch: %w", err)
	}
	return types.JSONPatchType, data, nil
}

// formatTrigger writes a time as Go clients store metav1.Time: RFC 3339,
// UTC, whole seconds.
func formatTrigger(t metav1.Time) string {
	return t.UTC().Format(time.RFC3339)
}
