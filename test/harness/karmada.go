package harness

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	clientPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	cp.etcdURL = "http://" + addr(clientPort)
	peerURL := "http://" + addr(peerPort)
	p, err := cp.startProcess("etcd", cp.bin("server"),
		"--name=harness",
		"--data-dir="+filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls="+cp.etcdURL,
		"--advertise-client-urls="+cp.etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=harness="+peerURL,
		// Test data need not survive a crash; fsync dominates write latency.
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := waitReady(ctx, p, time.Minute, httpCheck(http.DefaultClient, cp.etcdURL+"/health")); err != nil {
		return err
	}
	cp.progress("etcd ready on %s (%s)", cp.etcdURL, since(start))
	return nil
}

// apiserverArgs are the kube-apiserver flags shared by Karmada's apiserver and
// the members'. Every apiserver keeps its data under its own etcd prefix.
func (cp *ControlPlane) apiserverArgs(etcdPrefix string, port int) []string {
	return []string{
		"--etcd-servers=" + cp.etcdURL,
		"--etcd-prefix=/" + etcdPrefix,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + cp.pki.ServingCert,
		"--tls-private-key-file=" + cp.pki.ServingKey,
		"--client-ca-file=" + cp.pki.CACert,
		"--service-account-key-file=" + cp.pki.ServiceAccountPub,
		"--service-account-signing-key-file=" + cp.pki.ServiceAccountKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		// 127.0.0.1 cannot be the IP of the kubernetes Service's endpoints.
		"--endpoint-reconciler-type=none",
		"--max-requests-inflight=1000",
		"--max-mutating-requests-inflight=500",
		"--profiling=false",
		"--cert-dir=" + filepath.Join(cp.Dir, "pki", "generated-"+etcdPrefix),
	}
}

// adminConfig is a system:masters client for the apiserver on port.
func (cp *ControlPlane) adminConfig(port int) *rest.Config {
	return &rest.Config{
		Host: "https://" + addr(port),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cp.pki.caPEM,
			CertFile: cp.pki.AdminCert,
			KeyFile:  cp.pki.AdminKey,
		},
		QPS:   200,
		Burst: 400,
	}
}

func (cp *ControlPlane) apiserverReady(ctx context.Context, p *process, cfg *rest.Config) error {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	return waitReady(ctx, p, 2*time.Minute, httpCheck(client, cfg.Host+"/readyz"))
}

// startKarmada brings up the Karmada apiserver and every Karmada component.
func (cp *ControlPlane) startKarmada(ctx context.Context) error {
	start := time.Now()
	var err error
	if cp.karmadaPort, err = freePort(); err != nil {
		return err
	}
	args := append(cp.apiserverArgs("karmada", cp.karmadaPort),
		// Karmada's own deployment runs without these two admission plugins.
		"--disable-admission-plugins=StorageObjectInUseProtection,ServiceAccount",
		// The aggregation layer, for karmada-aggregated-apiserver.
		"--requestheader-client-ca-file="+cp.pki.FrontProxyCACert,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+cp.pki.FrontProxyCert,
		"--proxy-client-key-file="+cp.pki.FrontProxyKey,
	)
	apiserver, err := cp.startProcess("karmada-apiserver", cp.bin("kube-apiserver"), args...)
	if err != nil {
		return err
	}
	cp.Karmada = cp.adminConfig(cp.karmadaPort)
	if err := cp.apiserverReady(ctx, apiserver, cp.Karmada); err != nil {
		return err
	}
	cp.progress("karmada-apiserver ready on %s (%s)", cp.Karmada.Host, since(start))
	kubeconfig := filepath.Join(cp.Dir, "karmada-admin.kubeconfig")
	if err := cp.writeAdminKubeconfig(kubeconfig, cp.Karmada.Host); err != nil {
		return err
	}

	client, err := kubernetes.NewForConfig(cp.Karmada)
	if err != nil {
		return err
	}
	for _, ns := range []string{"karmada-system", "karmada-cluster"} {
		if err := ensureNamespace(ctx, client, ns); err != nil {
			return err
		}
	}
	if err := cp.installCRDs(ctx); err != nil {
		return err
	}
	cp.progress("karmada CRDs established (%s)", since(start))

	if err := cp.startAggregatedAPIServer(ctx, kubeconfig); err != nil {
		return err
	}
	cp.progress("karmada-aggregated-apiserver serving cluster.karmada.io (%s)", since(start))
	if err := cp.startWebhook(ctx, kubeconfig); err != nil {
		return err
	}
	cp.progress("karmada-webhook ready (%s)", since(start))

	// kube-controller-manager runs namespace deletion, garbage collection and
	// service-account tokens for the Karmada apiserver; it needs the
	// aggregated API to be discoverable first.
	if err := cp.startKubeControllerManager(ctx, "karmada-kube-controller-manager", kubeconfig,
		"namespace,garbagecollector,serviceaccount-token,serviceaccount,clusterrole-aggregation"); err != nil {
		return err
	}
	if err := cp.startKarmadaComponents(ctx, kubeconfig); err != nil {
		return err
	}
	cp.progress("karmada-scheduler and karmada-controller-manager ready (%s)", since(start))
	return nil
}

