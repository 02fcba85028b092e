package cmd

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/rest"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// targetOptions name the workloads a command works on, as kubectl get does
// (TYPE/NAME, TYPE NAME..., -l, --all, -f), and resolve them into targets
// (startup) through the session of the Karmada apiserver they live on.
// kubectl rebalance, plan and the failback daemon each fill one and call
// it; none of them needs another's options for it.
type targetOptions struct {
	// session reaches the Karmada apiserver the workloads live on: its
	// clients, guard, release and the errors it explains.
	*session
	resource.FilenameOptions

	LabelSelector string
	AllNamespaces bool
	All           bool

	Args             []string
	Namespace        string
	EnforceNamespace bool
	// skip, when set, leaves out a workload read from the server by its
	// annotations (the failback daemon's opt-out), before anything else
	// looks at it.
	skip func(annotations map[string]string) bool
	// mapped, when set, is called by startup once the API's types are
	// mapped, before the workloads are resolved.
	mapped func(meta.RESTMapper)
	// ahead is what plan reads while the workloads are resolved; nil
	// where their scope is not known before.
	ahead *predict.ReadAhead
	// stdin is what -f - read from standard input, once, before the
	// API server was asked anything.
	stdin []byte
	// workloads, when not nil, are the workloads to resolve instead of
	// arguments or files: a caller that holds them as values (a failback
	// resuming what its record planned) gives them as they are.
	workloads []rebalance.Workload
}

// newTargetOptions returns target options with the flags' defaults, on a
// session of their own (newSession).
func newTargetOptions(streams genericiooptions.IOStreams) *targetOptions {
	return &targetOptions{session: newSession(streams)}
}

// newTargetOptionsForConfig returns target options on a session over
// config, a client config already built from kubeconfig (see
// newSessionForConfig). workloads, when not nil, are resolved instead of
// arguments or files (see targetOptions.workloads).
func newTargetOptionsForConfig(streams genericiooptions.IOStreams, kubeconfig *genericclioptions.ConfigFlags, config *rest.Config, workloads []rebalance.Workload) *targetOptions {
	return &targetOptions{session: newSessionForConfig(streams, kubeconfig, config), workloads: workloads}
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
