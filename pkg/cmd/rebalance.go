package cmd

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"
)

// NewCmdRebalance builds the `kubectl rebalance` command tree.
func NewCmdRebalance(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "kubectl rebalance (TYPE[.VERSION][.GROUP] [NAME...] | TYPE/NAME... | -f FILENAME | -l SELECTOR)",
		Short:         "Trigger a fresh Karmada reschedule of workloads and show where replicas went",
		Long:          templates.LongDesc(`Trigger a fresh reschedule of Karmada workloads.`),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.AddCommand(NewCmdVersion(streams))
	cmd.AddCommand(NewCmdCompletion(streams))
	return cmd
}
