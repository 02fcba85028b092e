package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// startMembers brings up every member cluster in parallel.
func (cp *ControlPlane) startMembers(ctx context.Context) error {
	cp.Members = make([]*Member, cp.opts.Members)
	errs := make([]error, cp.opts.Members)
	var wg sync.WaitGroup
	for i := range cp.Members {
		name := "member" + strconv.Itoa(i+1)
		// local-up-karmada registers its third member in Pull mode.
		cp.Members[i] = &Member{Name: name, Pull: i == 2 && !cp.opts.AllPush}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = cp.startMember(ctx, cp.Members[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (cp *ControlPlane) startMember(ctx context.Context, m *Member) error {
	start := time.Now()
	port, err := freePort()
	if err != nil {
		return err
	}
	dir := filepath.Join(cp.Dir, m.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// Karmada talks to members with a bearer token, as `karmadactl join`
	// sets it up; a static token in system:masters stands in for the
	// service accounts join would create.
	token := randomToken()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",karmada-controller,karmada-controller,system:masters\n"), 0o600); err != nil {
		return err
	}
	args := append(cp.apiserverArgs(m.Name, port), "--token-auth-file="+tokens)
	apiserver, err := cp.startProcess(m.Name+".kube-apiserver", cp.bin("kube-apiserver"), args...)
	if err != nil {
		return err
	}
	m.Config = cp.adminConfig(port)
	m.Endpoint = m.Config.Host
	if err := cp.apiserverReady(ctx, apiserver, m.Config); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		return err
	}
	m.kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := cp.writeAdminKubeconfig(m.kubeconfig, m.Endpoint); err != nil {
		return err
	}

	if err := cp.startKubeControllerManager(ctx, m.Name+".kube-controller-manager", m.kubeconfig, "*"); err != nil {
		return err
	}
	schedulerPort, err := freePort()
	if err != nil {
		return err
	}
	scheduler, err := cp.startProcess(m.Name+".kube-scheduler", cp.bin("kube-scheduler"),
		"--kubeconfig="+m.kubeconfig,
		"--authentication-kubeconfig="+m.kubeconfig,
		"--authorization-kubeconfig="+m.kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(schedulerPort),
		"--leader-elect=false",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	)
	if err != nil {
		return err
	}
	if err := waitReady(ctx, scheduler, time.Minute, httpCheck(insecureClient, "https://"+addr(schedulerPort)+"/healthz")); err != nil {
		return err
	}
	kwokPort, err := freePort()
	if err != nil {
		return err
	}
	stages, err := writeKwokStages(cp.opts.AssetsDir, dir)
	if err != nil {
		return err
	}
	kwok, err := cp.startProcess(m.Name+".kwok", cp.bin("kwok"),
		"--kubeconfig="+m.kubeconfig,
		"--config="+stages,
		"--manage-all-nodes=true",
		"--node-lease-duration-seconds=40",
		"--server-address="+addr(kwokPort),
		"--node-ip=127.0.0.1",
	)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(m.Config)
	if err != nil {
		return err
	}
	for i := range cp.opts.NodesPerMember {
		if err := cp.createNode(ctx, client, fmt.Sprintf("%s-node-%d", m.Name, i)); err != nil {
			return err
		}
	}
	err = waitReady(ctx, kwok, time.Minute, func() error {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if !nodeReady(&n) {
				return fmt.Errorf("node %s is not ready", n.Name)
			}
		}
		// Pods are admitted only once the service-account controller has
		// created the default account.
		_, err = client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err != nil {
		return err
	}
	if !cp.opts.WithoutSchedulerEstimator {
		if err := cp.startEstimator(ctx, m); err != nil {
			return err
		}
	}
	cp.progress("%s ready on %s with %d kwok node(s) (%s)", m.Name, m.Endpoint, cp.opts.NodesPerMember, since(start))
	return nil
}

func (cp *ControlPlane) createNode(ctx context.Context, client kubernetes.Interface, name string) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cp.opts.NodeCPU),
		corev1.ResourceMemory: resource.MustParse(cp.opts.NodeMemory),
		corev1.ResourcePods:   resource.MustParse(cp.opts.NodePods),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// joinMembers registers every member: a Push member as `karmadactl join`
// does (the Cluster object with its endpoint, and the access and impersonator
// Secrets in karmada-cluster), a Pull member by starting its karmada-agent,
// which registers the Cluster itself and then does for that member what
// karmada-controller-manager does for Push members.
func (cp *ControlPlane) joinMembers(ctx context.Context) error {
	start := time.Now()
	kube, err := kubernetes.NewForConfig(cp.Karmada)
	if err != nil {
		return err
	}
	karmada, err := karmadaclient.NewForConfig(cp.Karmada)
	if err != nil {
		return err
	}
	for _, m := range cp.Members {
		// The scheduler looks the estimator up when the Cluster appears.
		if !cp.opts.WithoutSchedulerEstimator {
			if err := cp.registerEstimator(ctx, kube, m); err != nil {
				return err
			}
		}
		if m.Pull {
			if err := cp.startAgent(ctx, m); err != nil {
				return err
			}
			continue
		}
		token, err := os.ReadFile(filepath.Join(cp.Dir, m.Name, "token"))
		if err != nil {
			return err
		}
		for _, name := range []string{m.Name, m.Name + "-impersonator"} {
			secret := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "karmada-cluster"},
				Data: map[string][]byte{
					clusterv1alpha1.SecretTokenKey:  token,
					clusterv1alpha1.SecretCADataKey: cp.pki.caPEM,
				},
			}
			if _, err := kube.CoreV1().Secrets("karmada-cluster").Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create secret karmada-cluster/%s: %w", name, err)
			}
		}
		cluster := &clusterv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name},
			Spec: clusterv1alpha1.ClusterSpec{
				SyncMode:              clusterv1alpha1.Push,
				APIEndpoint:           m.Endpoint,
				SecretRef:             &clusterv1alpha1.LocalSecretReference{Namespace: "karmada-cluster", Name: m.Name},
				ImpersonatorSecretRef: &clusterv1alpha1.LocalSecretReference{Namespace: "karmada-cluster", Name: m.Name + "-impersonator"},
			},
		}
		if _, err := karmada.ClusterV1alpha1().Clusters().Create(ctx, cluster, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create cluster %s: %w", m.Name, err)
		}
	}
	for _, m := range cp.Members {
		err := waitReady(ctx, nil, 2*time.Minute, func() error {
			c, err := karmada.ClusterV1alpha1().Clusters().Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
				return fmt.Errorf("cluster %s is not Ready", m.Name)
			}
			if len(c.Status.APIEnablements) == 0 || c.Status.ResourceSummary == nil {
				return fmt.Errorf("cluster %s has no API enablements or resource summary yet", m.Name)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	cp.progress("%d member cluster(s) joined and Ready, %s (%s)", len(cp.Members), cp.syncModes(), since(start))
	return nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// syncModes says which members are Push and which Pull, for the progress line.
func (cp *ControlPlane) syncModes() string {
	var push, pull []string
	for _, m := range cp.Members {
		if m.Pull {
			pull = append(pull, m.Name)
		} else {
			push = append(push, m.Name)
		}
	}
	text := "Push: " + strings.Join(push, ",")
	if len(pull) > 0 {
		text += "; Pull: " + strings.Join(pull, ",")
	}
	return text
}
