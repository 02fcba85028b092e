package estimate

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Reader reads the nodes and pods of member clusters, to build each one's
// Member. A Push member is read through the Karmada cluster proxy, which
// cannot reach a Pull member (karmada-agent connects out; the proxy needs
// apiserver-network-proxy for it): a Pull member is read through a
// kubeconfig context named like it, as local-up-karmada's members.config
// has one per member. A Push member whose proxy refuses is read through its
// context when there is one.
type Reader struct {
	// Karmada is the Karmada apiserver's config, whose cluster proxy reaches
	// Push members; nil reads every member through Kubeconfig.
	Karmada *rest.Config
	// Kubeconfig holds a context per member, named like the member; nil
	// when there is none.
	Kubeconfig *clientcmdapi.Config
	// KubeconfigFlag is the flag that names another kubeconfig, for the
	// messages ("--member-kubeconfig").
	KubeconfigFlag string
	// Configure, when set, adjusts the config of a kubeconfig context (rate
	// limits, request counting) before its client is built; the proxy's
	// config is Karmada's and has them already.
	Configure func(*rest.Config)
	// PageSize bounds each LIST; 0 means 500.
	PageSize int64
}

// Unreadable says why a member's nodes and pods could not be read and what
// would fix it.
type Unreadable struct {
	Cluster string
	Err     error
	// Fix names the flag or the kubeconfig context that would make the
	// member readable.
	Fix string
}

func (u *Unreadable) Error() string {
	return fmt.Sprintf("cannot read the nodes and pods of member cluster %s: %v; %s", u.Cluster, u.Err, u.Fix)
}

func (u *Unreadable) Unwrap() error { return u.Err }

// Read builds the Member of each cluster, side by side. A cluster it
// cannot read is returned as an *Unreadable error, by name.
func (r Reader) Read(ctx context.Context, clusters []*clusterv1alpha1.Cluster) (map[string]*Member, map[string]error) {
	members := map[string]*Member{}
	failed := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := r.readOne(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[c.Name] = err
				return
			}
			members[c.Name] = m
		}()
	}
	wg.Wait()
	return members, failed
}

// readOne reads one member, through the proxy for a Push member and through
// its kubeconfig context otherwise or when the proxy fails.
func (r Reader) readOne(ctx context.Context, c *clusterv1alpha1.Cluster) (*Member, error) {
	_, hasContext := r.contextFor(c.Name)
	var proxyErr error
	if c.Spec.SyncMode != clusterv1alpha1.Pull && r.Karmada != nil {
		m, err := r.read(ctx, ProxyConfig(r.Karmada, c.Name))
		if err == nil || ctx.Err() != nil || !hasContext {
			return m, r.unreadable(c, err, proxyFix(err))
		}
		proxyErr = err
	}
	if !hasContext {
		return nil, r.unreadable(c, errors.New("no kubeconfig context named "+c.Name), r.contextFix(c))
	}
	cfg, err := r.contextConfig(c.Name)
	if err != nil {
		return nil, r.unreadable(c, err, "fix the context "+c.Name+" in the kubeconfig")
	}
	if r.Configure != nil {
		r.Configure(cfg)
	}
	m, err := r.read(ctx, cfg)
	if err != nil && proxyErr != nil {
		err = fmt.Errorf("through the Karmada cluster proxy: %v; through the kubeconfig context %s: %w", proxyErr, c.Name, err)
	}
	return m, r.unreadable(c, err, "grant the identity of the kubeconfig context "+c.Name+" list on nodes and pods in that cluster")
}

func (r Reader) unreadable(c *clusterv1alpha1.Cluster, err error, fix string) error {
	if err == nil {
		return nil
	}
	return &Unreadable{Cluster: c.Name, Err: err, Fix: fix}
}

// contextFix tells how to make a member without a kubeconfig context
// readable.
func (r Reader) contextFix(c *clusterv1alpha1.Cluster) string {
	flag := r.KubeconfigFlag
	if flag == "" {
		flag = "--member-kubeconfig"
	}
	if c.Spec.SyncMode == clusterv1alpha1.Pull {
		return fmt.Sprintf("%s is a Pull cluster, which the Karmada cluster proxy does not reach: give a kubeconfig with a context named %s (%s FILE, e.g. local-up-karmada's members.config)", c.Name, c.Name, flag)
	}
	return fmt.Sprintf("give a kubeconfig with a context named %s (%s FILE)", c.Name, flag)
}

