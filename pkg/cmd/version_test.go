package cmd

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/version"
)

func TestVersionCommand(t *testing.T) {
	want := version.Get()
	tests := []struct {
		name    string
		args    []string
		decode  func([]byte, any) error
		wantErr string
	}{
		{name: "text by default", args: nil},
		{name: "json", args: []string{"-o", "json"}, decode: json.Unmarshal},
		{name: "yaml", args: []string{"--output=yaml"}, decode: func(b []byte, v any) error { return yaml.Unmarshal(b, v) }},
		{name: "unknown format", args: []string{"-o", "xml"}, wantErr: `unknown output format "xml" for version: use -o json, -o yaml, or no -o for text`},
		{name: "no arguments", args: []string{"extra"}, wantErr: `version takes no arguments, got "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			cmd := NewCmdVersion(streams)
			cmd.SetArgs(tt.args)
			cmd.SetOut(out)
			cmd.SetErr(errOut)
			err := cmd.Execute()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			if tt.decode == nil {
				assert.Contains(t, out.String(), "Version:    "+want.Version+"\n")
				return
			}
			var got version.Info
			require.NoError(t, tt.decode(out.Bytes(), &got), out.String())
			assert.Equal(t, want, got)
		})
	}
}

func TestVersionRunText(t *testing.T) {
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	o := &VersionOptions{IOStreams: streams}
	err := o.Run(version.Info{
		Version:   "v1.2.3",
		Commit:    "0123abc",
		Date:      "2025-01-02T03:04:05Z",
		GoVersion: "go1.26.0",
		Platform:  "linux/arm64",
	})
	require.NoError(t, err)
	assert.Equal(t, ""+
		"Version:    v1.2.3\n"+
		"Commit:     0123abc\n"+
		"Built:      2025-01-02T03:04:05Z\n"+
		"Go version: go1.26.0\n"+
		"Platform:   linux/arm64\n", out.String())
}
