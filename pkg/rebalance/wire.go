package rebalance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Bindings read off the wire. A run of thousands of workloads reads every
// binding several times: the answer of its trigger write, then each change
// its watch brings (the scheduler's answer, the controllers' status). The
// typed clientset decodes each of them whole, in several passes over the
// JSON (the watch frame, the object's kind, a validity scan, the decode)
// and with every field, managedFields and the applied-placement annotation
// included, which a run never reads. On the fleet benchmark that decoding
// was half the plugin's CPU, and a CPU-bound control plane loses what the
// plugin spends (docs/performance.md). Here the JSON is decoded once, into
// what a Binding keeps.

// wireObject is a binding as the API server sends it, reduced to what a
// Binding keeps. The same shape decodes the metav1.Status of a watch's
// ERROR event: its code, reason, message and details.
type wireObject struct {
	Metadata wireMeta                         `json:"metadata"`
	Spec     workv1alpha2.ResourceBindingSpec `json:"spec"`
	// Status is a binding's status. A metav1.Status has a string there,
	// which does not decode into it: the decoder goes on with the other
	// fields and reports the mismatch at the end, which wireEvents.Decode
	// drops for an ERROR event.
	Status workv1alpha2.ResourceBindingStatus `json:"status"`
	// A metav1.Status's own fields.
	Message string                `json:"message"`
	Reason  metav1.StatusReason   `json:"reason"`
	Code    int32                 `json:"code"`
	Details *metav1.StatusDetails `json:"details"`
}

type wireMeta struct {
	Name              string                  `json:"name"`
	Namespace         string                  `json:"namespace"`
	UID               types.UID               `json:"uid"`
	ResourceVersion   string                  `json:"resourceVersion"`
	Generation        int64                   `json:"generation"`
	DeletionTimestamp *metav1.Time            `json:"deletionTimestamp"`
	Labels            map[string]string       `json:"labels"`
	Annotations       handoverMark            `json:"annotations"`
	OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
}

// handoverMark decodes a binding's annotations into whether they hold
// HandoverAnnotation, the one a run reads; their values (the applied
// placement, a ledger) are skipped.
type handoverMark bool

func (h *handoverMark) UnmarshalJSON(data []byte) error {
	var keys map[string]skipped
	if err := json.Unmarshal(data, &keys); err != nil {
		return err
	}
	_, ok := keys[HandoverAnnotation]
	*h = handoverMark(ok)
	return nil
}

// skipped decodes any JSON value into nothing.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

// binding converts o as fromResourceBinding converts a typed binding; an
// empty namespace is a ClusterResourceBinding's.
func (o *wireObject) binding() *Binding {
	m := &o.Metadata
	return &Binding{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		Deleting: m.DeletionTimestamp != nil, Labels: PolicyLabels(m.Labels), OwnerReferences: m.OwnerReferences,
		Handover: bool(m.Annotations), Spec: withSharedPlacement(o.Spec), Status: o.Status,
	}
}

// status returns o as the metav1.Status it is in a watch's ERROR event.
func (o *wireObject) status() *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: o.Message, Reason: o.Reason, Code: o.Code, Details: o.Details,
	}
}

// watchedBinding carries a Binding decoded off the wire as a watch
// event's object, which must be a runtime.Object; fromObject unwraps it.
type watchedBinding struct{ *Binding }

func (w watchedBinding) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the binding; its policy labels and placement stay
// shared (PolicyLabels, SharedPlacement), as they are between the bindings
// read.
func (w watchedBinding) DeepCopyObject() runtime.Object {
	out := *w.Binding
	out.OwnerReferences = append([]metav1.OwnerReference(nil), w.OwnerReferences...)
	out.Spec = *w.Spec.DeepCopy()
	out.Spec.Placement = w.Spec.Placement
	out.Status = *w.Status.DeepCopy()
	return watchedBinding{&out}
}

// wireClient reads and writes bindings over the REST client of the
// clientset's work/v1alpha2 group.
type wireClient struct {
	rest rest.Interface
}

// newWireClient returns the wire client of client, or nil when its group
// has no REST client to send requests with (a fake clientset): the caller
// then goes through the typed clientset.
func newWireClient(client karmadaclient.Interface) *wireClient {
	if client == nil {
		return nil
	}
	rc, ok := client.WorkV1alpha2().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return nil
	}
	return &wireClient{rest: rc}
}

// jsonOnly is the Accept header of the requests here: the answers are
// decoded as JSON, whatever other encodings the client would take.
const jsonOnly = "application/json"

func bindingResource(clusterScoped bool) string {
	if clusterScoped {
		return "clusterresourcebindings"
	}
	return "resourcebindings"
}

