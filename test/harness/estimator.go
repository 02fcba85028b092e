package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// estimatorServicePort is the port karmada-scheduler dials on every
// estimator Service (its --scheduler-estimator-port default). Each Service
// maps it to the loopback port its member's estimator really listens on.
const estimatorServicePort = 10352

// estimatorServicePrefix is karmada-scheduler's default
// --scheduler-estimator-service-prefix: the Service of member1's estimator is
// karmada-scheduler-estimator-member1 in karmada-system.
const estimatorServicePrefix = "karmada-scheduler-estimator"

// startEstimator runs karmada-scheduler-estimator for one member, as
// local-up-karmada deploys one for every member, Pull members included, with
// the flags of the release's manifest. The estimator has no bind-address flag
// and listens on every interface, so it serves gRPC over mutual TLS: only
// holders of a certificate from the harness CA get answers. All estimators
// share this host, so each gets a port of its own (--server-port); the
// Service registerEstimator creates maps the scheduler's default port to it.
func (cp *ControlPlane) startEstimator(ctx context.Context, m *Member) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	release, err := cp.releaseFlags(manifestEstimator, map[string]string{"member_cluster_name": m.Name})
	if err != nil {
		return err
	}
	args := append([]string{
		"--kubeconfig=" + m.kubeconfig,
		"--server-port=" + strconv.Itoa(ports[0]),
		"--grpc-auth-cert-file=" + cp.pki.ServingCert,
		"--grpc-auth-key-file=" + cp.pki.ServingKey,
		"--grpc-client-ca-file=" + cp.pki.CACert,
		"--metrics-bind-address=" + addr(ports[1]),
		"--health-probe-bind-address=" + addr(ports[2]),
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	}, release...)
	p, err := cp.startProcess(m.Name+".karmada-scheduler-estimator", cp.bin("scheduler-estimator"), args...)
	if err != nil {
		return err
	}
	m.EstimatorPort = ports[0]
	return waitReady(ctx, p, time.Minute, httpCheck(http.DefaultClient, "http://"+addr(ports[2])+"/healthz"))
}

// estimatorClientArgs are the certificate flags of a component that asks the
// estimators (karmada-scheduler, karmada-descheduler): the harness's client
// certificate for their mutual TLS, where the manifests mount Secrets.
func (cp *ControlPlane) estimatorClientArgs() []string {
	return []string{
		"--scheduler-estimator-ca-file=" + cp.pki.CACert,
		"--scheduler-estimator-cert-file=" + cp.pki.AdminCert,
		"--scheduler-estimator-key-file=" + cp.pki.AdminKey,
	}
}

// registerEstimator publishes a member's estimator where karmada-scheduler
// finds it on this host: an ExternalName Service named after the cluster in
// the Karmada apiserver, whose port maps the scheduler's estimator port to
// the real one. Standard installs put the estimator's Service in the host
// cluster instead, which the scheduler reaches by cluster DNS
// (NAME.karmada-system.svc); the harness has neither a host cluster nor its
// DNS, and the scheduler looks in the Karmada apiserver first
// (docs/testing.md).
func (cp *ControlPlane) registerEstimator(ctx context.Context, kube kubernetes.Interface, m *Member) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: estimatorServicePrefix + "-" + m.Name, Namespace: "karmada-system"},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports: []corev1.ServicePort{{
				Name:       "grpc",
				Protocol:   corev1.ProtocolTCP,
				Port:       estimatorServicePort,
				TargetPort: intstr.FromInt32(int32(m.EstimatorPort)), //nolint:gosec // a port number
			}},
		},
	}
	_, err := kube.CoreV1().Services("karmada-system").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service karmada-system/%s: %w", svc.Name, err)
	}
	return nil
}

// waitEstimatorsConnected waits until karmada-scheduler says it has a
// connection to every member's estimator. Until then it would schedule with
// the general estimator alone, which still counts cordoned nodes.
func (cp *ControlPlane) waitEstimatorsConnected(ctx context.Context) error {
	scheduler := cp.process("karmada-scheduler")
	return waitReady(ctx, scheduler, 2*time.Minute, func() error {
		data, err := os.ReadFile(scheduler.logPath)
		if err != nil {
			return err
		}
		for _, m := range cp.Members {
			if !strings.Contains(string(data), "of cluster("+m.Name+") has been established") {
				return fmt.Errorf("karmada-scheduler has no connection to the estimator of %s yet", m.Name)
			}
		}
		return nil
	})
}
