package cmd

import (
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// targetOptions name the workloads a command works on, as kubectl get does
// (TYPE/NAME, TYPE NAME..., -l, --all, -f), and reach the Karmada apiserver
// they live on: resolving them into targets (startup), predicting their
// placements, and the clients and error messages of that server. kubectl
// rebalance, plan and the failback daemon each fill one and call it; none
// of them needs another's options for it.
type targetOptions struct {
	ConfigFlags *genericclioptions.ConfigFlags
	resource.FilenameOptions

	LabelSelector string
	AllNamespaces bool
	All           bool
	Timeout       time.Duration
	QPS           float32
	Burst         int

	Args             []string
	Namespace        string
	EnforceNamespace bool
	factory          cmdutil.Factory
	// skip, when set, leaves out a workload read from the server by its
	// annotations (the failback daemon's opt-out), before anything else
	// looks at it.
	skip func(annotations map[string]string) bool
	// guard ties the start-up requests to Ctrl-C and --timeout, and
	// remembers the last failed request for messages.
	guard *requestGuard
	// mapped, when set, is called by startup once the API's types are
	// mapped, before the workloads are resolved.
	mapped func(meta.RESTMapper)
	// ahead is what plan reads while the workloads are resolved; nil
	// where their scope is not known before.
	ahead *readAhead
	// deadline is when --timeout runs out, counted from the start of Run.
	deadline time.Time
	// stdin is what -f - read from standard input, once, before the
	// API server was asked anything.
	stdin []byte
	// workloads, when not nil, are the workloads to resolve instead of
	// arguments or files: a caller that holds them as values (a failback
	// resuming what its record planned) gives them as they are.
	workloads []rebalance.Workload
	// estimatorOptions say how karmada-scheduler sizes the members, for
	// the predictions that select targets (--clusters, --changed-only).
	estimatorOptions

	// The Karmada release, detected once when a behaviour depends on it.
	releaseOnce sync.Once
	release     karmadaversion.Info
	releaseErr  error

	genericiooptions.IOStreams
}

// newTargetOptions returns target options with the flags' defaults, whose
// clients obey QPS and Burst, Ctrl-C and the deadline.
func newTargetOptions(streams genericiooptions.IOStreams) *targetOptions {
	t := &targetOptions{
		ConfigFlags: genericclioptions.NewConfigFlags(true).WithDiscoveryBurst(discoveryBurst).WithDiscoveryQPS(discoveryQPS),
		Timeout:     defaultTimeout,
		QPS:         defaultQPS,
		Burst:       defaultBurst,
		IOStreams:   streams,
		guard:       &requestGuard{},
	}
	t.ConfigFlags.WrapConfigFn = t.clientConfig
	return t
}

// Discovery reads many groups at start-up: it gets a wider rate limit
// than the requests that follow (as kubectl's own).
const (
	discoveryQPS   = 50
	discoveryBurst = 300
)

// clientConfig applies the rate limits and the request guard to c, for
// every client of these targets.
func (o *targetOptions) clientConfig(c *rest.Config) *rest.Config {
	c.QPS, c.Burst = o.QPS, o.Burst
	return o.guard.wrapConfig(c)
}

// newTargetOptionsForConfig returns target options that reach the server
// of config, a client config already built from kubeconfig (the failback
// daemon's, at start-up), with clients of their own: their own request
// guard, rate limits and discovery, so that one failback's deadline and
// last failed request are not another's. kubeconfig names the context and
// the member contexts; it is read, never changed. workloads, when not nil,
// are resolved instead of arguments or files (see targetOptions.workloads).
func newTargetOptionsForConfig(streams genericiooptions.IOStreams, kubeconfig *genericclioptions.ConfigFlags, config *rest.Config, workloads []rebalance.Workload) *targetOptions {
	t := newTargetOptions(streams)
	t.ConfigFlags = kubeconfig
	t.factory = cmdutil.NewFactory(cmdutil.NewMatchVersionFlags(newBuiltConfig(config, kubeconfig.ToRawKubeConfigLoader(), t.clientConfig)))
	t.workloads = workloads
	return t
}

// builtConfig is a RESTClientGetter over a client config built once, as
// ConfigFlags is over the kubeconfig flags. Its discovery is cached in
// memory for its own life, not on disk: a daemon's failbacks are far
// apart, and each should see the types the server serves then.
type builtConfig struct {
	config    *rest.Config
	loader    clientcmd.ClientConfig
	wrap      func(*rest.Config) *rest.Config
	discovery func() (discovery.CachedDiscoveryInterface, error)
	mapper    func() (meta.RESTMapper, error)
}

func newBuiltConfig(config *rest.Config, loader clientcmd.ClientConfig, wrap func(*rest.Config) *rest.Config) *builtConfig {
	b := &builtConfig{config: config, loader: loader, wrap: wrap}
	b.discovery = sync.OnceValues(func() (discovery.CachedDiscoveryInterface, error) {
		c, err := b.ToRESTConfig()
		if err != nil {
			return nil, err
		}
		c.QPS, c.Burst = discoveryQPS, discoveryBurst
		client, err := discovery.NewDiscoveryClientForConfig(c)
		if err != nil {
			return nil, err
		}
		return memory.NewMemCacheClient(client), nil
	})
	b.mapper = sync.OnceValues(func() (meta.RESTMapper, error) {
		client, err := b.discovery()
		if err != nil {
			return nil, err
		}
		return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(client), client, nil), nil
	})
	return b
}

// ToRESTConfig returns a copy of the config, with the clients' settings:
// its callers change what they get.
func (b *builtConfig) ToRESTConfig() (*rest.Config, error) {
	if b.config == nil {
		return nil, errors.New("no client config was built")
	}
	return b.wrap(rest.CopyConfig(b.config)), nil
}

func (b *builtConfig) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return b.discovery()
}

func (b *builtConfig) ToRESTMapper() (meta.RESTMapper, error) { return b.mapper() }

func (b *builtConfig) ToRawKubeConfigLoader() clientcmd.ClientConfig { return b.loader }

// skips reports whether info is a workload skip leaves out. Only objects
// read from the server have annotations to look at, and a
// WorkloadRebalancer is never left out.
func (o *targetOptions) skips(info *resource.Info) bool {
	if o.skip == nil || info.Object == nil || info.Source != "" {
		return false
	}
	if info.Mapping != nil && info.Mapping.GroupVersionKind.GroupKind() == rebalance.RebalancerGroupKind {
		return false
	}
	m, err := meta.Accessor(info.Object)
	return err == nil && o.skip(m.GetAnnotations())
}
