package failback

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	typedapps "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/typed/apps/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
)

// Labels of the WorkloadRebalancers that record failbacks: they find the
// ledger again after a restart, and let `kubectl rebalance get -l` list it.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy on failback records.
	ManagedBy     = "kubectl-rebalance-failback"
	LabelCluster  = "failback.kubectl-rebalance.io/cluster"
	LabelRecovery = "failback.kubectl-rebalance.io/recovery"
)

// RecordLabels are the labels of the record of cluster's recovery key.
func RecordLabels(cluster, key string) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedBy, LabelRecovery: key}
	if len(validation.IsValidLabelValue(cluster)) == 0 {
		l[LabelCluster] = cluster
	}
	return l
}

// Entry is one failback record in the ledger.
type Entry struct {
	Name, Cluster, Key string
	// Unfinished: some workload is still pending (the run was stopped by
	// a restart, a lost Lease or the cluster failing again).
	Unfinished bool
	// BudgetSpent: the failure budget stopped it; it is never resumed.
	BudgetSpent bool
	// Created is when the record was created: when its failback fired.
	Created time.Time
	// FollowUp: the record of workloads whose eviction ended after their
	// recovery's failback fired (FollowUpName), not of the failback itself.
	FollowUp bool
}

// FollowUpName names the record of a recovery's failback of the workloads
// whose eviction from the cluster ended after the failback fired: the
// recovery's record name and a hash of the bindings, so that every daemon
// names the same batch alike and resumes it instead of starting it again.
func FollowUpName(cluster, key string, bindings []string) string {
	sorted := append([]string(nil), bindings...)
	sort.Strings(sorted)
	f := fnv.New32a()
	for _, b := range sorted {
		fmt.Fprintf(f, "%s\n", b)
	}
	return RecordName(cluster, fmt.Sprintf("%s-%08x", key, f.Sum32()))
}

// Listed returns the workloads (by WorkloadIdentity) that the records of
// cluster's recovery key list: a follow-up never triggers them again.
func (l Ledger) Listed(ctx context.Context, cluster, key string) (map[string]bool, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelRecovery: key}).String()
	list, err := l.Client.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("cannot list the failback records labelled %s: %w", sel, err)
	}
	out := map[string]bool{}
	for _, rb := range list.Items {
		if c := rb.Labels[LabelCluster]; c != "" && c != cluster {
			continue
		}
		for _, w := range rb.Spec.Workloads {
			out[WorkloadIdentity(w)] = true
		}
	}
	return out, nil
}

// AnnotationStopped on a failback record says why its waves stopped for
// good; only StoppedFailureBudget is written.
const (
	AnnotationStopped    = "failback.kubectl-rebalance.io/stopped"
	StoppedFailureBudget = "FailureBudget"
)

// MarkBudgetSpent notes on the record name that the failure budget stopped
// it, so that no later leader resumes its pending workloads, and gives it
// the daemon's ttl: the record grows as the waves start workloads and gets
// its ttl once all are listed, which a failback stopped for good never does.
func (l Ledger) MarkBudgetSpent(ctx context.Context, name string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, AnnotationStopped, StoppedFailureBudget)
	if _, err := l.Client.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cannot annotate workloadrebalancer %s: %w", name, err)
	}
	return l.giveTTL(ctx, name)
}

// giveTTL sets the daemon's ttl on the record name (stopped by its failure
// budget) when it has none; nothing without --ttl.
func (l Ledger) giveTTL(ctx context.Context, name string) error {
	if l.TTL == nil {
		return nil
	}
	rec := &record.Recorder{Client: l.Client}
	if _, err := rec.SetTTL(ctx, name, *l.TTL); err != nil && !errors.Is(err, record.ErrRebalancerGone) {
		return fmt.Errorf("cannot set the ttl of workloadrebalancer %s, stopped by its failure budget: %w", name, err)
	}
	return nil
}

// Ledger reads and tidies the failback records: the WorkloadRebalancers
// whose status says which workloads of a recovery were triggered.
type Ledger struct {
	Client typedapps.WorkloadRebalancerInterface
	// TTL is the failback records' ttlSecondsAfterFinished (nil: kept).
	TTL *int32
}

