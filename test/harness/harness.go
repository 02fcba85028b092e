// Package harness starts a real Karmada control plane on 127.0.0.1 in the shape
// of Karmada's hack/local-up-karmada.sh, the environment our users run: etcd,
// the Karmada apiserver (kube-apiserver with Karmada's CRDs), the Cluster API
// served by karmada-aggregated-apiserver, kube-controller-manager,
// karmada-webhook, karmada-scheduler and karmada-controller-manager with the
// flags, feature gates and default controllers of the release's own deploy
// manifests, and member clusters made of kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok nodes: member1 and member2
// joined in Push mode, member3 registered in Pull mode by a real karmada-agent,
// and a karmada-scheduler-estimator for every member. karmada-descheduler is
// built beside them and started on request (StartKarmadaDescheduler). Tests,
// benchmarks and `make sandbox` share it; what a test changes from this
// default is an Options field, and docs/testing.md lists every such deviation.
//
// kwok runs the members' pods: a pod scheduled to a node becomes Running
// and Ready, and runs until it is deleted, as a server does; only pods
// annotated CompletesAnnotation=true end (Succeeded) once they run.
//
// The binaries come from hack/build-controlplane.sh.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Options configure a control plane.
type Options struct {
	// Dir holds certificates, kubeconfigs and logs. Empty means a temporary
	// directory that Stop removes.
	Dir string
	// AssetsDir is where hack/build-controlplane.sh put bin/, crds/ and the
	// rest. Empty means $KUBECTL_REBALANCE_CONTROLPLANE or
	// <repository>/_output/controlplane.
	AssetsDir string
	// Members is the number of member clusters (member1, member2, ...);
	// 0 means local-up-karmada's three.
	Members int
	// AllPush joins member3 in Push mode too. By default member3 (when there
	// is one) is a Pull cluster, registered and served by karmada-agent, and
	// the Karmada control plane cannot reach its apiserver (no cluster proxy),
	// as in local-up-karmada. A deviation: docs/testing.md.
	AllPush bool
	// NodesPerMember is the number of kwok nodes in each member.
	NodesPerMember int
	// NodeCPU, NodeMemory and NodePods are the capacity of every kwok node.
	NodeCPU, NodeMemory, NodePods string
	// KarmadaControllers replaces karmada-controller-manager's --controllers
	// value; empty keeps the release manifest's (every default controller,
	// workloadRebalancer included). A deviation: docs/testing.md.
	KarmadaControllers string
	// WithoutSchedulerEstimator runs no karmada-scheduler-estimator and
	// karmada-scheduler with --enable-scheduler-estimator=false, so that the
	// scheduler sizes members by the Cluster's resource summary alone (which
	// still counts cordoned nodes). By default every member has its estimator,
	// as in local-up-karmada. A deviation: docs/testing.md.
	WithoutSchedulerEstimator bool
	// WithoutKarmadaDescheduler runs no karmada-descheduler. By default it
	// runs with its manifest's flags, as local-up-karmada deploys it (it
	// evicts replicas that stay unschedulable, which the scheduler places
	// again). It needs the estimators: WithoutSchedulerEstimator runs none
	// either. A deviation: docs/testing.md.
	WithoutKarmadaDescheduler bool
	// Progress receives one line per started component; nil discards.
	Progress io.Writer
}

