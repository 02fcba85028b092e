package noestimator

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
)

// The daemon's identity in the Karmada apiserver, from deploy/karmada/rbac.yaml.
const (
	daemonUser = "system:serviceaccount:karmada-system:kubectl-rebalance-deschedule"
	tokenName  = "kubectl-rebalance-deschedule-token"
)

// daemonGroups are the groups a ServiceAccount token authenticates with.
var daemonGroups = []string{"system:serviceaccounts", "system:serviceaccounts:karmada-system", "system:authenticated"}

// readManifest decodes the objects of a file under deploy/.
func readManifest(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := fixtures.ReadManifest(path)
	require.NoError(t, err)
	return objs
}

// applyManifest creates the objects of a file under deploy/ with config;
// with dryRun the server validates them strictly and stores nothing.
func applyManifest(t *testing.T, config *rest.Config, path string, dryRun ...bool) {
	t.Helper()
	require.NoError(t, fixtures.ApplyObjects(context.Background(), config, readManifest(t, path), len(dryRun) > 0 && dryRun[0]))
}

// deleteManifest deletes what applyManifest created from path.
func deleteManifest(t *testing.T, config *rest.Config, path string) {
	t.Helper()
	assert.NoError(t, fixtures.DeleteObjects(context.Background(), config, readManifest(t, path)))
}

// asDaemon impersonates the daemon's ServiceAccount.
func asDaemon(config *rest.Config) *rest.Config {
	c := rest.CopyConfig(config)
	c.Impersonate = rest.ImpersonationConfig{UserName: daemonUser, Groups: daemonGroups}
	return c
}