// selector selects every failback record.
func selector() string {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy}).String()
}

// List returns the failback records, by name.
func (l Ledger) List(ctx context.Context) ([]Entry, error) {
	list, err := l.Client.List(ctx, metav1.ListOptions{LabelSelector: selector()})
	if err != nil {
		return nil, fmt.Errorf("cannot list the failback records (workloadrebalancers labelled %s): %w", selector(), err)
	}
	entries := make([]Entry, 0, len(list.Items))
	for i := range list.Items {
		rb := &list.Items[i]
		entries = append(entries, Entry{
			Name:        rb.Name,
			Cluster:     rb.Labels[LabelCluster],
			Key:         rb.Labels[LabelRecovery],
			Unfinished:  unfinished(rb),
			BudgetSpent: budgetSpent(rb),
			Created:     rb.CreationTimestamp.Time,
		})
		e := &entries[len(entries)-1]
		e.FollowUp = e.Cluster != "" && e.Name != RecordName(e.Cluster, e.Key)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries, nil
}

func unfinished(rb *appsv1alpha1.WorkloadRebalancer) bool {
	if budgetSpent(rb) {
		// Stopped for good: the workloads it never listed are no reason
		// to keep it.
		return rb.Status.ObservedGeneration < rb.Generation || record.HasPending(rb.Status)
	}
	// A failback's record grows as its waves start workloads and gets its
	// ttl once all are listed: one without a ttl, or with workloads not
	// started yet, belongs to a failback that was stopped.
	unstarted := rb.Annotations[record.UnstartedAnnotation]
	return rb.Status.ObservedGeneration < rb.Generation || record.HasPending(rb.Status) ||
		rb.Spec.TTLSecondsAfterFinished == nil || (unstarted != "" && unstarted != "0")
}

// budgetSpent reports whether the failure budget stopped rb's failback.
func budgetSpent(rb *appsv1alpha1.WorkloadRebalancer) bool {
	return rb.Annotations[AnnotationStopped] == StoppedFailureBudget
}

// Exists reports whether the record name exists.
func (l Ledger) Exists(ctx context.Context, name string) (bool, error) {
	_, err := l.Client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("cannot read workloadrebalancer %s, the failback record: %w", name, err)
	}
	return true, nil
}

// Sweep deletes the failback records whose TTL is over, as Karmada's
// controller would (the daemon does it too, so that its records go even
// where that controller does not run). It returns the names deleted.
func (l Ledger) Sweep(ctx context.Context) ([]string, error) {
	list, err := l.Client.List(ctx, metav1.ListOptions{LabelSelector: selector()})
	if err != nil {
		return nil, fmt.Errorf("cannot list the failback records to delete those past their ttl: %w", err)
	}
	rec := &record.Recorder{Client: l.Client}
	var deleted []string
	var errs []error
	for i := range list.Items {
		rb := &list.Items[i]
		if budgetSpent(rb) && rb.Spec.TTLSecondsAfterFinished == nil && l.TTL != nil {
			// Marked by a daemon that stopped before it gave the ttl.
			if err := l.giveTTL(ctx, rb.Name); err != nil {
				errs = append(errs, err)
				continue
			}
			withTTL, err := l.Client.Get(ctx, rb.Name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			rb = withTTL
		}
		if _, due := record.ExpiresAt(rb); !due || unfinished(rb) {
			continue
		}
		ok, _, err := rec.Delete(ctx, rb.Name)
		switch {
		case errors.Is(err, record.ErrRebalancerGone):
		case err != nil:
			errs = append(errs, err)
		case ok:
			deleted = append(deleted, rb.Name)
		}
	}
	return deleted, errors.Join(errs...)
}

// SkipAnnotation on a resource template, set to "true", keeps its workload
// out of every failback, as deschedule.kubectl-rebalance.io/skip keeps it
// out of the descheduler's passes.
const SkipAnnotation = "failback.kubectl-rebalance.io/skip"