func (cp *ControlPlane) installCRDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(cp.opts.AssetsDir, "crds", "*.yaml"))
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		docs, err := readObjects(f)
		if err != nil {
			return err
		}
		objs = append(objs, docs...)
	}
	dyn, err := dynamic.NewForConfig(cp.Karmada)
	if err != nil {
		return err
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, obj := range objs {
		if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", obj.GetName(), err)
		}
	}
	for _, obj := range objs {
		name := obj.GetName()
		err := waitReady(ctx, nil, time.Minute, func() error {
			crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !conditionTrue(crd, "Established") {
				return fmt.Errorf("CRD %s not established", name)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (cp *ControlPlane) startAggregatedAPIServer(ctx context.Context, kubeconfig string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	p, err := cp.startProcess("karmada-aggregated-apiserver", cp.bin("aggregated-apiserver"),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--etcd-servers="+cp.etcdURL,
		"--etcd-prefix=/karmada-aggregated",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+cp.pki.ServingCert,
		"--tls-private-key-file="+cp.pki.ServingKey,
		"--cert-dir="+filepath.Join(cp.Dir, "pki", "generated-aggregated"),
	)
	if err != nil {
		return err
	}
	direct := cp.adminConfig(port)
	if err := cp.apiserverReady(ctx, p, direct); err != nil {
		return err
	}

	// The aggregation layer reaches the server through an ExternalName
	// Service, as in Karmada's own deployment, pointed at the loopback.
	ca := base64.StdEncoding.EncodeToString(cp.pki.caPEM)
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: karmada-aggregated-apiserver
  namespace: karmada-system
spec:
  type: ExternalName
  externalName: localhost
  ports:
  - port: %[1]d
    protocol: TCP
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.cluster.karmada.io
spec:
  group: cluster.karmada.io
  version: v1alpha1
  groupPriorityMinimum: 2000
  versionPriority: 10
  caBundle: %[2]s
  service:
    name: karmada-aggregated-apiserver
    namespace: karmada-system
    port: %[1]d
`, port, ca)
	objs, err := decodeObjects([]byte(manifest))
	if err != nil {
		return err
	}
	if err := createObjects(ctx, cp.Karmada, objs); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cp.Karmada)
	if err != nil {
		return err
	}
	apiServiceGVR := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	return waitReady(ctx, p, time.Minute, func() error {
		svc, err := dyn.Resource(apiServiceGVR).Get(ctx, "v1alpha1.cluster.karmada.io", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !conditionTrue(svc, "Available") {
			return fmt.Errorf("APIService v1alpha1.cluster.karmada.io is not available")
		}
		return nil
	})
}

func (cp *ControlPlane) startWebhook(ctx context.Context, kubeconfig string) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--cert-dir=" + filepath.Dir(cp.pki.ServingCert),
		"--metrics-bind-address=" + addr(ports[1]),
		"--health-probe-bind-address=" + addr(ports[2]),
	}
	if cp.Versions.KarmadaAtLeast(16) {
		// ClusterTaintPolicy and this flag are not in v1.12 or v1.13.
		args = append(args, "--allow-no-execute-taint-policy=true")
	}
	p, err := cp.startProcess("karmada-webhook", cp.bin("webhook"), args...)
	if err != nil {
		return err
	}
	if err := waitReady(ctx, p, time.Minute, tlsCheck(addr(ports[0]))); err != nil {
		return err
	}
	// Karmada's webhook configuration, with its in-cluster URL pointed at the
	// loopback port and our CA as the bundle.
	raw, err := os.ReadFile(filepath.Join(cp.opts.AssetsDir, "webhook-configuration.yaml"))
	if err != nil {
		return err
	}
	text := strings.ReplaceAll(string(raw), "https://karmada-webhook.karmada-system.svc:443/", "https://"+addr(ports[0])+"/")
	text = strings.ReplaceAll(text, "{{caBundle}}", base64.StdEncoding.EncodeToString(cp.pki.caPEM))
	objs, err := decodeObjects([]byte(text))
	if err != nil {
		return err
	}
	return createObjects(ctx, cp.Karmada, objs)
}

func (cp *ControlPlane) startKubeControllerManager(ctx context.Context, name, kubeconfig, controllers string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	p, err := cp.startProcess(name, cp.bin("kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(cp.Dir, "pki", "generated-"+name),
		"--leader-elect=false",
		"--controllers="+controllers,
		"--service-account-private-key-file="+cp.pki.ServiceAccountKey,
		"--root-ca-file="+cp.pki.CACert,
		"--use-service-account-credentials=false",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	)
	if err != nil {
		return err
	}
	return waitReady(ctx, p, 2*time.Minute, httpCheck(insecureClient, "https://"+addr(port)+"/healthz"))
}

func (cp *ControlPlane) startKarmadaComponents(ctx context.Context, kubeconfig string) error {
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	schedulerArgs, err := cp.releaseFlags(manifestScheduler, nil)
	if err != nil {
		return err
	}
	schedulerArgs = append(cp.componentArgs(kubeconfig, ports[0], ports[1]), schedulerArgs...)
	if cp.opts.WithoutSchedulerEstimator {
		schedulerArgs = setFlag(schedulerArgs, "enable-scheduler-estimator", "false")
	} else {
		schedulerArgs = append(schedulerArgs, cp.estimatorClientArgs()...)
	}
	if v := os.Getenv(SchedulerVerbosityEnv); v != "" {
		schedulerArgs = append(schedulerArgs, "--v="+v)
	}
	scheduler, err := cp.startProcess("karmada-scheduler", cp.bin("scheduler"), schedulerArgs...)
	if err != nil {
		return err
	}
	managerArgs, err := cp.controllerManagerFlags()
	if err != nil {
		return err
	}
	managerArgs = append(cp.componentArgs(kubeconfig, ports[2], ports[3]), managerArgs...)
	manager, err := cp.startProcess("karmada-controller-manager", cp.bin("controller-manager"), managerArgs...)
	if err != nil {
		return err
	}
	cp.metrics = map[string]string{
		"karmada-scheduler":          "http://" + addr(ports[0]) + "/metrics",
		"karmada-controller-manager": "http://" + addr(ports[2]) + "/metrics",
	}
	if err := waitReady(ctx, scheduler, time.Minute, httpCheck(http.DefaultClient, "http://"+addr(ports[1])+"/healthz")); err != nil {
		return err
	}
	return waitReady(ctx, manager, time.Minute, httpCheck(http.DefaultClient, "http://"+addr(ports[3])+"/healthz"))
}

// componentArgs are the flags every Karmada component gets from the harness
// rather than from its manifest: where it finds the apiserver and serves its
// metrics and health endpoints. One replica needs no leader election, which
// would only add its lease wait to every start; the higher client rate limits
// keep a 2-core run from queueing behind the defaults (docs/testing.md).
func (cp *ControlPlane) componentArgs(kubeconfig string, metricsPort, healthPort int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=" + addr(metricsPort),
		"--health-probe-bind-address=" + addr(healthPort),
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	}
}

// setFlag replaces the value of --name in args, or appends it.
// controllerManagerFlags are karmada-controller-manager's flags of the
// release manifest, with --controllers replaced only when the options ask
// for a deviation.
func (cp *ControlPlane) controllerManagerFlags() ([]string, error) {
	args, err := cp.releaseFlags(manifestControllerManager, nil)
	if err != nil {
		return nil, err
	}
	if cp.opts.KarmadaControllers != "" {
		args = setFlag(args, "controllers", cp.opts.KarmadaControllers)
	}
	return args, nil
}

func setFlag(args []string, name, value string) []string {
	out := make([]string, 0, len(args)+1)
	for _, a := range args {
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			continue
		}
		out = append(out, a)
	}
	return append(out, "--"+name+"="+value)
}

func ensureNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

func conditionTrue(obj *unstructured.Unstructured, condType string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == condType && m["status"] == "True" {
			return true
		}
	}
	return false
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}

// insecureClient probes the health endpoints of components that serve a
// self-signed certificate they generated themselves.
var insecureClient = &http.Client{
	Timeout:   2 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // health probe only
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

// RestartKarmadaAPIServer stops the Karmada apiserver (SIGTERM, as a rolling
// update would) and starts it again on the same port with the same
// arguments, returning once it is ready. Clients see refused connections
// and resets meanwhile; etcd keeps every object.
func (cp *ControlPlane) RestartKarmadaAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	var old *process
	for _, p := range cp.processes {
		if p.name == "karmada-apiserver" && !p.exited() {
			old = p
		}
	}
	cp.mu.Unlock()
	if old == nil {
		return fmt.Errorf("karmada-apiserver is not running")
	}
	old.stop(30 * time.Second)
	started, err := cp.startProcess(old.name, old.binary, old.args...)
	if err != nil {
		return err
	}
	return cp.apiserverReady(ctx, started, cp.Karmada)
}