// TestDescheduleRBAC applies deploy/ to the real apiservers and proves, as
// the daemon's ServiceAccount, that its permissions are enough for a pass,
// events and leader election, and for nothing else. Karmada's cluster proxy
// forwards member requests impersonating the caller, so members enforce
// their own RBAC on that identity: without deploy/members/rbac.yaml the pass
// cannot count pods.
func TestDescheduleRBAC(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "rbac")
	e.stuck("member1", 2, "web")
	applyManifest(t, e.CP.Karmada, "deploy/karmada/rbac.yaml")
	as := []string{"--as", daemonUser}
	for _, g := range daemonGroups {
		as = append(as, "--as-group", g)
	}

	// Karmada lets the request through; member1 refuses the identity.
	code, report := e.RunJSON(append(as, "--unschedulable-threshold=0s")...)
	assert.Equal(t, cmd.ExitFailed, code)
	require.Len(t, report.ClusterErrors, 1)
	assert.Equal(t, "member1", report.ClusterErrors[0].Cluster)
	assert.Contains(t, report.ClusterErrors[0].Error, "cannot list pods in namespace rbac of member cluster member1 (the member cluster refused the identity Karmada forwards")
	assert.Contains(t, report.ClusterErrors[0].Error, `User "`+daemonUser+`" cannot list resource "pods"`)
	assert.Equal(t, deschedule.OutcomeBlocked, bindingOf(t, report, "web").Outcome)

	for _, m := range e.CP.Members {
		applyManifest(t, m.Config, "deploy/members/rbac.yaml")
		// Members refuse the identity again for the next run of the test.
		t.Cleanup(func() { deleteManifest(t, m.Config, "deploy/members/rbac.yaml") })
	}
	code, report = e.RunJSON(append(as, "--unschedulable-threshold=0s")...)
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, deschedule.OutcomeDescheduled, bindingOf(t, report, "web").Outcome)
	e.assertEvents("web", "Binding has been descheduled, 2 replica(s) in cluster(member1), 2 total descheduled replica(s)")
	// The selector lists Deployments' metadata in Karmada.
	code, _ = e.RunJSON(append(as, "--dry-run=client", "-l", "app=web")...)
	require.Equal(t, cmd.ExitOK, code)

	// Leader election: the daemon takes its Lease in karmada-system.
	ctx, stop := context.WithCancel(e.Ctx)
	done := make(chan int, 1)
	go func() {
		code, _, _ := e.RunContext(ctx, append(as, "-n", e.NS, "--dry-run=client", "--interval=1h", "--leader-elect", "--leader-elect-identity=rbac-test")...)
		done <- code
	}()
	e.Eventually("the ServiceAccount holding the lease", func() (bool, string) {
		h := e.holder(deschedule.DefaultLeaseNamespace, deschedule.DefaultLeaseName)
		return h == deschedule.HolderIdentity("rbac-test"), "holder " + h
	})
	stop()
	select {
	case code := <-done:
		assert.Equal(t, cmd.ExitOK, code)
	case <-time.After(time.Minute):
		t.Fatal("the daemon did not stop")
	}

	// And nothing else.
	daemon := asDaemon(e.CP.Karmada)
	karmada, err := karmadaclient.NewForConfig(daemon)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(daemon)
	require.NoError(t, err)
	member1, err := kubernetes.NewForConfig(deschedule.ClusterProxyConfig(daemon, "member1"))
	require.NoError(t, err)
	bindings := karmada.WorkV1alpha2().ResourceBindings(e.NS)
	forbidden := map[string]error{}
	forbid := func(what string, err error) { forbidden[what] = err }
	forbid("delete a binding", bindings.Delete(e.Ctx, "web-deployment", metav1.DeleteOptions{}))
	// Writes are patches of the replicas: a full update, which would drop
	// the fields of a newer release our types do not know, is not granted.
	rb, err := bindings.Get(e.Ctx, "web-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = bindings.Update(e.Ctx, rb, metav1.UpdateOptions{})
	forbid("update a binding", err)
	_, err = bindings.Create(e.Ctx, &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	forbid("create a binding", err)
	_, err = karmada.WorkV1alpha2().ClusterResourceBindings().List(e.Ctx, metav1.ListOptions{})
	forbid("list clusterresourcebindings", err)
	_, err = karmada.ClusterV1alpha1().Clusters().Get(e.Ctx, "member1", metav1.GetOptions{})
	forbid("get a cluster", err)
	_, err = karmada.PolicyV1alpha1().PropagationPolicies(e.NS).List(e.Ctx, metav1.ListOptions{})
	forbid("list propagation policies", err)
	_, err = kube.CoreV1().Secrets("karmada-cluster").Get(e.Ctx, "member1", metav1.GetOptions{})
	forbid("read the member credentials", err)
	_, err = kube.CoreV1().Secrets("").List(e.Ctx, metav1.ListOptions{})
	forbid("list secrets", err)
	_, err = kube.AppsV1().Deployments(e.NS).Get(e.Ctx, "web", metav1.GetOptions{})
	forbid("get a template", err)
	err = kube.AppsV1().Deployments(e.NS).Delete(e.Ctx, "web", metav1.DeleteOptions{})
	forbid("delete a template", err)
	_, err = kube.CoreV1().Events(e.NS).List(e.Ctx, metav1.ListOptions{})
	forbid("list events", err)
	_, err = kube.CoordinationV1().Leases("kube-system").Create(e.Ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	forbid("create a lease elsewhere", err)
	_, err = kube.CoordinationV1().Leases("karmada-system").Get(e.Ctx, "karmada-scheduler", metav1.GetOptions{})
	forbid("read another lease", err)
	_, err = member1.CoreV1().Secrets("kube-system").List(e.Ctx, metav1.ListOptions{})
	forbid("list member secrets", err)
	err = member1.CoreV1().Pods(e.NS).DeleteCollection(e.Ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	forbid("delete member pods", err)
	_, err = member1.AppsV1().Deployments(e.NS).Get(e.Ctx, "web", metav1.GetOptions{})
	forbid("get a member deployment", err)
	for what, err := range forbidden {
		assert.True(t, apierrors.IsForbidden(err), "%s: want Forbidden, got %v", what, err)
	}
	// What a pass does, checked the same way.
	_, err = bindings.List(e.Ctx, metav1.ListOptions{})
	assert.NoError(t, err)
	_, err = member1.CoreV1().Pods(e.NS).List(e.Ctx, metav1.ListOptions{})
	assert.NoError(t, err)

	// The token the in-cluster Deployment mounts authenticates as the same
	// identity (Karmada's kube-controller-manager fills the Secret in).
	var token []byte
	e.Eventually("the ServiceAccount token", func() (bool, string) {
		s, err := e.C.Kube.CoreV1().Secrets("karmada-system").Get(e.Ctx, tokenName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		token = s.Data[corev1.ServiceAccountTokenKey]
		return len(token) > 0, "no token yet"
	})
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["karmada"] = &clientcmdapi.Cluster{Server: e.CP.Karmada.Host, CertificateAuthorityData: e.CP.Karmada.CAData}
	kubeconfig.AuthInfos["deschedule"] = &clientcmdapi.AuthInfo{Token: string(token)}
	kubeconfig.Contexts["karmada-apiserver"] = &clientcmdapi.Context{Cluster: "karmada", AuthInfo: "deschedule", Namespace: e.NS}
	kubeconfig.CurrentContext = "karmada-apiserver"
	path := filepath.Join(t.TempDir(), "karmada.config")
	require.NoError(t, clientcmd.WriteToFile(*kubeconfig, path))
	code, report = e.RunJSON("--kubeconfig", path, "--dry-run=client", "--unschedulable-threshold=0s")
	require.Equal(t, cmd.ExitOK, code)
	assert.Empty(t, report.ClusterErrors)

	// The in-cluster Deployment's own arguments, with that kubeconfig, run
	// a daemon that leads and passes (dry run added: it covers -A).
	var args []string
	for _, obj := range readManifest(t, "deploy/host/deployment.yaml") {
		if obj.GetKind() != "Deployment" {
			continue
		}
		containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		require.NoError(t, err)
		raw, _, err := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		require.NoError(t, err)
		for _, arg := range raw {
			switch {
			case strings.HasPrefix(arg, "--kubeconfig="):
				arg = "--kubeconfig=" + path
			case arg == "--leader-elect-identity=$(POD_NAME)":
				arg = "--leader-elect-identity=deschedule-7d9f-abcde"
			case strings.HasPrefix(arg, "--metrics-bind-address="):
				arg = "--metrics-bind-address=127.0.0.1:0"
			case strings.HasPrefix(arg, "--health-probe-bind-address="):
				// The same address: one server the test can find.
				arg = "--health-probe-bind-address=127.0.0.1:0"
			}
			args = append(args, arg)
		}
	}
	require.Contains(t, args, "--leader-elect")
	d := e.startProcess("in-cluster", append(args, "--dry-run=client")...)
	d.waitLog("pass finished", time.Minute)
	assert.Equal(t, deschedule.HolderIdentity("deschedule-7d9f-abcde"), e.holder(deschedule.DefaultLeaseNamespace, deschedule.DefaultLeaseName))
	code, body := d.get("/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok (leader)\n", body)
	assert.Equal(t, 0, d.stop(syscall.SIGTERM, 30*time.Second))

	// The host manifests are valid for a real apiserver (member1 standing
	// in for the host cluster; nothing is stored).
	member1Admin := e.Member("member1")
	_, err = member1Admin.CoreV1().Namespaces().Create(e.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "karmada-system"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	applyManifest(t, e.CP.Member("member1").Config, "deploy/host/deployment.yaml", true)
}
