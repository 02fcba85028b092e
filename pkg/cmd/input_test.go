package cmd

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
)

// unreachableURL is the address of a port nothing listens on.
func unreachableURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	return url
}

// TestLocalInputIsJudgedBeforeTheServer gives input that is wrong on its
// own, with no server to reach and with a server that sees every request:
// each mistake gets its own error, and the server is asked nothing.
func TestLocalInputIsJudgedBeforeTheServer(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	broken := file("broken.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web\n  labels: [\n")
	noKind := file("nokind.yaml", "apiVersion: apps/v1\nmetadata:\n  name: web\n")
	empty := file("empty.yaml", "")
	emptyDir := filepath.Join(dir, "nothing")
	require.NoError(t, os.Mkdir(emptyDir, 0o700))
	missing := filepath.Join(dir, "nope.yaml")

	tests := []struct {
		name  string
		args  []string
		stdin *string
		want  []string
	}{
		{name: "missing file", args: []string{"-f", missing}, want: []string{`cannot read -f: the path "` + missing + `" does not exist; check the file name`}},
		{name: "missing file, plan", args: []string{"plan", "-f", missing}, want: []string{`cannot read -f: the path "` + missing + `" does not exist`}},
		{name: "broken YAML", args: []string{"-f", broken}, want: []string{"cannot parse " + broken + ":", "fix the file and run the command again"}},
		{name: "broken YAML on standard input", args: []string{"-f", "-"}, stdin: ptr.To("kind: [\n"), want: []string{"cannot parse standard input:"}},
		{name: "empty standard input", args: []string{"-f", "-"}, stdin: ptr.To(""), want: []string{"standard input holds no object", "nothing was done"}},
		{name: "empty standard input, plan", args: []string{"plan", "-f", "-"}, stdin: ptr.To(""), want: []string{"standard input holds no object"}},
		{name: "empty file", args: []string{"-f", empty}, want: []string{empty + " holds no object"}},
		{name: "empty directory", args: []string{"-f", emptyDir}, want: []string{"cannot read -f " + emptyDir + ": it holds no .json, .yaml or .yml file"}},
		{name: "object without a kind", args: []string{"-f", noKind}, want: []string{"an object in it has no kind"}},
	}
	for _, tt := range tests {
		for _, server := range []string{"unreachable", "listening"} {
			t.Run(tt.name+"/"+server, func(t *testing.T) {
				var s *fakeServer
				url := unreachableURL(t)
				if server == "listening" {
					s = newFakeServer(t)
					url = s.URL
				}
				if tt.stdin != nil {
					withStdin(t, *tt.stdin)
				}
				streams, _, _, errOut := genericiooptions.NewTestIOStreams()
				root := NewCmdRebalance(streams)
				root.SetArgs(append([]string{"--kubeconfig", kubeconfigFor(t, url), "--cache-dir", t.TempDir()}, tt.args...))
				code := Execute(root, streams)
				assert.Equal(t, ExitError, code)
				assertInOrder(t, errOut.String(), tt.want)
				assert.NotContains(t, errOut.String(), "cannot reach the API server")
				if s != nil {
					assert.Empty(t, s.requests(), "the server was asked before the input was judged")
				}
			})
		}
	}
}

// TestStandardInputHoldingAWorkload rebalances the workload given on
// standard input, in UTF-8 or, after a byte order mark, in UTF-16 as
// PowerShell writes it: what the check before the server read of it is what
// the resolver resolves.
func TestStandardInputHoldingAWorkload(t *testing.T) {
	const manifest = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\n"
	tests := []struct {
		name  string
		input string
	}{
		{name: "UTF-8", input: manifest},
		{name: "UTF-8 with a byte order mark", input: "\xef\xbb\xbf" + manifest},
		{name: "UTF-16 little endian with a byte order mark", input: utf16Text(t, unicode.LittleEndian, manifest)},
		{name: "UTF-16 big endian with a byte order mark", input: utf16Text(t, unicode.BigEndian, manifest)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFakeServer(t)
			withWeb(s)
			withStdin(t, tt.input)
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			root := NewCmdRebalance(streams)
			root.SetArgs([]string{"--kubeconfig", kubeconfigFor(t, s.URL), "--cache-dir", t.TempDir(), "-f", "-", "--wait=false"})
			code := Execute(root, streams)
			assert.Equal(t, ExitOK, code, "stderr:\n%s", errOut.String())
			assert.Contains(t, out.String(), "deployment.apps/web")
			assert.Contains(t, out.String(), "Successful")
		})
	}
}

// utf16Text encodes text in UTF-16 of the given byte order, after its byte
// order mark.
func utf16Text(t *testing.T, order unicode.Endianness, text string) string {
	t.Helper()
	encoded, _, err := transform.String(unicode.UTF16(order, unicode.UseBOM).NewEncoder(), text)
	require.NoError(t, err)
	return encoded
}
