package cmd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/estimate"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
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
// every client of the session.
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

// contextName names the kubeconfig context in use, for messages.
func (o *session) contextName() string { return contextName(o.ConfigFlags) }

// contextName names the kubeconfig context cf uses, for messages.
func contextName(cf *genericclioptions.ConfigFlags) string {
	if name := *cf.Context; name != "" {
		return name
	}
	raw, err := cf.ToRawKubeConfigLoader().RawConfig()
	if err != nil || raw.CurrentContext == "" {
		return "<none>"
	}
	return raw.CurrentContext
}

// serverURL names the API server in use, for messages.
func (o *session) serverURL() string {
	config, err := o.ConfigFlags.ToRESTConfig()
	if err != nil || config.Host == "" {
		return "unknown server"
	}
	return config.Host
}

// engine builds the run's engine: a Karmada client whose answers feed the
// server clock, and the command's way of explaining errors.
func (o *session) engine(mapper meta.RESTMapper) (*run.Engine, error) {
	config, err := o.factory.ToRESTConfig()
	if err != nil {
		return nil, withExitCode(ExitError, o.kubeconfigError(err))
	}
	client, clock, err := run.NewClockedClient(config)
	if err != nil {
		return nil, withExitCode(ExitError, o.kubeconfigError(err))
	}
	return &run.Engine{
		Karmada:        client,
		Clock:          clock,
		Failures:       o.failureEvents(),
		Explain:        o.apiError,
		ExplainMissing: o.explainMissingBinding(mapper),
		Release:        o.karmadaRelease,
		// Read when called: the error catalogue replaces deadlineContext.
		WithDeadline: func(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
			return deadlineContext(ctx, d)
		},
	}, nil
}

// failureEvents reads the scheduler's failure events from the Karmada
// apiserver. Without it (no client could be made), a binding that was failing
// before its trigger is only reported when the run ends.
func (o *session) failureEvents() rebalance.FailureEvents {
	kube, err := o.factory.KubernetesClientSet()
	if err != nil {
		return nil
	}
	return rebalance.NewFailureEvents(kube)
}

// checkRebalancerServed makes sure the control plane serves
// WorkloadRebalancers before a recorded run.
func (o *session) checkRebalancerServed(ctx context.Context, mapper meta.RESTMapper) error {
	checkCtx, cancel := deadlineContext(ctx, o.deadline)
	defer cancel()
	err := o.mapKind(checkCtx, mapper, rebalance.RebalancerGroupKind, appsv1alpha1.GroupVersion.Version)
	switch {
	case err == nil:
		return nil
	case meta.IsNoMatchError(err):
		return withExitCode(ExitError, o.rebalancerNotServed())
	}
	return o.startupError(ctx, checkCtx, withExitCode(ExitError, o.apiError(err)))
}

// quietenClientLogs keeps client-go's internal logging off the terminal
// unless -v asks for it (setupClientLogs). Warnings the API server sends with
// its answers still go to stderr, as in kubectl.
func (o *session) quietenClientLogs() {
	setupClientLogs(o.ErrOut)
	rest.SetDefaultWarningHandler(rest.NewWarningWriter(o.ErrOut, rest.WarningWriterOptions{Deduplicate: true}))
}

// predictSource is where predict reads the bindings and clusters from.
func (o *session) predictSource(mode predict.EstimatorMode) (predict.Source, error) {
	config, err := o.factory.ToRESTConfig()
	if err != nil {
		return predict.Source{}, withExitCode(ExitError, o.kubeconfigError(err))
	}
	client, err := karmadaclient.NewForConfig(config)
	if err != nil {
		return predict.Source{}, withExitCode(ExitError, o.kubeconfigError(err))
	}
	source := predict.Source{Karmada: client, Work: client.WorkV1alpha2().RESTClient(), Estimator: mode}
	if mode != predict.EstimatorDisabled {
		members, err := o.memberReader()
		if err != nil {
			return predict.Source{}, withExitCode(ExitError, o.kubeconfigError(err))
		}
		source.Members = members
	}
	if mode == predict.EstimatorAuto {
		if source.Kube, err = o.factory.KubernetesClientSet(); err != nil {
			return predict.Source{}, withExitCode(ExitError, o.kubeconfigError(err))
		}
		if source.Host, err = o.hostClient(o.HostContext != defaultHostContext); err != nil {
			return predict.Source{}, withExitCode(ExitError, err)
		}
	}
	return source, nil
}

// hasOvercommitGate reports whether karmada-scheduler's release may have the
// SchedulingOvercommitProtection feature gate (v1.18 and newer).
func (o *session) hasOvercommitGate() bool {
	info, err := o.karmadaRelease()
	gate := info.SchedulerRemembersRecentPlacements()
	return err != nil || !gate.Known || gate.Yes
}

// memberReader reads the members' nodes and pods through the Karmada
// cluster proxy and the member contexts.
func (o *session) memberReader() (*estimate.Reader, error) {
	config, err := o.factory.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	contexts, err := o.memberContexts()
	if err != nil {
		return nil, err
	}
	return &estimate.Reader{Karmada: config, Kubeconfig: contexts, KubeconfigFlag: "--" + memberKubeconfigFlag, Configure: func(c *rest.Config) { o.clientConfig(c) }}, nil
}

// memberContexts is the kubeconfig whose contexts name the members.
func (o *session) memberContexts() (*clientcmdapi.Config, error) {
	if o.MemberKubeconfig == "" {
		raw, err := o.factory.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, err
		}
		return &raw, nil
	}
	raw, err := clientcmd.LoadFromFile(o.MemberKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read --%s %s: %w", memberKubeconfigFlag, o.MemberKubeconfig, err)
	}
	return raw, nil
}

// hostClient is a client of the host cluster for auto detection: nil when
// detection is not asked for, or when the kubeconfig has no context named
// by the default --host-context. A --host-context given but missing is an
// error.
func (o *session) hostClient(explicit bool) (kubernetes.Interface, error) {
	if predict.EstimatorMode(o.Estimator) != predict.EstimatorAuto || o.HostContext == "" {
		return nil, nil
	}
	raw, err := o.factory.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, err
	}
	if _, ok := raw.Contexts[o.HostContext]; !ok {
		if explicit {
			return nil, fmt.Errorf("--%s %q: no such context in the kubeconfig; name the context of the cluster that runs karmada-scheduler, or say --scheduler-estimator=enabled or disabled", hostContextFlag, o.HostContext)
		}
		return nil, nil
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(raw, o.HostContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %w", hostContextFlag, o.HostContext, err)
	}
	o.clientConfig(cfg)
	return kubernetes.NewForConfig(cfg)
}
