package deschedule

import (
	"context"
	"fmt"
	"strconv"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
)

// SkipAnnotation, set to "true" on a resource template (a Deployment,
// StatefulSet, Job or custom resource in the Karmada apiserver), keeps the
// descheduler away from its binding. Any other value than "true" or "false"
// is refused the same way, with the reason, rather than guessed at.
const SkipAnnotation = "deschedule.kubectl-rebalance.io/skip"

// TemplateLister reads resource templates from the Karmada apiserver.
// ResourceBindings carry neither their template's labels nor its
// annotations, so a pass lists the templates of each kind it meets once.
type TemplateLister interface {
	// ListTemplates returns the templates of kind gvk in namespace ("" for
	// all) whose labels match selector (nil for every one), as metadata.
	ListTemplates(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]metav1.PartialObjectMetadata, error)
}

// metadataTemplateLister lists templates as metadata only: the pass needs
// their names, labels and annotations, not their specs.
type metadataTemplateLister struct {
	client   metadata.Interface
	mapper   meta.RESTMapper
	pageSize int64
}

// NewMetadataTemplateLister returns a TemplateLister reading the Karmada
// apiserver through the metadata client, in pages. mapper finds the resource
// of kinds that are not built in (custom resources); it may be nil.
func NewMetadataTemplateLister(client metadata.Interface, mapper meta.RESTMapper) TemplateLister {
	return &metadataTemplateLister{client: client, mapper: mapper, pageSize: defaultPageSize}
}

func (l *metadataTemplateLister) ListTemplates(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]metav1.PartialObjectMetadata, error) {
	mapping, err := mapKind(l.mapper, gvk)
	if err != nil {
		return nil, fmt.Errorf("cannot find the resource of kind %s: %w", kindWords(gvk.GroupKind()), err)
	}
	opts := metav1.ListOptions{}
	if selector != nil {
		opts.LabelSelector = selector.String()
	}
	resource := l.client.Resource(mapping.gvr).Namespace(namespace)
	return listAll[metav1.PartialObjectMetadata](ctx, l.pageSize, opts,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return resource.List(ctx, o) })
}

// templateIndex is what a pass knows of the templates of the kinds it met.
type templateIndex struct {
	byKind map[schema.GroupKind]map[types.NamespacedName]*metav1.PartialObjectMetadata
	errs   map[schema.GroupKind]error
}

// templateKinds returns the kinds of the bindings' templates, each with the
// first version met.
func templateKinds(bindings []*workv1alpha2.ResourceBinding) []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	seen := map[schema.GroupKind]bool{}
	for _, rb := range bindings {
		gvk := resourceKind(rb)
		if !seen[gvk.GroupKind()] {
			seen[gvk.GroupKind()] = true
			kinds = append(kinds, gvk)
		}
	}
	return kinds
}

// resourceKind is the kind of rb's resource template.
func resourceKind(rb *workv1alpha2.ResourceBinding) schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(rb.Spec.Resource.APIVersion, rb.Spec.Resource.Kind)
}

// listTemplates lists, once per kind, the templates of the bindings' kinds
// in the pass's namespace scope. A kind that cannot be listed is recorded in
// the index's errors.
func (d *Descheduler) listTemplates(ctx context.Context, bindings []*workv1alpha2.ResourceBinding) *templateIndex {
	ix := &templateIndex{byKind: map[schema.GroupKind]map[types.NamespacedName]*metav1.PartialObjectMetadata{}, errs: map[schema.GroupKind]error{}}
	for _, gvk := range templateKinds(bindings) {
		items, err := d.opts.Templates.ListTemplates(ctx, gvk, d.opts.Namespace, d.workloadSelector)
		if err != nil {
			ix.errs[gvk.GroupKind()] = fmt.Errorf("cannot list the %s templates in %s of the Karmada apiserver, check that you may list them: %w",
				kindWords(gvk.GroupKind()), d.scopeWords(), err)
			continue
		}
		byName := make(map[types.NamespacedName]*metav1.PartialObjectMetadata, len(items))
		for i := range items {
			byName[types.NamespacedName{Namespace: items[i].Namespace, Name: items[i].Name}] = &items[i]
		}
		ix.byKind[gvk.GroupKind()] = byName
	}
	return ix
}

// template returns rb's template, nil when it was not listed (or, with a
// selector, does not match), or the error of its kind.
func (ix *templateIndex) template(rb *workv1alpha2.ResourceBinding) (*metav1.PartialObjectMetadata, error) {
	gk := resourceKind(rb).GroupKind()
	if err := ix.errs[gk]; err != nil {
		return nil, err
	}
	return ix.byKind[gk][types.NamespacedName{Namespace: rb.Spec.Resource.Namespace, Name: rb.Spec.Resource.Name}], nil
}

// optedOut reports whether a template asks to be left alone, and why.
func optedOut(tpl *metav1.PartialObjectMetadata) (bool, string) {
	value, ok := tpl.Annotations[SkipAnnotation]
	if !ok {
		return false, ""
	}
	skip, err := strconv.ParseBool(value)
	switch {
	case err != nil:
		return true, fmt.Sprintf("the template's %s annotation is %q, neither true nor false; left alone until it is fixed", SkipAnnotation, value)
	case skip:
		return true, fmt.Sprintf("opted out: the template has %s=%s", SkipAnnotation, value)
	}
	return false, ""
}

// scopeWords names the namespaces a pass covers, for error messages.
func (d *Descheduler) scopeWords() string {
	if d.opts.Namespace == "" {
		return "all namespaces"
	}
	return "namespace " + d.opts.Namespace
}
