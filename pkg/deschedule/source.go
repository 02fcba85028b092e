package deschedule

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/pager"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// PodSource reads the objects a pass needs from member clusters.
type PodSource interface {
	// ListClusterObjects lists the Deployments, ReplicaSets and non-terminal
	// Pods of the member cluster named cluster. An empty namespaces slice
	// means all namespaces; otherwise only the given namespaces are listed.
	ListClusterObjects(ctx context.Context, cluster string, namespaces []string) (*ClusterObjects, error)
}

// ClientPodSource is a PodSource over one kubernetes.Interface per member
// cluster. Clients are built on first use and reused for later passes.
type ClientPodSource struct {
	clientFor func(cluster string) (kubernetes.Interface, error)
	// hint tells the user how to fix a listing error of this kind of source.
	hint func(error) string
	// PageSize bounds each LIST response; 0 lists in one response.
	PageSize int64

	mu      sync.Mutex
	clients map[string]kubernetes.Interface
	// clocks read each member's time from the Date of its answers; they
	// have a lock of their own, since clientFor asks for them under mu.
	clockMu sync.Mutex
	clocks  map[string]*rebalance.ServerClock
}

var _ PodSource = (*ClientPodSource)(nil)

// defaultPageSize keeps LIST responses of large member clusters bounded.
const defaultPageSize = 500

// NewClientPodSource returns a PodSource that asks clientFor for each member
// cluster's client. It suits tests (fake clientsets) and custom wiring.
func NewClientPodSource(clientFor func(cluster string) (kubernetes.Interface, error)) *ClientPodSource {
	return &ClientPodSource{clientFor: clientFor, PageSize: defaultPageSize, clients: map[string]kubernetes.Interface{}, clocks: map[string]*rebalance.ServerClock{}}
}

// clock returns the server clock of the member cluster named cluster.
func (s *ClientPodSource) clock(cluster string) *rebalance.ServerClock {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	c, ok := s.clocks[cluster]
	if !ok {
		c = rebalance.NewServerClock()
		s.clocks[cluster] = c
	}
	return c
}

// clusterProxyPathFormat is the aggregated-apiserver path that forwards
// requests to a member cluster's API server.
const clusterProxyPathFormat = "/apis/cluster.karmada.io/v1alpha1/clusters/%s/proxy"

// ClusterProxyConfig returns a copy of the Karmada API server config whose
// host points at the Karmada proxy of the member cluster named cluster, so
// that ordinary clients built on it talk to that member. The caller needs the
// clusters/proxy permission in Karmada.
func ClusterProxyConfig(karmada *rest.Config, cluster string) *rest.Config {
	cfg := rest.CopyConfig(karmada)
	cfg.Host = strings.TrimRight(karmada.Host, "/") + fmt.Sprintf(clusterProxyPathFormat, url.PathEscape(cluster))
	return cfg
}

// NewProxyPodSource returns a PodSource that reaches every member cluster
// through the Karmada cluster proxy, with the credentials of karmada.
func NewProxyPodSource(karmada *rest.Config) *ClientPodSource {
	s := NewClientPodSource(nil)
	s.clientFor = func(cluster string) (kubernetes.Interface, error) {
		cfg := ClusterProxyConfig(karmada, cluster)
		cfg.Wrap(s.clock(cluster).Wrap)
		return kubernetes.NewForConfig(cfg)
	}
	s.hint = proxyHint
	return s
}

// NewKubeconfigPodSource returns a PodSource that reaches each member cluster
// through a context of the kubeconfig raw. contextFor maps a cluster name to
// a context name (nil uses the cluster name itself); configure, when not nil,
// adjusts each rest config (rate limits, timeouts) before a client is built.
func NewKubeconfigPodSource(raw clientcmdapi.Config, contextFor func(cluster string) string, configure func(*rest.Config)) *ClientPodSource {
	if contextFor == nil {
		contextFor = func(cluster string) string { return cluster }
	}
	s := NewClientPodSource(nil)
	s.clientFor = func(cluster string) (kubernetes.Interface, error) {
		name := contextFor(cluster)
		if _, ok := raw.Contexts[name]; !ok {
			return nil, fmt.Errorf("no kubeconfig context %q for member cluster %s: add one or read members through the Karmada proxy", name, cluster)
		}
		cfg, err := clientcmd.NewNonInteractiveClientConfig(raw, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig context %q for member cluster %s is unusable, fix it in the kubeconfig: %w", name, cluster, err)
		}
		if configure != nil {
			configure(cfg)
		}
		cfg.Wrap(s.clock(cluster).Wrap)
		return kubernetes.NewForConfig(cfg)
	}
	s.hint = func(err error) string {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return "grant the identity of this cluster's kubeconfig context list on deployments, replicasets and pods"
		}
		return "check the kubeconfig context of this cluster"
	}
	return s
}

