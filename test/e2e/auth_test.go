package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// TestKubeconfigAuthPlugins rebalances a real workload with kubeconfigs
// whose user is an OIDC auth provider or an exec credential plugin, as
// kubectl accepts them. Both hand the Karmada apiserver a ServiceAccount
// token (a JWT, like an OIDC ID token), which the apiserver verifies: the
// run works only if the plugin's credential reaches it.
func TestKubeconfigAuthPlugins(t *testing.T) {
	cp := harness.Require(t)
	ctx := fixtures.TestContext(t)
	c := fixtures.TestClients(t, cp.Karmada)
	const ns = "auth-plugins"
	fixtures.TestNamespace(ctx, t, c, ns)
	deployWithPolicy(ctx, t, c, ns, "auth", nil, []string{"member1", "member2"}, "web")

	sa, err := c.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "operator"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-auth-plugins-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}},
	}
	_ = c.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
	_, err = c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{}) })
	tr, err := c.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	token := tr.Status.Token

	dir := t.TempDir()
	script := filepath.Join(dir, "credential")
	require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$TOKEN"
`), 0o755))
	users := map[string]*clientcmdapi.AuthInfo{
		"oidc": {AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{
			"idp-issuer-url": "https://issuer.example.com", "client-id": "kubectl", "id-token": token,
		}}},
		"exec": {Exec: &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1", Command: script,
			Env: []clientcmdapi.ExecEnvVar{{Name: "TOKEN", Value: token}}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}},
	}
	for name, user := range users {
		t.Run(name, func(t *testing.T) {
			cfg := clientcmdapi.NewConfig()
			cfg.Clusters["karmada"] = &clientcmdapi.Cluster{Server: cp.Karmada.Host, CertificateAuthorityData: cp.Karmada.CAData}
			cfg.AuthInfos["operator"] = user
			cfg.Contexts[harness.KarmadaContext] = &clientcmdapi.Context{Cluster: "karmada", AuthInfo: "operator", Namespace: ns}
			cfg.CurrentContext = harness.KarmadaContext
			kubeconfig := filepath.Join(t.TempDir(), "config")
			require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))

			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			root := cmd.NewCmdRebalance(streams)
			root.SetArgs([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir(), "deploy/web", "-v=6"})
			code := cmd.Execute(root, streams)
			t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			require.Equal(t, cmd.ExitOK, code, errOut.String())
			assert.Contains(t, out.String(), "deployment.apps/web")
			assert.Contains(t, fixtures.TableLine(t, out.String(), "deployment.apps/web"), "Successful")
			// -v=6 shows client-go's request log, as kubectl's does.
			assert.Contains(t, errOut.String(), `"Response" verb="PATCH" url="`+cp.Karmada.Host+"/apis/work.karmada.io/v1alpha2/namespaces/"+ns+"/resourcebindings/web-deployment")
			assert.False(t, strings.Contains(errOut.String(), "no Auth Provider found"))
		})
	}
}
