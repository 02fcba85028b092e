package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/version"
)

var (
	versionLong = templates.LongDesc(`
		Print the version of kubectl-rebalance and how it was built.

		Only the plugin's own build is reported; no control plane is contacted.`)

	versionExample = templates.Examples(`
		# Print the version as text
		kubectl rebalance version

		# Print the version as JSON, for scripts and bug reports
		kubectl rebalance version -o json`)
)

// VersionOptions holds the flags of `kubectl rebalance version`.
type VersionOptions struct {
	// Output is the format: empty for text, "json" or "yaml".
	Output string

	genericiooptions.IOStreams
}

// NewCmdVersion builds the `version` subcommand.
func NewCmdVersion(streams genericiooptions.IOStreams) *cobra.Command {
	o := &VersionOptions{IOStreams: streams}
	cmd := &cobra.Command{
		Use:                   "version [-o json|yaml]",
		DisableFlagsInUseLine: true,
		Short:                 "Print the version of kubectl-rebalance",
		Long:                  versionLong,
		Example:               versionExample,
		Args:                  maxArgs(0, "", "run 'kubectl rebalance version', or 'kubectl rebalance version -o json'"),
		ValidArgsFunction:     cobra.NoFileCompletions,
		RunE:                  runSteps(func(context.Context) error { return o.Run(version.Get()) }, withoutArgs(o.Validate)),
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "Output format. One of: (json, yaml). Plain text when empty.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Validate rejects an output format the command cannot print.
func (o *VersionOptions) Validate() error {
	switch o.Output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unknown output format %q for version: use -o json, -o yaml, or no -o for text", o.Output)
}

// Run prints info in the chosen format.
func (o *VersionOptions) Run(info version.Info) error {
	switch o.Output {
	case "json":
		data, err := json.MarshalIndent(info, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding the version as json: %w", err)
		}
		_, err = fmt.Fprintf(o.Out, "%s\n", data)
		return err
	case "yaml":
		data, err := yaml.Marshal(info)
		if err != nil {
			return fmt.Errorf("encoding the version as yaml: %w", err)
		}
		_, err = o.Out.Write(data)
		return err
	}
	return printVersionText(o.Out, info)
}

func printVersionText(out io.Writer, info version.Info) error {
	w := tabwriter.NewWriter(out, 0, 0, 1, ' ', 0)
	fmt.Fprintf(w, "Version:\t%s\n", info.Version)
	fmt.Fprintf(w, "Commit:\t%s\n", info.Commit)
	fmt.Fprintf(w, "Built:\t%s\n", info.Date)
	fmt.Fprintf(w, "Go version:\t%s\n", info.GoVersion)
	fmt.Fprintf(w, "Platform:\t%s\n", info.Platform)
	return w.Flush()
}
