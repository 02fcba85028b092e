package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

type result struct {
	code           int
	stdout, stderr string
}

// run runs kubectl rebalance with args against the control plane.
func run(t *testing.T, cp *harness.ControlPlane, args ...string) result {
	t.Helper()
	r := fixtures.RunPlugin(t, cp.Kubeconfig, args...)
	return result{code: r.Code, stdout: r.Stdout, stderr: r.Stderr}
}

// report runs kubectl rebalance with args and -o report-json and decodes the report.
func report(t *testing.T, cp *harness.ControlPlane, wantCode int, args ...string) *rbprinters.Report {
	t.Helper()
	res := run(t, cp, append(args, "-o", "report-json")...)
	require.Equal(t, wantCode, res.code, res.stderr)
	r := &rbprinters.Report{}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), r), res.stdout)
	return r
}

// byName indexes a report's workloads by name.
func byName(r *rbprinters.Report) map[string]rbprinters.ReportWorkload {
	out := map[string]rbprinters.ReportWorkload{}
	for _, w := range r.Workloads {
		out[w.Workload.Name] = w
	}
	return out
}

// text prints a cluster -> replicas map like fixtures.Placement.
func text(m map[string]int32) string {
	if m == nil {
		return "<none>"
	}
	parts := make([]string, 0, len(m))
	for _, name := range sortedKeys(m) {
		if m[name] != 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", name, m[name]))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func sortedKeys(m map[string]int32) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return keys
}

// comparison is a plan set against the real run that followed it.
type comparison struct {
	// exact counts the workloads whose placement equals the prediction;
	// alternative those that got the second-pass alternative instead (a race
	// inside karmada-scheduler, see docs/plan.md); ambiguous those with an
	// alternative at all.
	exact, alternative, ambiguous, total int
	// singleExact counts the exact ones among those with one outcome.
	singleExact int
	mismatches  []string
	// declined lists the workloads the plan said it cannot predict because
	// of the release (predict.ReasonRandomTie, ReasonReleaseDependent): a
	// v1.12 tie broken at random, or a v1.16 whose schema reads as v1.15 to
	// v1.17, on either side of the change to the Webster division. They are
	// left out of the counts: no prediction was made.
	declined []string
	// timing lists the workloads the plan declined because their division
	// depends on when the members report the batch's other moves
	// (predict.ReasonBatchTiming); timingListed counts those whose real
	// placement is one of the placements the plan listed for them. They are
	// left out of the counts above too.
	timing       []string
	timingListed int
	// likely counts the predicted workloads whose division depends on the
	// batch's timing (reason BatchTiming among the batch's first
	// predict.QuickDecisions): they are in the counts above, with the
	// placement no report changed as the prediction; likelyExact counts
	// those that got it, likelyListed those that got another placement the
	// plan listed for them.
	likely, likelyExact, likelyListed int
}

// explained counts the workloads that got their prediction, or, for one
// that depends on the batch's timing, a placement the plan listed for it.
func (c comparison) explained() int { return c.matched() + c.likelyListed }

// matched counts the workloads whose placement was one of the predicted ones.
func (c comparison) matched() int { return c.exact + c.alternative }

// compare matches every planned workload with the run's placement after the
// scheduler answered. A plan entry with no predicted change is compared with
// the placement the run left.
func compare(t *testing.T, plan, real *rbprinters.Report) comparison {
	t.Helper()
	got := byName(real)
	var c comparison
	for _, p := range plan.Workloads {
		r, ok := got[p.Workload.Name]
		require.True(t, ok, "the run reports %s", p.Workload.Name)
		if p.Verdict == string(predict.CannotPredict) && (p.Reason == predict.ReasonRandomTie || p.Reason == predict.ReasonReleaseDependent) {
			c.declined = append(c.declined, fmt.Sprintf("%s (%s): %s; after %s", p.Workload.Name, p.Reason, p.Message, text(r.Placements.After)))
			continue
		}
		if p.Verdict == string(predict.CannotPredict) && p.Reason == predict.ReasonBatchTiming {
			after := text(r.Placements.After)
			// The message lists the placements the scheduler may write.
			listed := strings.Contains(p.Message, after)
			if listed {
				c.timingListed++
			}
			c.timing = append(c.timing, fmt.Sprintf("%s: after %s (listed: %t); %s", p.Workload.Name, after, listed, p.Message))
			continue
		}
		c.total++
		predicted, after := text(p.Placements.Predicted), text(r.Placements.After)
		if p.Placements.Alternative != nil {
			c.ambiguous++
		}
		likely := p.Reason == predict.ReasonBatchTiming
		if likely {
			c.likely++
		}
		switch {
		case predicted == after:
			c.exact++
			if p.Placements.Alternative == nil {
				c.singleExact++
			}
			if likely {
				c.likelyExact++
			}
		case likely && slices.ContainsFunc(p.Placements.Possible, func(m map[string]int32) bool { return text(m) == after }):
			c.likelyListed++
			c.mismatches = append(c.mismatches, fmt.Sprintf("%s: predicted %s, got %s, listed as the placement if a member reports the batch's other moves first", p.Workload.Name, predicted, after))
		case p.Placements.Alternative != nil && text(p.Placements.Alternative) == after:
			c.alternative++
			c.mismatches = append(c.mismatches, fmt.Sprintf("%s: predicted %s, got the second-pass alternative %s", p.Workload.Name, predicted, after))
		default:
			c.mismatches = append(c.mismatches, fmt.Sprintf("%s (%s, %s): before %s, predicted %s, after %s (%s %s)",
				p.Workload.Name, p.Division, p.Verdict, text(p.Placements.Before), predicted, after, r.Outcome, r.Reason))
		}
	}
	t.Logf("exact %d/%d, second-pass alternative %d (of %d with two possible outcomes); depending on the batch's timing %d, of which exact %d, another listed placement %d; mismatches: %v; declined by release: %v; declined by batch timing: %d, real placement among those listed %d/%d: %v",
		c.exact, c.total, c.alternative, c.ambiguous, c.likely, c.likelyExact, c.likelyListed, c.mismatches, c.declined, len(c.timing), c.timingListed, len(c.timing), c.timing)
	return c
}

// deployment creates a Deployment whose pods request cpu (may be "").
func deployment(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string, replicas int32, cpu string) {
	t.Helper()
	d := fixtures.Deployment(ns, name, replicas)
	if cpu != "" {
		d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	_, err := c.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
}

// policy propagates the named Deployments with placement.
func policy(ctx context.Context, t *testing.T, c *fixtures.Clients, ns, name string, placement policyv1alpha1.Placement, workloads ...string) {
	t.Helper()
	selectors := make([]policyv1alpha1.ResourceSelector, 0, len(workloads))
	for _, w := range workloads {
		selectors = append(selectors, policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: w})
	}
	_, err := c.Karmada.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       policyv1alpha1.PropagationSpec{ResourceSelectors: selectors, Placement: placement},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, w := range workloads {
		fixtures.WaitScheduled(ctx, t, c, ns, w+"-deployment")
	}
}

// failoverToleration lets the tutorial's NoExecute taint evict at once.
var failoverToleration = []corev1.Toleration{{
	Key: fixtures.RebalanceTaintKey, Operator: corev1.TolerationOpEqual, Value: "test",
	Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](0),
}}