// proxyFix tells Karmada's refusals from the member's: the proxy forwards
// the request impersonating the caller.
func proxyFix(err error) string {
	var status apierrors.APIStatus
	if apierrors.IsForbidden(err) && errors.As(err, &status) {
		if d := status.Status().Details; d != nil && d.Group == "cluster.karmada.io" {
			return "grant get on clusters/proxy in the Karmada apiserver, or give a kubeconfig with a context named like the cluster (--member-kubeconfig FILE)"
		}
		return "grant the identity Karmada forwards list on nodes and pods in the member cluster, or give a kubeconfig with a context named like the cluster (--member-kubeconfig FILE)"
	}
	return "check that the cluster is Ready in Karmada, or give a kubeconfig with a context named like the cluster (--member-kubeconfig FILE)"
}

func (r Reader) contextFor(cluster string) (string, bool) {
	if r.Kubeconfig == nil {
		return "", false
	}
	_, ok := r.Kubeconfig.Contexts[cluster]
	return cluster, ok
}

func (r Reader) contextConfig(name string) (*rest.Config, error) {
	return clientcmd.NewNonInteractiveClientConfig(*r.Kubeconfig, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
}

// proxyPathFormat is the aggregated-apiserver path that forwards requests
// to a member cluster's API server.
const proxyPathFormat = "/apis/cluster.karmada.io/v1alpha1/clusters/%s/proxy"

// ProxyConfig returns a copy of the Karmada apiserver's config that talks
// to the member cluster named cluster through the Karmada cluster proxy.
func ProxyConfig(karmada *rest.Config, cluster string) *rest.Config {
	cfg := rest.CopyConfig(karmada)
	cfg.Host = strings.TrimRight(karmada.Host, "/") + fmt.Sprintf(proxyPathFormat, url.PathEscape(cluster))
	return cfg
}

// activePods leaves out the pods that will never run again, as the
// estimator's pod informer does.
const activePods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// read lists a member's nodes and its active pods, in pages, as protobuf,
// and keeps of each pod what the estimator counts.
func (r Reader) read(ctx context.Context, cfg *rest.Config) (*Member, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	page := r.PageSize
	if page <= 0 {
		page = 500
	}
	var nodes []*corev1.Node
	opts := metav1.ListOptions{Limit: page}
	for {
		list, err := kube.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		for i := range list.Items {
			n := &list.Items[i]
			n.ManagedFields, n.Annotations, n.Status.Images = nil, nil, nil
			nodes = append(nodes, n)
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	var pods []*corev1.Pod
	// Pods that count alike (same node, phase and resources) share one
	// object: the estimator's snapshot only sums what they request and
	// counts them, and a member's pods are mostly a few shapes repeated.
	// At 10,000 workloads of 3 replicas, 30,000 slim pods of their own held
	// about 100 MiB.
	shared := map[string]*corev1.Pod{}
	opts = metav1.ListOptions{Limit: page, FieldSelector: activePods}
	for {
		list, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
		for i := range list.Items {
			slim := slimPod(&list.Items[i])
			key := countingKey(slim)
			if p, ok := shared[key]; ok {
				slim = p
			} else {
				shared[key] = slim
			}
			pods = append(pods, slim)
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	return NewMember(nodes, pods)
}

// countingKey tells apart slim pods the estimator counts differently: their
// node, phase, overhead and pod-level and containers' resources. Pods with
// affinity terms never share (slimPod drops affinity; the key keeps them
// apart anyway by their name, should that change).
func countingKey(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%v|%v", p.Spec.NodeName, p.Status.Phase, p.Spec.Overhead, p.Spec.Resources)
	if p.DeletionTimestamp != nil {
		b.WriteString("|terminating")
	}
	if p.Spec.Affinity != nil {
		fmt.Fprintf(&b, "|%s/%s", p.Namespace, p.Name)
	}
	for _, c := range p.Spec.InitContainers {
		fmt.Fprintf(&b, "|i%v%v", c.Resources, c.RestartPolicy)
	}
	for _, c := range p.Spec.Containers {
		fmt.Fprintf(&b, "|c%v", c.Resources)
	}
	return b.String()
}

// slimPod keeps what a node's requested resources are computed from: the
// node, the containers' and init containers' resources and restart
// policies, the overhead, the phase; and whether the pod is being deleted
// (Member.Departed).
func slimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, DeletionTimestamp: p.DeletionTimestamp},
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName, Overhead: p.Spec.Overhead, Resources: p.Spec.Resources},
		Status:     corev1.PodStatus{Phase: p.Status.Phase},
	}
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Resources: c.Resources})
	}
	for _, c := range p.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy})
	}
	return out
}
