package predict

import (
	"context"
	"slices"
	"sync"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/estimate"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// EstimatorNamespace and EstimatorServicePrefix are where karmada-scheduler
// looks for a member's karmada-scheduler-estimator by default: the Service
// karmada-system/karmada-scheduler-estimator-<cluster>.
const (
	EstimatorNamespace     = "karmada-system"
	EstimatorServicePrefix = "karmada-scheduler-estimator-"
)

// EstimatorMode says how Source learns whether karmada-scheduler consults
// karmada-scheduler-estimators.
type EstimatorMode string

const (
	// EstimatorAuto looks for the estimators' Services where karmada-scheduler
	// looks for them, in the Karmada apiserver.
	EstimatorAuto EstimatorMode = "auto"
	// EstimatorEnabled: the scheduler runs with --enable-scheduler-estimator
	// for every cluster.
	EstimatorEnabled EstimatorMode = "enabled"
	// EstimatorDisabled: the scheduler uses only its general estimator.
	EstimatorDisabled EstimatorMode = "disabled"
)

// listPage bounds each LIST, so that a large fleet is read in pages.
const listPage = 500

// Source reads an Input from the Karmada apiserver: one LIST of clusters,
// one LIST of ResourceBindings per namespace (or one across all namespaces),
// one LIST of ClusterResourceBindings when a target is cluster-scoped, and,
// in EstimatorAuto mode, one LIST of Services in karmada-system. Large
// results come in pages of 500.
type Source struct {
	Karmada karmadaclient.Interface
	// Work, when set, is a REST client of work.karmada.io/v1alpha2 through
	// which the ResourceBindings are listed as pages, each decoded while the
	// next is read (bindingPages); nil lists them through Karmada.
	Work rest.Interface
	// Kube reads the estimators' Services in the Karmada apiserver; nil
	// skips that.
	Kube kubernetes.Interface
	// Host reads, in the cluster that runs Karmada's components (the
	// karmada-host context of local-up-karmada), karmada-scheduler's
	// --enable-scheduler-estimator and the estimators' Services, where
	// standard installs put them; nil skips that.
	Host kubernetes.Interface
	// Estimator is how the estimators are found; "" means EstimatorAuto.
	Estimator EstimatorMode
	// Members reads the nodes and pods of the members whose estimator the
	// scheduler consults, when a binding's placement depends on free
	// capacity; nil reads none (those bindings cannot be predicted).
	Members MemberReader
}

// MemberReader reads member clusters' nodes and pods into what their
// karmada-scheduler-estimators answer (estimate.Reader).
type MemberReader interface {
	Read(ctx context.Context, clusters []*clusterv1alpha1.Cluster) (map[string]*estimate.Member, map[string]error)
}

// Read reads what predicting targets needs. With allNamespaces the bindings
// are listed across all namespaces in one go. The lists do not depend on one
// another, so they are sent side by side (at most readConcurrency at a time):
// a plan costs about its longest list, not their sum. When several fail, the
// error reported is the first in the order clusters, bindings by namespace,
// cluster-scoped bindings, estimators.
func (s Source) Read(ctx context.Context, targets []rebalance.Target, allNamespaces bool) (Input, error) {
	return s.ReadScope(ctx, ScopeOf(targets, allNamespaces))
}

// Scope is where Read lists bindings.
type Scope struct {
	// Namespaces whose ResourceBindings are listed, one LIST each;
	// metav1.NamespaceAll lists them across all namespaces.
	Namespaces []string
	// ClusterScoped adds a LIST of ClusterResourceBindings.
	ClusterScoped bool
}

// ScopeOf is the scope of targets: their namespaces, sorted, or all
// namespaces with allNamespaces, and whether any target is cluster-scoped.
func ScopeOf(targets []rebalance.Target, allNamespaces bool) Scope {
	namespaces, clusterScoped := scopes(targets)
	if allNamespaces && len(namespaces) > 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	return Scope{Namespaces: namespaces, ClusterScoped: clusterScoped}
}

// Covers reports whether what was read in scope s holds every binding that
// scope other would list.
func (s Scope) Covers(other Scope) bool {
	if other.ClusterScoped && !s.ClusterScoped {
		return false
	}
	if slices.Contains(s.Namespaces, metav1.NamespaceAll) {
		return true
	}
	for _, ns := range other.Namespaces {
		if !slices.Contains(s.Namespaces, ns) {
			return false
		}
	}
	return true
}

// ReadScope is Read for the bindings of a scope given beforehand, so that
// they can be read while the targets are still being resolved.
func (s Source) ReadScope(ctx context.Context, scope Scope) (Input, error) {
	in := Input{Bindings: map[string]*workv1alpha2.ResourceBinding{}}
	namespaces, clusterScoped := scope.Namespaces, scope.ClusterScoped

	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		slots = make(chan struct{}, readConcurrency)
		found detected
		errs  = make([]error, len(namespaces)+3)
	)
	// collect is where a list puts what it read.
	collect := func(b *workv1alpha2.ResourceBinding) {
		mu.Lock()
		in.Bindings[Key(b.Namespace, b.Name)] = b
		mu.Unlock()
	}
	run := func(slot int, read func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				errs[slot] = ctx.Err()
				return
			}
			defer func() { <-slots }()
			errs[slot] = read()
		}()
	}
	run(0, func() (err error) {
		in.Clusters, err = s.clusters(ctx)
		return err
	})
	for i, ns := range namespaces {
		run(1+i, func() error { return s.bindings(ctx, ns, collect) })
	}
	if clusterScoped {
		run(len(namespaces)+1, func() error { return s.clusterBindings(ctx, collect) })
	}
	if s.Estimator != EstimatorDisabled && s.Estimator != EstimatorEnabled && (s.Kube != nil || s.Host != nil) {
		run(len(namespaces)+2, func() (err error) {
			found, err = s.estimatorServices(ctx)
			return err
		})
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return in, err
	}
	in.Estimated = s.estimated(in.Clusters, found)
	s.readMembers(ctx, &in)
	return in, ctx.Err()
}