func (o *Options) defaults() error {
	if o.Members == 0 {
		o.Members = 3
	}
	if o.NodesPerMember == 0 {
		o.NodesPerMember = 1
	}
	if o.NodeCPU == "" {
		o.NodeCPU = "32"
	}
	if o.NodeMemory == "" {
		o.NodeMemory = "256Gi"
	}
	if o.NodePods == "" {
		o.NodePods = "110"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.AssetsDir == "" {
		dir, err := DefaultAssetsDir()
		if err != nil {
			return err
		}
		o.AssetsDir = dir
	}
	return nil
}

// Member is one member cluster.
type Member struct {
	// Name is the Cluster object's name and the kubeconfig context's.
	Name string
	// Config is an admin client config for the member's kube-apiserver.
	Config *rest.Config
	// Pull says the member is registered by karmada-agent in Pull mode; the
	// Karmada control plane cannot reach its apiserver.
	Pull bool
	// Endpoint is the member apiserver's URL.
	Endpoint string
	// EstimatorPort is the loopback port of the member's
	// karmada-scheduler-estimator (gRPC over mutual TLS), or 0 when the
	// control plane runs without estimators.
	EstimatorPort int

	kubeconfig string
}

// ControlPlane is a running control plane. Stop releases everything.
type ControlPlane struct {
	// Dir holds certificates, kubeconfigs and logs (logs/NAME.log).
	Dir string
	// Kubeconfig is a file with contexts karmada-apiserver and one per member.
	Kubeconfig string
	// Karmada is an admin client config for the Karmada apiserver.
	Karmada *rest.Config
	// Members are the member clusters, in order.
	Members []*Member
	// Versions are the Karmada and Kubernetes releases running.
	Versions Versions

	opts        Options
	removeDir   bool
	pki         *pki
	etcdURL     string
	karmadaPort int
	mu          sync.Mutex
	processes   []*process
	metrics     map[string]string
	stopOnce    sync.Once
}

// Start brings the whole control plane up and returns once every component is
// ready and every member cluster is Ready in Karmada. On failure it stops what
// it started.
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := checkAssets(opts.AssetsDir); err != nil {
		return nil, err
	}
	versions, err := readVersions(opts.AssetsDir)
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{opts: opts, Dir: opts.Dir, Versions: versions}
	if cp.Dir == "" {
		dir, err := os.MkdirTemp("", "rebalance-controlplane-")
		if err != nil {
			return nil, err
		}
		cp.Dir, cp.removeDir = dir, true
	}
	if cp.Dir, err = filepath.Abs(cp.Dir); err != nil {
		return nil, err
	}
	// `return nil, err` has already set cp to nil when this runs: stop the
	// processes through a copy of the pointer.
	started := cp
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	if err := os.MkdirAll(filepath.Join(cp.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	begin := time.Now()
	if cp.pki, err = newPKI(filepath.Join(cp.Dir, "pki")); err != nil {
		return nil, fmt.Errorf("create certificates: %w", err)
	}
	if err := cp.startEtcd(ctx); err != nil {
		return nil, err
	}

	// The member clusters do not depend on Karmada: bring them up meanwhile.
	memberErr := make(chan error, 1)
	go func() { memberErr <- cp.startMembers(ctx) }()
	karmadaErr := cp.startKarmada(ctx)
	if err := errors.Join(karmadaErr, <-memberErr); err != nil {
		return nil, err
	}
	if err := cp.joinMembers(ctx); err != nil {
		return nil, err
	}
	if !opts.WithoutSchedulerEstimator {
		if err := cp.waitEstimatorsConnected(ctx); err != nil {
			return nil, err
		}
		cp.progress("karmada-scheduler connected to %d scheduler-estimator(s) (%s)", len(cp.Members), since(begin))
	}
	if err := cp.writeKubeconfig(); err != nil {
		return nil, err
	}
	if !opts.WithoutSchedulerEstimator && !opts.WithoutKarmadaDescheduler {
		// It reads the Karmada apiserver through the kubeconfig just written.
		if err := cp.startKarmadaDescheduler(ctx); err != nil {
			return nil, err
		}
		cp.progress("karmada-descheduler ready (%s)", since(begin))
	}
	cp.progress("control plane (Karmada %s, Kubernetes %s) ready in %s", cp.Versions.Karmada, cp.Versions.Kubernetes,
		time.Since(begin).Round(100*time.Millisecond))
	return cp, nil
}

// Stop ends every process, Karmada's components first and etcd last, and
// removes the temporary directory if Start created it. It is safe to call more
// than once and from a signal handler.
func (cp *ControlPlane) Stop() {
	cp.stopOnce.Do(func() {
		cp.mu.Lock()
		procs := append([]*process(nil), cp.processes...)
		cp.mu.Unlock()
		// Stop in reverse start order so that clients go before their servers.
		stages := [][]*process{nil, nil, nil}
		for _, p := range procs {
			switch {
			case p.name == "etcd":
				stages[2] = append(stages[2], p)
			case isAPIServer(p.name):
				stages[1] = append(stages[1], p)
			default:
				stages[0] = append(stages[0], p)
			}
		}
		for _, stage := range stages {
			var wg sync.WaitGroup
			for _, p := range stage {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p.stop(10 * time.Second)
				}()
			}
			wg.Wait()
		}
		if cp.removeDir {
			_ = os.RemoveAll(cp.Dir)
		}
	})
}

func isAPIServer(name string) bool {
	return name == "karmada-apiserver" || name == "karmada-aggregated-apiserver" ||
		filepath.Ext(name) == ".kube-apiserver"
}

// Member returns the member cluster called name, or nil.
func (cp *ControlPlane) Member(name string) *Member {
	for _, m := range cp.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// process returns the started process called name, or nil.
func (cp *ControlPlane) process(name string) *process {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, p := range cp.processes {
		if p.name == name {
			return p
		}
	}
	return nil
}

func (cp *ControlPlane) progress(format string, args ...any) {
	fmt.Fprintf(cp.opts.Progress, format+"\n", args...)
}

func (cp *ControlPlane) bin(name string) string {
	return filepath.Join(cp.opts.AssetsDir, "bin", name)
}