func (s *ClientPodSource) client(cluster string) (kubernetes.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[cluster]; ok {
		return c, nil
	}
	c, err := s.clientFor(cluster)
	if err != nil {
		return nil, err
	}
	s.clients[cluster] = c
	return c, nil
}

// proxyHint tells Karmada's refusals from the member's: the proxy forwards
// member requests impersonating the caller, so both can say Forbidden.
func proxyHint(err error) string {
	var status apierrors.APIStatus
	if apierrors.IsForbidden(err) && errors.As(err, &status) {
		if d := status.Status().Details; d != nil && d.Group == "cluster.karmada.io" {
			return "grant get on clusters/proxy in the Karmada apiserver, or read members through kubeconfig contexts with --estimator=kubeconfig"
		}
		return "the member cluster refused the identity Karmada forwards; grant it list on deployments, replicasets and pods there, see deploy/members/rbac.yaml"
	}
	return "check that the cluster is Ready in Karmada, or read members through kubeconfig contexts with --estimator=kubeconfig"
}

// activePodsSelector leaves out pods that will never run again; the original
// estimator's pod cache is filtered the same way.
const activePodsSelector = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// ListClusterObjects implements PodSource with three LIST calls per
// namespace (or three in total for all namespaces), paged.
func (s *ClientPodSource) ListClusterObjects(ctx context.Context, cluster string, namespaces []string) (*ClusterObjects, error) {
	c, err := s.client(cluster)
	if err != nil {
		return nil, err
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	objs := &ClusterObjects{}
	for _, ns := range namespaces {
		deployments, err := listAll[appsv1.Deployment](ctx, s.PageSize, metav1.ListOptions{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.AppsV1().Deployments(ns).List(ctx, o)
			})
		if err != nil {
			return nil, s.listError("deployments", cluster, ns, err)
		}
		replicaSets, err := listAll[appsv1.ReplicaSet](ctx, s.PageSize, metav1.ListOptions{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.AppsV1().ReplicaSets(ns).List(ctx, o)
			})
		if err != nil {
			return nil, s.listError("replicasets", cluster, ns, err)
		}
		pods, err := listAll[corev1.Pod](ctx, s.PageSize, metav1.ListOptions{FieldSelector: activePodsSelector},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.CoreV1().Pods(ns).List(ctx, o)
			})
		if err != nil {
			return nil, s.listError("pods", cluster, ns, err)
		}
		objs.Deployments = append(objs.Deployments, deployments...)
		objs.ReplicaSets = append(objs.ReplicaSets, replicaSets...)
		objs.Pods = append(objs.Pods, pods...)
	}
	if now, ok := s.clock(cluster).Now(); ok {
		objs.ServerTime = now
	}
	return objs, nil
}

func (s *ClientPodSource) listError(resource, cluster, namespace string, err error) error {
	where := "all namespaces"
	if namespace != metav1.NamespaceAll {
		where = "namespace " + namespace
	}
	msg := fmt.Sprintf("cannot list %s in %s of member cluster %s", resource, where, cluster)
	if s.hint != nil {
		msg += " (" + s.hint(err) + ")"
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// listAll pages through a LIST call and returns every item by value,
// without its managedFields: a pass never reads them, and they are often the
// largest part of an object. (An update without managedFields leaves the
// stored ones alone.)
func listAll[T any](ctx context.Context, pageSize int64, opts metav1.ListOptions,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error)) ([]T, error) {
	p := pager.New(list)
	p.PageSize = pageSize
	var items []T
	err := p.EachListItem(ctx, opts, func(obj runtime.Object) error {
		item, ok := any(obj).(*T)
		if !ok {
			return fmt.Errorf("unexpected list item %T", obj)
		}
		if m, ok := any(item).(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		items = append(items, *item)
		return nil
	})
	return items, err
}