// patch sends a patch of the binding namespace/name ("" namespace:
// cluster-scoped) and decodes the answer.
func (c *wireClient) patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*Binding, error) {
	req := c.rest.Patch(pt).Resource(bindingResource(namespace == "")).Name(name).
		VersionedParams(&opts, metav1.ParameterCodec).Body(data).SetHeader("Accept", jsonOnly)
	if namespace != "" {
		req = req.Namespace(namespace)
	}
	raw, err := body(req.Do(ctx))
	if err != nil {
		return nil, err
	}
	var o wireObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("decoding the binding %s: %w", name, err)
	}
	return o.binding(), nil
}

// body returns the body of a successful answer, or the error the server
// sent: Result.Error decodes it into the API status (a conflict, a failed
// JSON patch test) where Result.Raw keeps only its text.
func body(res rest.Result) ([]byte, error) {
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}

// list reads one page of the bindings of namespace ("" with
// clusterScoped: the ClusterResourceBindings).
func (c *wireClient) list(ctx context.Context, namespace string, clusterScoped bool, opts metav1.ListOptions) ([]*Binding, metav1.ListMeta, error) {
	req := c.rest.Get().Resource(bindingResource(clusterScoped)).VersionedParams(&opts, metav1.ParameterCodec).SetHeader("Accept", jsonOnly)
	if !clusterScoped {
		req = req.Namespace(namespace)
	}
	raw, err := body(req.Do(ctx))
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	var list struct {
		Metadata metav1.ListMeta `json:"metadata"`
		Items    []wireObject    `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, metav1.ListMeta{}, fmt.Errorf("decoding the list of bindings: %w", err)
	}
	out := make([]*Binding, len(list.Items))
	for i := range list.Items {
		out[i] = list.Items[i].binding()
	}
	return out, list.Metadata, nil
}

// watch streams the changes of the bindings opts selects; each event's
// object is a watchedBinding, a bookmark's a PartialObjectMetadata with its
// resource version, an error's a *metav1.Status.
func (c *wireClient) watch(ctx context.Context, namespace string, clusterScoped bool, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	req := c.rest.Get().Resource(bindingResource(clusterScoped)).VersionedParams(&opts, metav1.ParameterCodec).SetHeader("Accept", jsonOnly)
	if !clusterScoped {
		req = req.Namespace(namespace)
	}
	body, err := req.Stream(ctx)
	if err != nil {
		return nil, err
	}
	return watch.NewStreamWatcher(&wireEvents{body: body, dec: json.NewDecoder(body)},
		apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding")), nil
}

// wireEvents decodes a watch's stream of JSON events, one pass each.
type wireEvents struct {
	body io.ReadCloser
	dec  *json.Decoder
}

func (d *wireEvents) Decode() (watch.EventType, runtime.Object, error) {
	var ev struct {
		Type   watch.EventType `json:"type"`
		Object wireObject      `json:"object"`
	}
	err := d.dec.Decode(&ev)
	var mismatch *json.UnmarshalTypeError
	if ev.Type == watch.Error && errors.As(err, &mismatch) && mismatch.Field == "object.status" {
		// The metav1.Status of an ERROR event, its string status skipped.
		err = nil
	}
	if err != nil {
		return "", nil, err
	}
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		return ev.Type, watchedBinding{ev.Object.binding()}, nil
	case watch.Bookmark:
		return ev.Type, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: ev.Object.Metadata.ResourceVersion}}, nil
	case watch.Error:
		return ev.Type, ev.Object.status(), nil
	}
	return "", nil, fmt.Errorf("a watch of bindings sent an event of unknown type %q", ev.Type)
}

func (d *wireEvents) Close() { _ = d.body.Close() }

// ListBindingsPage reads one page of the bindings of namespace ("" with
// clusterScoped: the ClusterResourceBindings), decoded off the wire when
// client can send requests itself.
func ListBindingsPage(ctx context.Context, client karmadaclient.Interface, namespace string, clusterScoped bool, opts metav1.ListOptions) ([]*Binding, metav1.ListMeta, error) {
	if w := newWireClient(client); w != nil {
		return w.list(ctx, namespace, clusterScoped, opts)
	}
	if clusterScoped {
		list, err := client.WorkV1alpha2().ClusterResourceBindings().List(ctx, opts)
		if err != nil {
			return nil, metav1.ListMeta{}, err
		}
		out := make([]*Binding, len(list.Items))
		for i := range list.Items {
			out[i] = fromClusterResourceBinding(&list.Items[i])
		}
		return out, list.ListMeta, nil
	}
	list, err := client.WorkV1alpha2().ResourceBindings(namespace).List(ctx, opts)
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	out := make([]*Binding, len(list.Items))
	for i := range list.Items {
		out[i] = fromResourceBinding(&list.Items[i])
	}
	return out, list.ListMeta, nil
}