func divided(preference policyv1alpha1.ReplicaDivisionPreference, weights *policyv1alpha1.ClusterPreferences) *policyv1alpha1.ReplicaSchedulingStrategy {
	return &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: preference,
		WeightPreference:          weights,
	}
}

var (
	dynamicWeight = divided(policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		&policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas})
	aggregated = divided(policyv1alpha1.ReplicaDivisionPreferenceAggregated, nil)
	duplicated = &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}
)

func staticWeights(weights map[string]int64) *policyv1alpha1.ReplicaSchedulingStrategy {
	list := make([]policyv1alpha1.StaticClusterWeight, 0, len(weights))
	for _, name := range []string{"member1", "member2", "member3"} {
		if w, ok := weights[name]; ok {
			list = append(list, policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{name}}, Weight: w})
		}
	}
	return divided(policyv1alpha1.ReplicaDivisionPreferenceWeighted, &policyv1alpha1.ClusterPreferences{StaticWeightList: list})
}

// settle waits until every member's pods are what its Cluster's resource
// summary counts as allocated: the capacity the scheduler will read is then
// the capacity the plan reads.
func settle(ctx context.Context, t *testing.T, cp *harness.ControlPlane, c *fixtures.Clients) {
	t.Helper()
	members := map[string]kubernetes.Interface{}
	for _, m := range cp.Members {
		k, err := kubernetes.NewForConfig(m.Config)
		require.NoError(t, err)
		members[m.Name] = k
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		// An earlier test's namespace still being deleted takes its pods
		// away from the members later.
		namespaces, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ns := range namespaces.Items {
			if ns.DeletionTimestamp != nil {
				last = "namespace " + ns.Name + " is terminating"
				return false, nil
			}
		}
		for name, k := range members {
			pods, err := k.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			var running, pending int64
			for _, p := range pods.Items {
				switch {
				case p.DeletionTimestamp != nil:
					// An earlier test's pods still going away.
					pending++
				case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
				case p.Spec.NodeName == "":
					pending++
				default:
					running++
				}
			}
			cl, err := c.Karmada.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s := cl.Status.ResourceSummary
			if s == nil || pending > 0 {
				last = fmt.Sprintf("%s: %d pods pending or terminating", name, pending)
				return false, nil
			}
			allocated := s.Allocated[corev1.ResourcePods]
			if allocated.Value() != running {
				last = fmt.Sprintf("%s: %d pods running, summary counts %d", name, running, allocated.Value())
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "members did not settle: %s", last)
}

// requireExact fails unless every workload with a single predicted outcome
// got exactly that placement, and every workload where karmada-scheduler's
// two-pass race leaves two possible outcomes got one of the two.
func (c comparison) requireExact(t *testing.T) {
	t.Helper()
	require.Empty(t, c.timing, "a single workload's division does not depend on a batch")
	require.Equal(t, c.total-c.ambiguous, c.singleExact, "workloads with one outcome: %v", c.mismatches)
	require.Equal(t, c.total, c.matched(), c.mismatches)
}

// watchRoom logs the free pods of every member, as its Cluster's resource
// summary reports them, each time it changes until stop is called: what the
// plan and, after it, the scheduler read.
func watchRoom(ctx context.Context, t *testing.T, c *fixtures.Clients) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		last := ""
		for ctx.Err() == nil {
			if now := room(ctx, c); now != last && now != "" {
				t.Logf("%6s free pods: %s", time.Since(start).Round(10*time.Millisecond), now)
				last = now
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// room reads each member's free pods from its resource summary.
func room(ctx context.Context, c *fixtures.Clients) string {
	list, err := c.Karmada.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var parts []string
	for _, cl := range list.Items {
		s := cl.Status.ResourceSummary
		if s == nil {
			continue
		}
		free := s.Allocatable.Pods().Value() - s.Allocated.Pods().Value() - s.Allocating.Pods().Value()
		parts = append(parts, fmt.Sprintf("%s=%d", cl.Name, free))
	}
	return strings.Join(parts, " ")
}

// schedulerPasses logs karmada-scheduler's results for every planned
// binding, from its events: one line per distinct result, so a binding
// scheduled twice in a row shows both passes.
func schedulerPasses(ctx context.Context, t *testing.T, c *fixtures.Clients, plan *rbprinters.Report) {
	t.Helper()
	for _, w := range plan.Workloads {
		events, err := c.Kube.CoreV1().Events(w.Workload.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=ResourceBinding,involvedObject.name=" + w.Binding})
		if err != nil {
			t.Logf("events of %s: %v", w.Binding, err)
			continue
		}
		var lines []string
		for _, e := range events.Items {
			if e.Source.Component == "karmada-scheduler" || strings.HasPrefix(e.Reason, "Schedule") {
				lines = append(lines, fmt.Sprintf("%s x%d (%s..%s): %s", e.Reason, e.Count, e.FirstTimestamp.Format("15:04:05"), e.LastTimestamp.Format("15:04:05"), e.Message))
			}
		}
		t.Logf("scheduler on %s (predicted %s): %s", w.Binding, text(w.Placements.Predicted), strings.Join(lines, " | "))
	}
}
