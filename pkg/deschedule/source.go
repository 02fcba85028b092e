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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/pager"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// PodSource reads the objects a pass needs from member clusters.
type PodSource interface {
	// ListClusterObjects lists the non-terminal Pods of the member cluster
	// named cluster, its copies of the workload kinds req names, and the
	// controllers between unschedulable pods and those workloads.
	ListClusterObjects(ctx context.Context, cluster string, req ListRequest) (*ClusterObjects, error)
}

// ListRequest says what a pass needs from one member cluster.
type ListRequest struct {
	// Namespaces limits the lists to these namespaces; empty means all.
	Namespaces []string
	// Workloads are the kinds of the resource templates counted there, with
	// the templates' versions.
	Workloads []schema.GroupVersionKind
}

// MemberClients are the clients of one member cluster.
type MemberClients struct {
	Kube kubernetes.Interface
	// Metadata lists kinds other than Deployments, ReplicaSets,
	// StatefulSets and Pods; nil when the source lists only those.
	Metadata metadata.Interface
	// Mapper finds the resources of kinds that are not built in; nil when
	// there is no discovery.
	Mapper meta.ResettableRESTMapper
}

// ClientPodSource is a PodSource over the clients of each member cluster.
// Clients are built on first use and reused for later passes.
type ClientPodSource struct {
	clientFor func(cluster string) (*MemberClients, error)
	// hint tells the user how to fix a listing error of this kind of source
	// in a member cluster.
	hint func(cluster string, err error) string
	// PageSize bounds each LIST response; 0 lists in one response.
	PageSize int64

	mu      sync.Mutex
	clients map[string]*MemberClients
	// clocks read each member's time from the Date of its answers; they
	// have a lock of their own, since clientFor asks for them under mu.
	clockMu sync.Mutex
	clocks  map[string]*rebalance.ServerClock
}

var _ PodSource = (*ClientPodSource)(nil)

// defaultPageSize keeps LIST responses of large member clusters bounded.
const defaultPageSize = 500

// NewClientPodSource returns a PodSource that asks clientFor for each member
// cluster's client; it lists Deployments, ReplicaSets, StatefulSets and Pods
// only. It suits tests (fake clientsets) and custom wiring.
func NewClientPodSource(clientFor func(cluster string) (kubernetes.Interface, error)) *ClientPodSource {
	return NewMemberPodSource(func(cluster string) (*MemberClients, error) {
		kube, err := clientFor(cluster)
		if err != nil {
			return nil, err
		}
		return &MemberClients{Kube: kube}, nil
	})
}

// NewMemberPodSource returns a PodSource that asks clientFor for the clients
// of each member cluster.
func NewMemberPodSource(clientFor func(cluster string) (*MemberClients, error)) *ClientPodSource {
	return &ClientPodSource{clientFor: clientFor, PageSize: defaultPageSize, clients: map[string]*MemberClients{}, clocks: map[string]*rebalance.ServerClock{}}
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

// NewMemberClients builds the clients of a member cluster from config. Its
// discovery is only read when a kind that is not built in must be listed,
// and then cached.
func NewMemberClients(config *rest.Config) (*MemberClients, error) {
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	return &MemberClients{Kube: kube, Metadata: meta,
		Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))}, nil
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
	s := NewMemberPodSource(nil)
	s.clientFor = func(cluster string) (*MemberClients, error) {
		cfg := ClusterProxyConfig(karmada, cluster)
		cfg.Wrap(s.clock(cluster).Wrap)
		return NewMemberClients(cfg)
	}
	s.hint = proxyHint
	return s
}

