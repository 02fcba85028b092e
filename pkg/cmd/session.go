package cmd

import (
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
)

// session is what a command holds of the Karmada apiserver it talks to,
// built once per command as kubectl's cmdutil.Factory holds a server's
// clients: the clients (with the rate limits, Ctrl-C and the deadline),
// the request guard, the Karmada release detected once, how
// karmada-scheduler sizes the members (the estimators), and the messages
// that name that server. What a command works on (its targets) is not
// here: targetOptions resolve them through a session.
type session struct {
	ConfigFlags *genericclioptions.ConfigFlags
	Timeout     time.Duration
	QPS         float32
	Burst       int

	factory cmdutil.Factory
	// guard ties the start-up requests to Ctrl-C and --timeout, and
	// remembers the last failed request for messages.
	guard *requestGuard
	// deadline is when --timeout runs out, counted from the start of Run.
	deadline time.Time
	// estimatorOptions say how karmada-scheduler sizes the members, for
	// the predictions that select targets (--clusters, --changed-only)
	// and those of make-before-break moves.
	estimatorOptions

	// The Karmada release, detected once when a behaviour depends on it.
	releaseOnce sync.Once
	release     karmadaversion.Info
	releaseErr  error

	genericiooptions.IOStreams
}

// newSession returns a session with the flags' defaults, whose clients obey
// QPS and Burst, Ctrl-C and the deadline.
func newSession(streams genericiooptions.IOStreams) *session {
	s := &session{
		ConfigFlags: genericclioptions.NewConfigFlags(true).WithDiscoveryBurst(discoveryBurst).WithDiscoveryQPS(discoveryQPS),
		Timeout:     defaultTimeout,
		QPS:         defaultQPS,
		Burst:       defaultBurst,
		IOStreams:   streams,
		guard:       &requestGuard{},
	}
	s.ConfigFlags.WrapConfigFn = s.clientConfig
	return s
}

// newSessionForConfig returns a session of the server of config, a client
// config already built from kubeconfig (the failback daemon's, at
// start-up), with clients of its own: its own request guard, rate limits
// and discovery, so that one failback's deadline and last failed request
// are not another's. kubeconfig names the context and the member contexts;
// it is read, never changed.
func newSessionForConfig(streams genericiooptions.IOStreams, kubeconfig *genericclioptions.ConfigFlags, config *rest.Config) *session {
	s := newSession(streams)
	s.ConfigFlags = kubeconfig
	s.factory = cmdutil.NewFactory(cmdutil.NewMatchVersionFlags(newBuiltConfig(config, kubeconfig.ToRawKubeConfigLoader(), s.clientConfig)))
	return s
}

// Discovery reads many groups at start-up: it gets a wider rate limit
// than the requests that follow (as kubectl's own).
const (
	discoveryQPS   = 50
	discoveryBurst = 300
)

// clientConfig applies the rate limits and the request guard to c, for
// every client of these targets.
func (o *session) clientConfig(c *rest.Config) *rest.Config {
	c.QPS, c.Burst = o.QPS, o.Burst
	return o.guard.wrapConfig(c)
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
