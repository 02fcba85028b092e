package cmd

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubectl/pkg/util/templates"
	"k8s.io/kubectl/pkg/util/term"
)

var optionsExample = templates.Examples(`
		# Print the flags every kubectl rebalance command takes
		kubectl rebalance options`)

// NewCmdOptions builds `kubectl rebalance options`, which lists the flags
// every command inherits (the kubeconfig flags, -v), as `kubectl options`
// does: each command's help shows only its own options.
func NewCmdOptions(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "options",
		Short:             "Print the list of flags inherited by all commands",
		Long:              "Print the list of flags inherited by all commands: the kubeconfig flags that choose the Karmada apiserver and how to reach it, and the log verbosity.",
		Example:           optionsExample,
		Args:              maxArgs(0, "", "run 'kubectl rebalance options' without arguments"),
		ValidArgsFunction: cobra.NoFileCompletions,
		Run: func(cmd *cobra.Command, _ []string) {
			_ = cmd.Usage()
		},
	}
	// Usage goes to stderr unless the command says otherwise; this one's
	// answer is its usage.
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.Out)
	templates.UseOptionsTemplates(cmd)
	// kubectl's options template has an empty help, so `options --help`
	// would print nothing; it prints what the command is, its example and
	// the list itself.
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		fmt.Fprintf(term.NewResponsiveWriter(c.OutOrStdout()), "%s\n\nExamples:\n%s\n\n", c.Long, c.Example)
		_ = c.Usage()
	})
	return cmd
}

// useKubectlHelp gives the command tree kubectl's help: the description,
// examples first, then the subcommands and the command's own options
// (wrapped to the terminal), the usage line, and a pointer to
// `kubectl rebalance options` for the flags every command inherits.
func useKubectlHelp(root *cobra.Command) {
	templates.ActsAsRootCommand(root, []string{"options"})
	// kubectl's template names the root by its name, "rebalance"; a
	// plugin's root is called as "kubectl rebalance".
	usage := root.UsageFunc()
	root.SetUsageFunc(func(c *cobra.Command) error {
		out := c.OutOrStderr()
		var buf bytes.Buffer
		c.SetOut(&buf)
		err := usage(c)
		c.SetOut(out)
		text := strings.ReplaceAll(buf.String(), `Use "`+root.Name()+" ", `Use "`+root.CommandPath()+" ")
		if _, werr := io.WriteString(term.NewResponsiveWriter(out), text); err == nil {
			err = werr
		}
		return err
	})
}

// printHelpWhenBare makes a bare `kubectl rebalance` print its help, as
// kubectl and its plugins do: exit code 0, help on stdout. It reports
// whether it did. Flags of the root's own (a selector, a file) still ask
// for a run and get the usual error.
func printHelpWhenBare(cmd *cobra.Command, args []string) bool {
	if len(args) > 0 {
		return false
	}
	given := false
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			given = true
		}
	})
	if given {
		return false
	}
	_ = cmd.Help()
	return true
}

// builtinResources are the names, plurals and short names of the
// resource types every Kubernetes API serves, known without asking the
// server: a word among them is never taken for a mistyped subcommand.
var builtinResources = func() map[string]bool {
	names := map[string]bool{}
	for gvk := range scheme.Scheme.AllKnownTypes() {
		plural, singular := meta.UnsafeGuessKindToResource(gvk)
		names[plural.Resource] = true
		names[singular.Resource] = true
	}
	// kubectl's short names of built-in types.
	for _, short := range []string{"cm", "cs", "csr", "crd", "crds", "deploy", "ds", "ep", "ev", "hpa", "ing", "limits", "netpol", "no", "ns", "pc", "pdb", "po", "pv", "pvc", "quota", "rc", "rs", "sa", "sc", "sts", "svc"} {
		names[short] = true
	}
	return names
}()

// commandTypo returns the subcommands a first argument is a likely typo
// of, when it is no built-in resource type: `kubectl rebalance plna
// deploy/web` meant plan. Whether the Karmada apiserver serves a custom
// type of that name is asked only then (Run).
func commandTypo(cmd *cobra.Command, args []string) []string {
	if len(args) == 0 || cmd.HasParent() {
		return nil
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		// cobra's own default, which it sets only for its unknown-command error.
		cmd.SuggestionsMinimumDistance = 2
	}
	word := strings.ToLower(args[0])
	if strings.ContainsAny(word, "/.,:") || builtinResources[word] {
		return nil
	}
	return cmd.SuggestionsFor(word)
}

// commandTypoError says that the first argument is no command nor a
// resource type, and what was likely meant. served tells whether the
// Karmada apiserver said it serves no such type, or could not be asked.
func commandTypoError(path string, args, suggestions []string, served bool) error {
	example := path + " " + suggestions[0]
	if len(args) > 1 {
		example += " " + strings.Join(args[1:], " ")
	}
	what := "a built-in resource type"
	if served {
		what = "a resource type the Karmada apiserver serves"
	}
	return fmt.Errorf("%q is neither a %s command nor %s; did you mean %s? (e.g. %s)",
		args[0], path, what, strings.Join(suggestions, " or "), example)
}