// readMembers reads the members whose estimator the scheduler consults, once
// a binding read needs their answers: its placement depends on free capacity.
func (s Source) readMembers(ctx context.Context, in *Input) {
	if anyCapacityDependent(in.Bindings) {
		s.ReadMembers(ctx, in)
	}
}

// ReadMembers reads into in the members whose estimator the scheduler
// consults (in.Estimated), whatever bindings in holds: a caller that read
// no bindings (an empty Scope) and predicts one whose placement depends on
// free capacity (CapacityDependent) reads them this way.
func (s Source) ReadMembers(ctx context.Context, in *Input) {
	if len(in.Estimated) == 0 || s.Members == nil {
		return
	}
	var clusters []*clusterv1alpha1.Cluster
	for _, c := range in.Clusters {
		if slices.Contains(in.Estimated, c.Name) {
			clusters = append(clusters, c)
		}
	}
	members, failed := s.Members.Read(ctx, clusters)
	in.Accurate = make(map[string]AccurateEstimator, len(members))
	for name, m := range members {
		in.Accurate[name] = m
	}
	in.Unreadable = failed
}

// anyCapacityDependent reports whether a binding's fresh placement depends on
// the clusters' free capacity.
func anyCapacityDependent(bindings map[string]*workv1alpha2.ResourceBinding) bool {
	for _, b := range bindings {
		if CapacityDependent(b) {
			return true
		}
	}
	return false
}

// CapacityDependent reports whether b's fresh placement depends on the
// clusters' free capacity, so that its prediction needs the members'
// estimators answered (Input.Accurate).
func CapacityDependent(b *workv1alpha2.ResourceBinding) bool {
	p := b.Spec.Placement
	return p != nil && (DivisionOf(p, &b.Spec).IsDynamic() || len(p.SpreadConstraints) > 0)
}

// readConcurrency bounds the lists Read sends at a time.
const readConcurrency = 4

// firstError returns the first non-nil error.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// scopes returns the distinct namespaces of the targets, sorted, and whether
// any target is cluster-scoped.
func scopes(targets []rebalance.Target) (namespaces []string, clusterScoped bool) {
	seen := map[string]bool{}
	for _, t := range targets {
		ns := t.Workload.Namespace
		if ns == "" {
			clusterScoped = true
			continue
		}
		if !seen[ns] {
			seen[ns] = true
			namespaces = append(namespaces, ns)
		}
	}
	slices.Sort(namespaces)
	return namespaces, clusterScoped
}

