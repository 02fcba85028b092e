package cmd

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/completion"
	"k8s.io/kubectl/pkg/util/templates"
)

// binaryName is the executable that the generated completion scripts complete.
const binaryName = "kubectl-rebalance"

// completionShells maps each supported shell to its script generator.
var completionShells = map[string]func(root *cobra.Command, out io.Writer, descriptions bool) error{
	"bash": func(root *cobra.Command, out io.Writer, descriptions bool) error {
		return root.GenBashCompletionV2(out, descriptions)
	},
	"zsh": func(root *cobra.Command, out io.Writer, descriptions bool) error {
		if descriptions {
			return root.GenZshCompletion(out)
		}
		return root.GenZshCompletionNoDesc(out)
	},
	"fish": func(root *cobra.Command, out io.Writer, descriptions bool) error {
		return root.GenFishCompletion(out, descriptions)
	},
	"powershell": func(root *cobra.Command, out io.Writer, descriptions bool) error {
		if descriptions {
			return root.GenPowerShellCompletionWithDesc(out)
		}
		return root.GenPowerShellCompletion(out)
	},
}

var (
	completionLong = templates.LongDesc(`
		Print a shell completion script for the kubectl-rebalance executable.

		The script completes commands, flags, kubeconfig contexts, clusters, users
		and namespaces when kubectl-rebalance is typed as one word. Load it in your
		shell's start-up file as shown in the examples.

		To complete "kubectl rebalance" (two words), kubectl 1.26 or newer asks the
		kubectl_complete-rebalance executable instead: put the script of that name,
		shipped next to the binary in every release archive, on your PATH. No
		completion script is needed for that.`)

	completionExample = templates.Examples(`
		# bash: load in the current shell, or add the line to ~/.bashrc
		source <(kubectl-rebalance completion bash)

		# zsh: write the script into a directory of your fpath
		kubectl-rebalance completion zsh > "${fpath[1]}/_kubectl-rebalance"

		# fish
		kubectl-rebalance completion fish > ~/.config/fish/completions/kubectl-rebalance.fish

		# PowerShell: add the line to your $PROFILE
		kubectl-rebalance completion powershell | Out-String | Invoke-Expression`)
)

// NewCmdCompletion builds the `completion SHELL` subcommand, which prints the
// completion script of the command tree it is attached to.
func NewCmdCompletion(streams genericiooptions.IOStreams) *cobra.Command {
	var noDescriptions bool
	cmd := &cobra.Command{
		Use:                   "completion SHELL",
		DisableFlagsInUseLine: true,
		Short:                 "Print a shell completion script (bash, zsh, fish or powershell)",
		Long:                  completionLong,
		Example:               completionExample,
		ValidArgs:             supportedShells(),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("completion needs exactly one shell, got %d arguments: use one of %s", len(args), strings.Join(supportedShells(), ", "))
			}
			if _, ok := completionShells[args[0]]; !ok {
				return fmt.Errorf("unsupported shell %q for completion: use one of %s", args[0], strings.Join(supportedShells(), ", "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeCompletion(cmd.Root(), streams.Out, args[0], !noDescriptions)
		},
	}
	cmd.Flags().BoolVar(&noDescriptions, "no-descriptions", false, "Leave the descriptions of commands and flags out of the completions.")
	return cmd
}

func supportedShells() []string {
	shells := make([]string, 0, len(completionShells))
	for shell := range completionShells {
		shells = append(shells, shell)
	}
	sort.Strings(shells)
	return shells
}

// writeCompletion writes the script for shell. Cobra names the script after
// root.Name(), the first word of root.Use; a root whose Use reads "kubectl
// rebalance" would therefore produce a script that takes over kubectl's own
// completion. The name is pinned to binaryName while the script is generated.
func writeCompletion(root *cobra.Command, out io.Writer, shell string, descriptions bool) error {
	gen, ok := completionShells[shell]
	if !ok {
		return fmt.Errorf("unsupported shell %q for completion: use one of %s", shell, strings.Join(supportedShells(), ", "))
	}
	if name := root.Name(); name != binaryName {
		use := root.Use
		root.Use = binaryName + strings.TrimPrefix(use, name)
		defer func() { root.Use = use }()
	}
	if err := gen(root, out, descriptions); err != nil {
		return fmt.Errorf("writing the %s completion script: %w", shell, err)
	}
	return nil
}

// registerCompletions makes the kubeconfig flags of cmd complete from the
// kubeconfig that f loads: --context, --cluster and --user from its entries,
// -n/--namespace from the namespaces of the API server. Call it on the root
// command once its ConfigFlags are added. Flags that cmd does not have are
// skipped, so it is safe to call before every flag exists.
func registerCompletions(cmd *cobra.Command, f cmdutil.Factory) error {
	// kubectl's List*InConfig helpers read the kubeconfig through a
	// package-level factory rather than an argument.
	completion.SetFactoryForCompletion(f)

	noFiles := cobra.ShellCompDirectiveNoFileComp
	funcs := map[string]cobra.CompletionFunc{
		"namespace": func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			return completion.CompGetResource(f, "namespace", toComplete), noFiles
		},
		// These ignore positional arguments on purpose: kubectl's
		// ContextCompletionFunc and friends complete only before the
		// first argument, which suits commands, not flags. The lists come
		// from map keys, so they are sorted to keep the shells' menus stable.
		"context": func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			return sorted(completion.ListContextsInConfig(toComplete)), noFiles
		},
		"cluster": func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			return sorted(completion.ListClustersInConfig(toComplete)), noFiles
		},
		"user": func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			return sorted(completion.ListUsersInConfig(toComplete)), noFiles
		},
	}
	for _, name := range []string{"namespace", "context", "cluster", "user"} {
		if cmd.Flag(name) == nil {
			continue
		}
		if err := cmd.RegisterFlagCompletionFunc(name, funcs[name]); err != nil {
			return fmt.Errorf("registering completion for --%s on %q: %w; call registerCompletions once per command", name, cmd.CommandPath(), err)
		}
	}
	return nil
}

func sorted(names []string) []string {
	sort.Strings(names)
	return names
}
