package cmd

import (
	"maps"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// embedding lets another command (the failback daemon) run kubectl
// rebalance in its own process, with the same flags, checks and code path
// as on the command line. The embedding command owns signals and client-go's
// logs; its hooks see what the run does. A nil *embedding changes nothing.
type embedding struct {
	// skip leaves out a workload read from the server (an opt-out
	// annotation, say) before anything else looks at it.
	skip func(obj map[string]string) bool
	// labels go on a WorkloadRebalancer the run records.
	labels map[string]string
	// progress is told how waves go.
	progress func(waves.Status)
	// rows is told the final rows of the run, and how its waves ended
	// (nil when not waved).
	rows func([]rebalance.Row, *waves.Result)
}

// skips reports whether info is a workload the embedding leaves out. Only
// objects read from the server have annotations to look at.
func (e *embedding) skips(info *resource.Info) bool {
	if e == nil || e.skip == nil || info.Object == nil || info.Source != "" {
		return false
	}
	if info.Mapping != nil && info.Mapping.GroupVersionKind.GroupKind() == rebalance.RebalancerGroupKind {
		return false
	}
	m, err := meta.Accessor(info.Object)
	return err == nil && e.skip(m.GetAnnotations())
}

func (e *embedding) recordLabels() map[string]string {
	if e == nil || len(e.labels) == 0 {
		return nil
	}
	return maps.Clone(e.labels)
}

// progressTo returns a progress function calling next and the hook.
func (e *embedding) progressTo(next func(waves.Status)) func(waves.Status) {
	if e == nil || e.progress == nil {
		return next
	}
	return func(s waves.Status) {
		next(s)
		e.progress(s)
	}
}

func (e *embedding) report(rows []rebalance.Row, res *waves.Result) {
	if e != nil && e.rows != nil {
		e.rows(rows, res)
	}
}

// newEmbeddedRebalance builds a `kubectl rebalance` command for e: the
// kubeconfig flags and the command's own, without the root command's log
// flags and subcommands, which belong to the embedding process.
func newEmbeddedRebalance(streams genericiooptions.IOStreams, e *embedding) *cobra.Command {
	o := NewRebalanceOptions(streams)
	o.embed = e
	f := cmdutil.NewFactory(cmdutil.NewMatchVersionFlags(o.ConfigFlags))
	cmd := &cobra.Command{
		Use:           "rebalance",
		Args:          cobra.ArbitraryArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          o.runE(f),
	}
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	o.ConfigFlags.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.KarmadaContext, "karmada-context", "", "")
	o.AddFlags(cmd)
	return cmd
}