// NewPullAwareProxyPodSource is NewProxyPodSource for a control plane with
// Pull-mode members. The Karmada control plane usually cannot reach a Pull
// member's apiserver (karmada-agent connects out from the member; the
// cluster proxy needs apiserver-network-proxy), so a member for which isPull
// says true is read through the context named like it in members, as
// local-up-karmada's members.config has one per member, when there is such a
// context; every other member, and a Pull member without a context, through
// the proxy. configure adjusts the rest config of a context, as in
// NewKubeconfigPodSource.
func NewPullAwareProxyPodSource(karmada *rest.Config, isPull func(cluster string) (bool, error),
	members clientcmdapi.Config, configure func(*rest.Config)) *ClientPodSource {
	s := NewProxyPodSource(karmada)
	s.clientFor = func(cluster string) (*MemberClients, error) {
		cfg := ClusterProxyConfig(karmada, cluster)
		pull, err := pullWithContext(cluster, members, isPull)
		if err != nil {
			return nil, err
		}
		if pull {
			if cfg, err = clientcmd.NewNonInteractiveClientConfig(members, cluster, &clientcmd.ConfigOverrides{}, nil).ClientConfig(); err != nil {
				return nil, fmt.Errorf("kubeconfig context %q for Pull member cluster %s is unusable, fix it in the kubeconfig: %w", cluster, cluster, err)
			}
			if configure != nil {
				configure(cfg)
			}
		}
		cfg.Wrap(s.clock(cluster).Wrap)
		return NewMemberClients(cfg)
	}
	return s
}

// pullWithContext reports whether cluster is a Pull member that members has
// a context for. The Cluster is read only when there is such a context, so
// that a kubeconfig without member contexts costs no request; an identity
// that may not read Clusters (the least-privilege role does not need to)
// reads every member through the proxy, as before Pull members were known.
func pullWithContext(cluster string, members clientcmdapi.Config, isPull func(cluster string) (bool, error)) (bool, error) {
	if _, ok := members.Contexts[cluster]; !ok {
		return false, nil
	}
	pull, err := isPull(cluster)
	switch {
	case apierrors.IsForbidden(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("cannot tell whether member cluster %s is in Pull mode: %w", cluster, err)
	}
	return pull, nil
}

// NewKubeconfigPodSource returns a PodSource that reaches each member cluster
// through a context of the kubeconfig raw. contextFor maps a cluster name to
// a context name (nil uses the cluster name itself); configure, when not nil,
// adjusts each rest config (rate limits, timeouts) before a client is built.
func NewKubeconfigPodSource(raw clientcmdapi.Config, contextFor func(cluster string) string, configure func(*rest.Config)) *ClientPodSource {
	if contextFor == nil {
		contextFor = func(cluster string) string { return cluster }
	}
	s := NewMemberPodSource(nil)
	s.clientFor = func(cluster string) (*MemberClients, error) {
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
		return NewMemberClients(cfg)
	}
	s.hint = func(_ string, err error) string {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return "grant the identity of this cluster's kubeconfig context list on pods and on the workload kinds (deployments, replicasets, statefulsets, jobs, custom kinds), see deploy/members/rbac.yaml"
		}
		return "check the kubeconfig context of this cluster"
	}
	return s
}

