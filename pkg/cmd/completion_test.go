package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// newCompletionTestRoot builds a small command tree shaped like the plugin's:
// a root named as kubectl shows it, kubeconfig flags, and the completion
// subcommand.
func newCompletionTestRoot(t *testing.T, streams genericiooptions.IOStreams) *cobra.Command {
	t.Helper()
	root := &cobra.Command{
		Use:           "kubectl rebalance TYPE/NAME...",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		Run:           func(*cobra.Command, []string) {},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.AddCommand(NewCmdCompletion(streams))
	root.AddCommand(NewCmdVersion(streams))
	return root
}

func TestCompletionCommand(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []string
		wantErr string
	}{
		{name: "bash", args: []string{"completion", "bash"}, want: []string{"# bash completion V2 for kubectl-rebalance", "-F __start_kubectl-rebalance kubectl-rebalance\n"}},
		{name: "zsh", args: []string{"completion", "zsh"}, want: []string{"#compdef kubectl-rebalance", "compdef _kubectl-rebalance kubectl-rebalance"}},
		{name: "fish", args: []string{"completion", "fish"}, want: []string{"complete -c kubectl-rebalance"}},
		{name: "powershell", args: []string{"completion", "powershell"}, want: []string{"Register-ArgumentCompleter -CommandName 'kubectl-rebalance'"}},
		{name: "bash without descriptions", args: []string{"completion", "bash", "--no-descriptions"}, want: []string{"__completeNoDesc"}},
		{name: "no shell", args: []string{"completion"}, wantErr: "completion needs exactly one shell, got 0 arguments: use one of bash, fish, powershell, zsh"},
		{name: "unknown shell", args: []string{"completion", "tcsh"}, wantErr: `unsupported shell "tcsh" for completion: use one of bash, fish, powershell, zsh`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			root := newCompletionTestRoot(t, streams)
			root.SetArgs(tt.args)
			err := root.Execute()
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			for _, want := range tt.want {
				assert.Contains(t, out.String(), want)
			}
			assert.NotContains(t, out.String(), "compdef _kubectl kubectl", "the script must not take over kubectl's own completion")
			assert.Equal(t, "kubectl rebalance TYPE/NAME...", root.Use, "the root's Use is restored after generation")
		})
	}
}

func TestCompletionOfSubcommandsAndShells(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "subcommands", args: []string{"__complete", "ver"}, want: []string{"version\tPrint the version of kubectl-rebalance"}},
		{name: "shells", args: []string{"__complete", "completion", ""}, want: []string{"bash", "fish", "powershell", "zsh"}},
		{name: "version output formats", args: []string{"__complete", "version", "-o", ""}, want: []string{"json", "yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			root := newCompletionTestRoot(t, streams)
			root.SetArgs(tt.args)
			require.NoError(t, root.Execute())
			assert.Equal(t, tt.want, completionLines(out.String()))
		})
	}
}

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: karmada-apiserver
  cluster: {server: "https://127.0.0.1:1"}
- name: member1
  cluster: {server: "https://127.0.0.1:2"}
users:
- name: karmada-admin
  user: {token: "not-a-secret"}
- name: member1-admin
  user: {token: "not-a-secret"}
contexts:
- name: karmada-apiserver
  context: {cluster: karmada-apiserver, user: karmada-admin}
- name: karmada-host
  context: {cluster: karmada-apiserver, user: karmada-admin}
- name: member1
  context: {cluster: member1, user: member1-admin}
current-context: karmada-apiserver
`

func TestRegisterCompletions(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(testKubeconfig), 0o600))

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "all contexts", args: []string{"--context", ""}, want: []string{"karmada-apiserver", "karmada-host", "member1"}},
		{name: "contexts by prefix", args: []string{"--context", "karmada-"}, want: []string{"karmada-apiserver", "karmada-host"}},
		{name: "contexts after an argument", args: []string{"deployment/nginx", "--context", "mem"}, want: []string{"member1"}},
		{name: "clusters", args: []string{"--cluster", ""}, want: []string{"karmada-apiserver", "member1"}},
		{name: "users", args: []string{"--user", "member"}, want: []string{"member1-admin"}},
		{name: "no match", args: []string{"--user", "nobody"}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			root := newCompletionTestRoot(t, streams)
			configFlags := genericclioptions.NewConfigFlags(true)
			configFlags.AddFlags(root.PersistentFlags())
			require.NoError(t, registerCompletions(root, cmdutil.NewFactory(configFlags)))

			root.SetArgs(append([]string{"__complete", "--kubeconfig", kubeconfig}, tt.args...))
			require.NoError(t, root.Execute())
			assert.Equal(t, tt.want, completionLines(out.String()))
			assert.Contains(t, out.String(), ":4\n", "file completion is turned off")
		})
	}
}

func TestRegisterCompletionsFlags(t *testing.T) {
	tests := []struct {
		name       string
		addFlags   func(*cobra.Command)
		registered []string
	}{
		{
			name: "kubeconfig flags",
			addFlags: func(root *cobra.Command) {
				genericclioptions.NewConfigFlags(true).AddFlags(root.PersistentFlags())
			},
			registered: []string{"namespace", "context", "cluster", "user"},
		},
		{
			name:     "no kubeconfig flags yet",
			addFlags: func(*cobra.Command) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := newCompletionTestRoot(t, genericiooptions.NewTestIOStreamsDiscard())
			tt.addFlags(root)
			require.NoError(t, registerCompletions(root, cmdutil.NewFactory(genericclioptions.NewConfigFlags(true))))
			for _, name := range tt.registered {
				_, ok := root.GetFlagCompletionFunc(name)
				assert.True(t, ok, "--%s has a completion function", name)
			}
			err := registerCompletions(root, cmdutil.NewFactory(genericclioptions.NewConfigFlags(true)))
			if len(tt.registered) > 0 {
				assert.ErrorContains(t, err, "call registerCompletions once per command")
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

// completionLines returns the candidates that `__complete` printed, without
// the trailing directive line and cobra's debug notes.
func completionLines(out string) []string {
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		if line == "" || strings.HasPrefix(line, ":") || strings.HasPrefix(line, "Completion ended") {
			continue
		}
		lines = append(lines, line)
	}
	return lines
}

// TestKubectlCompleteScript runs cmd/kubectl_complete-rebalance the way
// kubectl does, against a stand-in kubectl-rebalance that echoes its
// arguments, and checks that every word arrives unchanged.
func TestKubectlCompleteScript(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the completion helper is a POSIX shell script")
	}
	script, err := filepath.Abs("../../cmd/kubectl_complete-rebalance")
	require.NoError(t, err)
	info, err := os.Stat(script)
	require.NoError(t, err)
	assert.NotZero(t, info.Mode()&0o111, "kubectl only runs an executable helper")

	bin := t.TempDir()
	echo := "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "kubectl-rebalance"), []byte(echo), 0o755))

	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "new word", args: []string{"deployment/nginx", "--context", ""}, want: "[__complete]\n[deployment/nginx]\n[--context]\n[]\n"},
		{name: "partial word with spaces", args: []string{"-l", "app in (a, b"}, want: "[__complete]\n[-l]\n[app in (a, b]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := exec.Command(script, tt.args...)
			c.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := c.CombinedOutput()
			require.NoError(t, err, string(out))
			assert.Equal(t, tt.want, string(out))
		})
	}
}
