package cmd

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/rest"
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
		ConfigFlags: genericclioptions.NewConfigFlags(true).WithDiscoveryBurst(300).WithDiscoveryQPS(50),
		Timeout:     defaultTimeout,
		QPS:         defaultQPS,
		Burst:       defaultBurst,
		IOStreams:   streams,
		guard:       &requestGuard{},
	}
	t.ConfigFlags.WrapConfigFn = func(c *rest.Config) *rest.Config {
		c.QPS, c.Burst = t.QPS, t.Burst
		return t.guard.wrapConfig(c)
	}
	return t
}

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