func (s *ClientPodSource) client(cluster string) (*MemberClients, error) {
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
func proxyHint(cluster string, err error) string {
	var status apierrors.APIStatus
	if apierrors.IsForbidden(err) && errors.As(err, &status) {
		if d := status.Status().Details; d != nil && d.Group == "cluster.karmada.io" {
			return "grant get on clusters/proxy in the Karmada apiserver, or read members through kubeconfig contexts with --estimator=kubeconfig"
		}
		return "the member cluster refused the identity Karmada forwards; grant it list on pods and on the workload kinds there, see deploy/members/rbac.yaml"
	}
	// The usual cause besides a cluster that is down: a Pull-mode member,
	// registered by karmada-agent, whose apiserver the Karmada control plane
	// cannot reach (local-up-karmada's member3). Its Cluster is not read
	// here (a kubeconfig without member contexts costs no request), so the
	// hint says what fixes it if it is one.
	return "check that the cluster is Ready in Karmada; a Pull-mode cluster is usually not reachable through the proxy: " +
		"if " + cluster + " is one, give a kubeconfig with a context named " + cluster +
		", through which it is read (--member-kubeconfig FILE, e.g. local-up-karmada's members.config)"
}

// activePodsSelector leaves out pods that will never run again; the original
// estimator's pod cache is filtered the same way.
const activePodsSelector = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// ListClusterObjects implements PodSource with paged LIST calls, per
// namespace (or once for all namespaces): the active Pods, the workload
// kinds of req, and then, kind by kind, the controllers that unschedulable
// pods lead to, until every chain ends. Pods that cannot be listed fail the
// cluster; any other kind that cannot be listed is recorded in KindErrors.
func (s *ClientPodSource) ListClusterObjects(ctx context.Context, cluster string, req ListRequest) (*ClusterObjects, error) {
	c, err := s.client(cluster)
	if err != nil {
		return nil, err
	}
	namespaces := req.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	objs := &ClusterObjects{KindErrors: map[schema.GroupKind]error{}}
	for _, ns := range namespaces {
		pods, err := listAll[corev1.Pod](ctx, s.PageSize, metav1.ListOptions{FieldSelector: activePodsSelector},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.Kube.CoreV1().Pods(ns).List(ctx, o)
			})
		if err != nil {
			return nil, s.listError("pods", cluster, ns, err)
		}
		objs.Pods = append(objs.Pods, pods...)
	}
	listed := map[schema.GroupKind]bool{podKind: true}
	follow := ownerKindsToFollow(req.Workloads)
	pending := req.Workloads
	for range maxOwnerDepth {
		if len(pending) == 0 {
			break
		}
		for _, gvk := range pending {
			if listed[gvk.GroupKind()] {
				continue
			}
			listed[gvk.GroupKind()] = true
			s.listKind(ctx, c, cluster, namespaces, gvk, objs)
		}
		pending = objs.missingOwnerKinds(listed, follow)
	}
	if now, ok := s.clock(cluster).Now(); ok {
		objs.ServerTime = now
	}
	return objs, nil
}

// ownerKindsToFollow is the set of owner kinds worth listing for workloads
// of the given kinds, nil for any: when every workload kind is built in, its
// pods are only ever reached through the kinds of knownChains.
func ownerKindsToFollow(workloads []schema.GroupVersionKind) map[schema.GroupKind]bool {
	follow := map[schema.GroupKind]bool{}
	for _, gvk := range workloads {
		chain, ok := knownChains[gvk.GroupKind()]
		if !ok {
			return nil
		}
		for _, gk := range chain {
			follow[gk] = true
		}
	}
	return follow
}

// missingOwnerKinds returns the kinds, not listed yet, of the controllers
// that unschedulable pods lead to through the objects listed so far; follow,
// when not nil, limits them.
func (objs *ClusterObjects) missingOwnerKinds(listed, follow map[schema.GroupKind]bool) []schema.GroupVersionKind {
	owners := map[types.UID]*metav1.OwnerReference{}
	note := func(uid types.UID, o metav1.Object) {
		if uid != "" {
			owners[uid] = metav1.GetControllerOfNoCopy(o)
		}
	}
	for i := range objs.Deployments {
		note(objs.Deployments[i].UID, &objs.Deployments[i])
	}
	for i := range objs.ReplicaSets {
		note(objs.ReplicaSets[i].UID, &objs.ReplicaSets[i])
	}
	for i := range objs.StatefulSets {
		note(objs.StatefulSets[i].UID, &objs.StatefulSets[i])
	}
	for i := range objs.Others {
		note(objs.Others[i].UID, &objs.Others[i])
	}
	var missing []schema.GroupVersionKind
	seen := map[schema.GroupKind]bool{}
	for i := range objs.Pods {
		pod := &objs.Pods[i]
		if !isUnschedulableNow(pod) {
			continue
		}
		ref := metav1.GetControllerOfNoCopy(pod)
		for depth := 0; ref != nil && depth < maxOwnerDepth; depth++ {
			next, ok := owners[ref.UID]
			if ok {
				ref = next
				continue
			}
			gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
			gk := gvk.GroupKind()
			if !listed[gk] && !seen[gk] && (follow == nil || follow[gk]) {
				seen[gk] = true
				missing = append(missing, gvk)
			}
			break
		}
	}
	return missing
}