func (s Source) clusters(ctx context.Context) ([]*clusterv1alpha1.Cluster, error) {
	var out []*clusterv1alpha1.Cluster
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := s.Karmada.ClusterV1alpha1().Clusters().List(ctx, opts)
		if err != nil {
			return nil, &rebalance.RequestError{Verb: "list", Resource: "clusters.cluster.karmada.io", Err: err}
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

func (s Source) bindings(ctx context.Context, namespace string, collect func(*workv1alpha2.ResourceBinding)) error {
	if s.Work != nil {
		if err := bindingPages(ctx, s.Work, namespace, collect); err != nil {
			return &rebalance.RequestError{Verb: "list", Resource: "resourcebindings.work.karmada.io", Namespace: namespace, Err: err}
		}
		return nil
	}
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := s.Karmada.WorkV1alpha2().ResourceBindings(namespace).List(ctx, opts)
		if err != nil {
			return &rebalance.RequestError{Verb: "list", Resource: "resourcebindings.work.karmada.io", Namespace: namespace, Err: err}
		}
		for i := range list.Items {
			collect(slim(&list.Items[i]))
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return nil
		}
	}
}

func (s Source) clusterBindings(ctx context.Context, collect func(*workv1alpha2.ResourceBinding)) error {
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := s.Karmada.WorkV1alpha2().ClusterResourceBindings().List(ctx, opts)
		if err != nil {
			return &rebalance.RequestError{Verb: "list", Resource: "clusterresourcebindings.work.karmada.io", Err: err}
		}
		for i := range list.Items {
			crb := &list.Items[i]
			collect(slim(&workv1alpha2.ResourceBinding{ObjectMeta: crb.ObjectMeta, Spec: crb.Spec, Status: crb.Status}))
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return nil
		}
	}
}

// slim keeps of a listed binding what a prediction reads, so that a fleet's
// bindings are held without their managed fields, annotations (the applied
// placement among them; a move's ledger is kept), labels other than the policy's and the members'
// aggregated status, with one copy of each distinct placement and of each
// distinct set of replica requirements, and without the rest of the page
// they came in.
func slim(b *workv1alpha2.ResourceBinding) *workv1alpha2.ResourceBinding {
	spec := b.Spec
	spec.Placement = rebalance.SharedPlacement(spec.Placement)
	spec.ReplicaRequirements = rebalance.SharedReplicaRequirements(spec.ReplicaRequirements)
	var annotations map[string]string
	if ledger, ok := b.Annotations[rebalance.HandoverAnnotation]; ok {
		// A move's ledger tells its hold from a user's suspension (HeldByMove).
		annotations = map[string]string{rebalance.HandoverAnnotation: ledger}
	}
	return &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: b.Namespace, Name: b.Name, UID: b.UID, ResourceVersion: b.ResourceVersion, Generation: b.Generation,
			Labels: rebalance.PolicyLabels(b.Labels), OwnerReferences: b.OwnerReferences, DeletionTimestamp: b.DeletionTimestamp,
			Annotations: annotations,
		},
		Spec: spec,
		Status: workv1alpha2.ResourceBindingStatus{
			SchedulerObservedGeneration:   b.Status.SchedulerObservedGeneration,
			SchedulerObservedAffinityName: b.Status.SchedulerObservedAffinityName,
			LastScheduledTime:             b.Status.LastScheduledTime,
			Conditions:                    b.Status.Conditions,
		},
	}
}

// estimatorServices looks for the estimators where installs put them: their
// Services in the Karmada apiserver (where karmada-scheduler looks first) and,
// with a host cluster, its Services there and karmada-scheduler's flags.
func (s Source) estimatorServices(ctx context.Context) (detected, error) {
	var d detected
	var err error
	if s.Kube != nil {
		if d.services, err = estimatorServiceNames(ctx, s.Kube); err != nil {
			return d, err
		}
	}
	if s.Host != nil {
		host, err := readHost(ctx, s.Host)
		if err != nil {
			return d, err
		}
		d.flags, d.enabled = host.flags, host.enabled
		d.services = append(d.services, host.services...)
	}
	return d, nil
}

// detected is what auto detection found.
type detected struct {
	// flags: karmada-scheduler's flags were read; enabled is then its
	// --enable-scheduler-estimator.
	flags, enabled bool
	// services names the clusters with an estimator Service.
	services []string
}

// estimated names the clusters whose estimator karmada-scheduler may
// consult: every cluster when the estimator is enabled, none when it is
// disabled, else those with an estimator Service.
func (s Source) estimated(clusters []*clusterv1alpha1.Cluster, found detected) []string {
	var out []string
	switch {
	case s.Estimator == EstimatorDisabled, s.Estimator != EstimatorEnabled && found.flags && !found.enabled:
		return nil
	case s.Estimator == EstimatorEnabled, found.flags && len(found.services) == 0:
		// karmada-scheduler dials each member's estimator by its Service's
		// DNS name: with none in sight, it may be where the client cannot
		// look.
		for _, c := range clusters {
			out = append(out, c.Name)
		}
	default:
		for _, c := range clusters {
			if slices.Contains(found.services, c.Name) {
				out = append(out, c.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}
