package deschedule

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
)

// WorkloadLister finds the resource templates that a workload label selector
// picks. ResourceBindings do not carry their template's labels, so selecting
// bindings by workload labels takes one LIST of the templates.
type WorkloadLister interface {
	// ListDeployments returns the Deployments of namespace ("" for all)
	// whose labels match selector.
	ListDeployments(ctx context.Context, namespace string, selector labels.Selector) (map[types.NamespacedName]bool, error)
}

// metadataWorkloadLister lists templates as metadata only: a selector
// needs their names and labels, not their specs.
type metadataWorkloadLister struct {
	client   metadata.Interface
	pageSize int64
}

// NewMetadataWorkloadLister returns a WorkloadLister reading Deployments of
// the Karmada API server through the metadata client, in pages.
func NewMetadataWorkloadLister(client metadata.Interface) WorkloadLister {
	return &metadataWorkloadLister{client: client, pageSize: defaultPageSize}
}

func (l *metadataWorkloadLister) ListDeployments(ctx context.Context, namespace string, selector labels.Selector) (map[types.NamespacedName]bool, error) {
	resource := l.client.Resource(supportedWorkload.GroupVersion().WithResource("deployments")).Namespace(namespace)
	items, err := listAll[metav1.PartialObjectMetadata](ctx, l.pageSize, metav1.ListOptions{LabelSelector: selector.String()},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return resource.List(ctx, o) })
	if err != nil {
		return nil, err
	}
	selected := make(map[types.NamespacedName]bool, len(items))
	for i := range items {
		selected[types.NamespacedName{Namespace: items[i].Namespace, Name: items[i].Name}] = true
	}
	return selected, nil
}

// selectWorkloads returns the templates picked by the workload selector of
// the options, or nil when there is none (every workload is in scope).
func (d *Descheduler) selectWorkloads(ctx context.Context) (map[types.NamespacedName]bool, error) {
	if d.workloadSelector == nil {
		return nil, nil
	}
	selected, err := d.opts.Workloads.ListDeployments(ctx, d.opts.Namespace, d.workloadSelector)
	if err != nil {
		return nil, fmt.Errorf("cannot list the deployments matching %q in %s, check the Karmada kubeconfig and that you may list deployments: %w",
			d.opts.WorkloadSelector, d.scopeWords(), err)
	}
	return selected, nil
}

// scopeWords names the namespaces a pass covers, for error messages.
func (d *Descheduler) scopeWords() string {
	if d.opts.Namespace == "" {
		return "all namespaces"
	}
	return "namespace " + d.opts.Namespace
}
