package cmd

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// authRecorder is an HTTP server that answers every request 404 and keeps
// the Authorization headers it saw: enough to see what credentials the
// client sends, which is all these tests are about.
type authRecorder struct {
	*httptest.Server
	mu      sync.Mutex
	headers []string
}

func newAuthRecorder(t *testing.T) *authRecorder {
	r := &authRecorder{}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.headers = append(r.headers, req.Header.Get("Authorization"))
		r.mu.Unlock()
		http.NotFound(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *authRecorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.headers...)
}

// writeAuthKubeconfig writes a kubeconfig for server whose user is user.
func writeAuthKubeconfig(t *testing.T, server *httptest.Server, user *clientcmdapi.AuthInfo) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["karmada"] = &clientcmdapi.Cluster{Server: server.URL, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["someone"] = user
	cfg.Contexts["karmada-apiserver"] = &clientcmdapi.Context{Cluster: "karmada", AuthInfo: "someone"}
	cfg.CurrentContext = "karmada-apiserver"
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// unsignedJWT is an ID token that expires in an hour. The oidc plugin only
// reads its expiry; the API server would check the signature.
func unsignedJWT(t *testing.T) string {
	enc := base64.RawURLEncoding
	claims := fmt.Sprintf(`{"iss":"https://issuer.example.com","sub":"someone","exp":%d}`, time.Now().Add(time.Hour).Unix())
	return enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(claims)) + "." + enc.EncodeToString([]byte("sig"))
}

// TestKubeconfigCredentials runs each command with kubeconfig users that
// kubectl accepts and checks that the credential reaches the API server,
// instead of an error about the kubeconfig.
func TestKubeconfigCredentials(t *testing.T) {
	idToken := unsignedJWT(t)
	script := filepath.Join(t.TempDir(), "credential")
	require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec"}}'
`), 0o755))

	users := []struct {
		name string
		user *clientcmdapi.AuthInfo
		want string
	}{
		{
			name: "oidc auth provider",
			user: &clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{
				"idp-issuer-url": "https://issuer.example.com", "client-id": "kubectl", "id-token": idToken,
			}}},
			want: "Bearer " + idToken,
		},
		{
			name: "exec credential plugin",
			user: &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
				APIVersion: "client.authentication.k8s.io/v1", Command: script, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			}},
			want: "Bearer from-exec",
		},
	}
	commands := map[string][]string{
		"rebalance":  {"deploy/a"},
		"get":        {"get"},
		"deschedule": {"deschedule", "--dry-run=client"},
	}
	for _, u := range users {
		for name, args := range commands {
			t.Run(u.name+"/"+name, func(t *testing.T) {
				server := newAuthRecorder(t)
				kubeconfig := writeAuthKubeconfig(t, server.Server, u.user)
				_, _, errOut := runRebalance(t, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}, args...)...)
				assert.NotContains(t, errOut, "no Auth Provider found")
				require.NotEmpty(t, server.seen(), "no request reached the API server; stderr:\n%s", errOut)
				for _, h := range server.seen() {
					assert.Equal(t, u.want, h)
				}
			})
		}
	}
}

// TestVerbosity checks that -v and --v show client-go's request logs on
// stderr, as kubectl's do, and that the default shows none.
func TestVerbosity(t *testing.T) {
	server := newAuthRecorder(t)
	kubeconfig := writeAuthKubeconfig(t, server.Server, &clientcmdapi.AuthInfo{Token: "t"})
	tests := []struct {
		name     string
		flags    []string
		requests bool
	}{
		{name: "default", flags: nil},
		{name: "-v=6", flags: []string{"-v=6"}, requests: true},
		{name: "--v 6", flags: []string{"--v", "6"}, requests: true},
		{name: "-v 2", flags: []string{"-v", "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir(), "deploy/a"}, tt.flags...)
			code, _, errOut := runRebalance(t, args...)
			assert.Equal(t, ExitError, code)
			requestLine := `"Response" verb="GET" url="` + server.URL + `/api`
			if tt.requests {
				assert.Contains(t, errOut, requestLine)
				assert.Contains(t, errOut, `status="404 Not Found"`)
			} else {
				assert.NotContains(t, errOut, requestLine)
			}
			assert.True(t, strings.HasPrefix(errOut, "I") || !tt.requests, "klog's text format:\n%s", errOut)
		})
	}
	code, _, errOut := runRebalance(t, "--kubeconfig", kubeconfig, "deploy/a", "-v=x")
	assert.Equal(t, ExitError, code)
	assert.Contains(t, errOut, `invalid --v "x": give a whole number, e.g. --v 10`)
	assert.NotContains(t, errOut, "strconv")
}

// TestVerbosityDaemonLogs checks that -v raises the level of deschedule's
// structured logs so that client-go's request logs are part of them.
func TestVerbosityDaemonLogs(t *testing.T) {
	server := newAuthRecorder(t)
	kubeconfig := writeAuthKubeconfig(t, server.Server, &clientcmdapi.AuthInfo{Token: "t"})
	_, _, quiet := runRebalance(t, "--kubeconfig", kubeconfig, "deschedule", "--dry-run=client")
	assert.NotContains(t, quiet, "msg=Response")
	_, _, verbose := runRebalance(t, "--kubeconfig", kubeconfig, "deschedule", "--dry-run=client", "-v=6")
	assert.Contains(t, verbose, `msg=Response verb=GET url="`+server.URL+"/apis/work.karmada.io/v1alpha2/namespaces/default/resourcebindings")
}
