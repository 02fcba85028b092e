package predict

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// EstimatorNamespace and EstimatorServicePrefix are where karmada-scheduler
// looks for a member's karmada-scheduler-estimator by default: the Service
// karmada-system/karmada-scheduler-estimator-<cluster>.
const (
	EstimatorNamespace     = "karmada-system"
	EstimatorServicePrefix = "karmada-scheduler-estimator-"
)

// EstimatorMode says how Source learns whether karmada-scheduler consults
// karmada-scheduler-estimators.
type EstimatorMode string

const (
	// EstimatorAuto looks for the estimators' Services where karmada-scheduler
	// looks for them, in the Karmada apiserver.
	EstimatorAuto EstimatorMode = "auto"
	// EstimatorEnabled: the scheduler runs with --enable-scheduler-estimator
	// for every cluster.
	EstimatorEnabled EstimatorMode = "enabled"
	// EstimatorDisabled: the scheduler uses only its general estimator.
	EstimatorDisabled EstimatorMode = "disabled"
)

// listPage bounds each LIST, so that a large fleet is read in pages.
const listPage = 500

// Source reads an Input from the Karmada apiserver: one LIST of clusters,
// one LIST of ResourceBindings per namespace (or one across all namespaces),
// one LIST of ClusterResourceBindings when a target is cluster-scoped, and,
// in EstimatorAuto mode, one LIST of Services in karmada-system. Large
// results come in pages of 500.
type Source struct {
	Karmada karmadaclient.Interface
	// Kube reads the estimators' Services; nil skips that.
	Kube kubernetes.Interface
	// Estimator is how the estimators are found; "" means EstimatorAuto.
	Estimator EstimatorMode
}

// Read reads what predicting targets needs. With allNamespaces the bindings
// are listed across all namespaces in one go.
func (s Source) Read(ctx context.Context, targets []rebalance.Target, allNamespaces bool) (Input, error) {
	in := Input{Bindings: map[string]*workv1alpha2.ResourceBinding{}}
	clusters, err := s.clusters(ctx)
	if err != nil {
		return in, err
	}
	in.Clusters = clusters

	namespaces, clusterScoped := scopes(targets)
	if allNamespaces && len(namespaces) > 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		if err := s.bindings(ctx, ns, in.Bindings); err != nil {
			return in, err
		}
	}
	if clusterScoped {
		if err := s.clusterBindings(ctx, in.Bindings); err != nil {
			return in, err
		}
	}
	in.Estimated, err = s.estimated(ctx, clusters)
	return in, err
}

// scopes returns the distinct namespaces of the targets, sorted, and whether
// any target is cluster-scoped.
func scopes(targets []rebalance.Target) (namespaces []string, clusterScoped bool) {
	seen := map[string]bool{}
	for _, t := range targets {
		ns := t.Workload.Namespace
		if ns == "" {
			clusterScoped = true
			continue
		}
		if !seen[ns] {
			seen[ns] = true
			namespaces = append(namespaces, ns)
		}
	}
	slices.Sort(namespaces)
	return namespaces, clusterScoped
}

func (s Source) clusters(ctx context.Context) ([]*clusterv1alpha1.Cluster, error) {
	var out []*clusterv1alpha1.Cluster
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := s.Karmada.ClusterV1alpha1().Clusters().List(ctx, opts)
		if err != nil {
			return nil, &rebalance.RequestError{Verb: "list", Resource: "clusters.cluster.karmada.io", Err: err}
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

func (s Source) bindings(ctx context.Context, namespace string, into map[string]*workv1alpha2.ResourceBinding) error {
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := s.Karmada.WorkV1alpha2().ResourceBindings(namespace).List(ctx, opts)
		if err != nil {
			return &rebalance.RequestError{Verb: "list", Resource: "resourcebindings.work.karmada.io", Namespace: namespace, Err: err}
		}
		for i := range list.Items {
			b := &list.Items[i]
			into[Key(b.Namespace, b.Name)] = b
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return nil
		}
	}
}

func (s Source) clusterBindings(ctx context.Context, into map[string]*workv1alpha2.ResourceBinding) error {
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := s.Karmada.WorkV1alpha2().ClusterResourceBindings().List(ctx, opts)
		if err != nil {
			return &rebalance.RequestError{Verb: "list", Resource: "clusterresourcebindings.work.karmada.io", Err: err}
		}
		for i := range list.Items {
			crb := &list.Items[i]
			into[Key("", crb.Name)] = &workv1alpha2.ResourceBinding{ObjectMeta: crb.ObjectMeta, Spec: crb.Spec, Status: crb.Status}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return nil
		}
	}
}

// estimated names the clusters whose estimator karmada-scheduler may consult.
// In auto mode a Service the client may not list counts as absent: the
// estimators of most installations live in the host cluster, out of sight.
func (s Source) estimated(ctx context.Context, clusters []*clusterv1alpha1.Cluster) ([]string, error) {
	switch s.Estimator {
	case EstimatorDisabled:
		return nil, nil
	case EstimatorEnabled:
		out := make([]string, 0, len(clusters))
		for _, c := range clusters {
			out = append(out, c.Name)
		}
		slices.Sort(out)
		return out, nil
	}
	if s.Kube == nil {
		return nil, nil
	}
	list, err := s.Kube.CoreV1().Services(EstimatorNamespace).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list services in %s (looking for karmada-scheduler-estimator; use --scheduler-estimator=enabled or disabled to skip): %w", EstimatorNamespace, err)
	}
	known := map[string]bool{}
	for _, c := range clusters {
		known[c.Name] = true
	}
	var out []string
	for _, svc := range list.Items {
		if name, ok := strings.CutPrefix(svc.Name, EstimatorServicePrefix); ok && known[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}