// listKind lists one kind into objs: whole objects for the kinds whose
// revisions matter, metadata for the others. Cluster-scoped kinds are left
// out: they cannot be the copy of a namespaced template.
func (s *ClientPodSource) listKind(ctx context.Context, c *MemberClients, cluster string, namespaces []string, gvk schema.GroupVersionKind, objs *ClusterObjects) {
	gk := gvk.GroupKind()
	fail := func(resource, ns string, err error) {
		objs.KindErrors[gk] = s.listError(resource, cluster, ns, err)
	}
	for _, ns := range namespaces {
		switch gk {
		case deploymentKind:
			items, err := listAll[appsv1.Deployment](ctx, s.PageSize, metav1.ListOptions{},
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return c.Kube.AppsV1().Deployments(ns).List(ctx, o)
				})
			if err != nil {
				fail("deployments", ns, err)
				return
			}
			objs.Deployments = append(objs.Deployments, items...)
		case replicaSetKind:
			items, err := listAll[appsv1.ReplicaSet](ctx, s.PageSize, metav1.ListOptions{},
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return c.Kube.AppsV1().ReplicaSets(ns).List(ctx, o)
				})
			if err != nil {
				fail("replicasets", ns, err)
				return
			}
			objs.ReplicaSets = append(objs.ReplicaSets, items...)
		case statefulSetKind:
			items, err := listAll[appsv1.StatefulSet](ctx, s.PageSize, metav1.ListOptions{},
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return c.Kube.AppsV1().StatefulSets(ns).List(ctx, o)
				})
			if err != nil {
				fail("statefulsets", ns, err)
				return
			}
			objs.StatefulSets = append(objs.StatefulSets, items...)
		default:
			mapping, err := s.mapKind(c, gvk)
			if err != nil {
				objs.KindErrors[gk] = fmt.Errorf("cannot find the resource of kind %s in member cluster %s: %w", kindWords(gk), cluster, err)
				return
			}
			if !mapping.namespaced {
				return
			}
			if c.Metadata == nil {
				objs.KindErrors[gk] = fmt.Errorf("no metadata client to list %s in member cluster %s", mapping.gvr.GroupResource(), cluster)
				return
			}
			resource := c.Metadata.Resource(mapping.gvr).Namespace(ns)
			items, err := listAll[metav1.PartialObjectMetadata](ctx, s.PageSize, metav1.ListOptions{},
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return resource.List(ctx, o) })
			if err != nil {
				fail(mapping.gvr.GroupResource().String(), ns, err)
				return
			}
			apiVersion := mapping.gvr.GroupVersion().String()
			for i := range items {
				items[i].APIVersion, items[i].Kind = apiVersion, gvk.Kind
			}
			objs.Others = append(objs.Others, items...)
		}
	}
}

// mapKind maps gvk through the member's discovery, read again once when the
// kind is unknown (a CRD installed since the cache was filled).
func (s *ClientPodSource) mapKind(c *MemberClients, gvk schema.GroupVersionKind) (resourceMapping, error) {
	var mapper meta.RESTMapper
	if c.Mapper != nil {
		mapper = c.Mapper
	}
	m, err := mapKind(mapper, gvk)
	if err != nil && c.Mapper != nil && meta.IsNoMatchError(err) {
		c.Mapper.Reset()
		m, err = mapKind(mapper, gvk)
	}
	return m, err
}

func (s *ClientPodSource) listError(resource, cluster, namespace string, err error) error {
	where := "all namespaces"
	if namespace != metav1.NamespaceAll {
		where = "namespace " + namespace
	}
	msg := fmt.Sprintf("cannot list %s in %s of member cluster %s", resource, where, cluster)
	if s.hint != nil {
		msg += " (" + s.hint(cluster, err) + ")"
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
