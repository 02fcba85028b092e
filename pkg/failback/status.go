package failback

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
)

// The recovery state machine (Step) lives in the daemon's memory, and so do
// the workloads each failure displaced (Displacements): neither the
// records, nor the Lease, nor the events say which cluster is in its
// stabilization window and how long is left. So the leader publishes its
// view in a ConfigMap, for `kubectl rebalance failback status` to read from
// any machine. It is a view, never read back by a daemon: the records stay
// the ledger.

// StateKey is the key of the published state in the ConfigMap's data.
const StateKey = "state.json"

// MaxPublishedWorkloads bounds the displaced workloads listed per cluster
// (the counts are always complete): a ConfigMap holds at most 1 MiB, and a
// failure of a large cluster displaces thousands.
const MaxPublishedWorkloads = 100

// How often the leader looks for a change of its view to publish, and how
// often it publishes an unchanged one, so that a reader can tell a daemon
// that stopped publishing (PublishedAt grows old).
var publishInterval = 2 * time.Second // a variable for tests

// PublishHeartbeat is how often an unchanged view is published again.
const PublishHeartbeat = 30 * time.Second

// PublishedState is the failback daemon's view of the member clusters, as
// its leader last published it.
type PublishedState struct {
	// Holder is the daemon that published it (its Lease identity, or its
	// host name without leader election).
	Holder string `json:"holder"`
	// PublishedAt is when, by the daemon's clock.
	PublishedAt metav1.Time `json:"publishedAt"`
	// Window, Cooldown and DryRun are the daemon's flags.
	Window   metav1.Duration `json:"window"`
	Cooldown metav1.Duration `json:"cooldown"`
	DryRun   bool            `json:"dryRun,omitempty"`
	// Clusters are the member clusters the daemon follows, by name.
	Clusters []PublishedCluster `json:"clusters"`
}

// PublishedCluster is one member cluster as the daemon sees it.
type PublishedCluster struct {
	Name string `json:"name"`
	// Phase is the state machine's: Steady, Down, Stabilizing, FailingBack.
	Phase Phase `json:"phase"`
	// Since is when the phase began (the window's start while Stabilizing).
	Since metav1.Time `json:"since"`
	// Reason says why the cluster is Down.
	Reason string `json:"reason,omitempty"`
	// WindowEnds is when a Stabilizing cluster's window is over; Window
	// is its length, the cooldown when Held.
	WindowEnds *metav1.Time     `json:"windowEnds,omitempty"`
	Window     *metav1.Duration `json:"window,omitempty"`
	// Held: it failed within the cooldown after its last failback, so its
	// next (or current) window lasts the cooldown.
	Held bool `json:"held,omitempty"`
	// Recovery is the recovery's key while Stabilizing or FailingBack.
	Recovery string `json:"recovery,omitempty"`
	// Record is the WorkloadRebalancer of the failback running now.
	Record string `json:"record,omitempty"`
	// LastFailback is when the cluster's last failback fired.
	LastFailback *metav1.Time `json:"lastFailback,omitempty"`
	// Excluded: not among --clusters, never failed back to.
	Excluded bool `json:"excluded,omitempty"`
	// Displaced counts the workloads its failure displaced that are not
	// back, Evicting those Karmada is still evicting; Workloads lists at
	// most MaxPublishedWorkloads of them.
	Displaced int                 `json:"displaced"`
	Evicting  int                 `json:"evicting"`
	Workloads []PublishedWorkload `json:"workloads,omitempty"`
}

// PublishedWorkload is a displaced workload.
type PublishedWorkload struct {
	Workload rebalance.Workload `json:"workload"`
	// Binding is its ResourceBinding, namespace/name.
	Binding  string `json:"binding"`
	Evicting bool   `json:"evicting,omitempty"`
}

// Publisher writes the daemon's view where `failback status` reads it.
type Publisher interface {
	Publish(ctx context.Context, state *PublishedState) error
}

// ConfigMapPublisher publishes the state as the data of a ConfigMap
// (Namespace/Name: the Lease's, by default), created on first use.
type ConfigMapPublisher struct {
	Client          typedcorev1.ConfigMapsGetter
	Namespace, Name string
}

// Publish implements Publisher: a merge patch of the state's key, or the
// ConfigMap's creation when there is none yet.
func (p *ConfigMapPublisher) Publish(ctx context.Context, state *PublishedState) error {
	data, err := json.Marshal(state)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"data": map[string]string{StateKey: string(data)}})
	if err != nil {
		return err
	}
	_, err = p.Client.ConfigMaps(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if !apierrors.IsNotFound(err) {
		return p.explain("patch", err)
	}
	_, err = p.Client.ConfigMaps(p.Namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name,
			Labels: map[string]string{LabelManagedBy: ManagedBy}},
		Data: map[string]string{StateKey: string(data)},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // created meanwhile; the next publication patches it
	}
	return p.explain("create", err)
}

func (p *ConfigMapPublisher) explain(verb string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cannot %s configmap %s/%s, where `kubectl rebalance failback status` reads the daemon's state; check the RBAC of the failback daemon (create, and patch on that name): %w",
		verb, p.Namespace, p.Name, err)
}

// ReadState reads the state published in cm; nil when it holds none.
func ReadState(cm *corev1.ConfigMap) (*PublishedState, error) {
	raw, ok := cm.Data[StateKey]
	if !ok {
		return nil, nil
	}
	var state PublishedState
	if err := json.Unmarshal([]byte(raw), &state); err != nil {
		return nil, fmt.Errorf("configmap %s/%s holds a failback state that cannot be read (%v); a daemon of another release may have written it", cm.Namespace, cm.Name, err)
	}
	return &state, nil
}

// snapshot is the daemon's view now. c.mu must not be held.
func (c *Controller) snapshot(now time.Time) *PublishedState {
	c.mu.Lock()
	defer c.mu.Unlock()
	state := &PublishedState{
		Holder:      c.opts.Identity,
		PublishedAt: metav1.NewTime(now),
		Window:      metav1.Duration{Duration: c.opts.Window},
		Cooldown:    metav1.Duration{Duration: c.opts.Cooldown},
		DryRun:      c.opts.DryRun,
		Clusters:    []PublishedCluster{},
	}
	names := make([]string, 0, len(c.states))
	for name := range c.states {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := c.states[name]
		pc := PublishedCluster{Name: name, Phase: s.Phase, Since: metav1.NewTime(s.Since), Reason: s.Reason, Held: s.Held, Excluded: !c.allowed(name)}
		if s.Phase == PhaseStabilizing || s.Phase == PhaseFailingBack {
			pc.Recovery = s.Key
		}
		if end, ok := WindowEnds(s); ok {
			pc.WindowEnds = &metav1.Time{Time: end}
			pc.Window = &metav1.Duration{Duration: s.Window}
		}
		if !s.LastFailback.IsZero() {
			pc.LastFailback = &metav1.Time{Time: s.LastFailback}
		}
		if run := c.runs[name]; run != nil {
			pc.Record = run.record
		}
		for _, d := range c.displaced.List(name) {
			pc.Displaced++
			if d.Evicting {
				pc.Evicting++
			}
			if len(pc.Workloads) < MaxPublishedWorkloads {
				pc.Workloads = append(pc.Workloads, PublishedWorkload{Workload: d.Workload, Binding: d.Binding, Evicting: d.Evicting})
			}
		}
		state.Clusters = append(state.Clusters, pc)
	}
	return state
}

// publish publishes the daemon's view while ctx (the leadership) lasts:
// each change within publishInterval, an unchanged view every
// PublishHeartbeat. A failure is logged once until a publication works
// again: the daemon's work does not depend on it.
func (c *Controller) publish(ctx context.Context) {
	if c.opts.Publisher == nil {
		return
	}
	ticker := time.NewTicker(publishInterval)
	defer ticker.Stop()
	var (
		last   []byte
		lastAt time.Time
		failed bool
	)
	for {
		now := time.Now()
		state := c.snapshot(now)
		view := *state
		view.PublishedAt = metav1.Time{}
		key, _ := json.Marshal(view)
		if !bytes.Equal(key, last) || now.Sub(lastAt) >= PublishHeartbeat {
			err := c.opts.Publisher.Publish(ctx, state)
			switch {
			case err == nil:
				last, lastAt, failed = key, now, false
			case ctx.Err() == nil && !failed:
				c.log.Warn("cannot publish the daemon's state; `kubectl rebalance failback status` shows what was published before", "err", err)
				failed = true
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// How `failback status` names a cluster's state, in the words of the
// docs: the state machine's phases, with a Steady cluster inside the
// cooldown after its last failback told apart.
const (
	StateHealthy     = "Healthy"
	StateFailed      = "Failed"
	StateRecovering  = "Recovering"
	StateFailingBack = "FailingBack"
	StateCoolingDown = "CoolingDown"
	StateUnknown     = "Unknown"
)

// ClusterView is a member cluster as `failback status` shows it.
type ClusterView struct {
	Name  string      `json:"name"`
	State string      `json:"state"`
	Since metav1.Time `json:"since"`
	// TimeLeft is what is left of a Recovering cluster's window, or of a
	// CoolingDown cluster's cooldown; zero once over.
	TimeLeft *metav1.Duration `json:"timeLeft,omitempty"`
	// Detail says why, in words.
	Detail       string              `json:"detail,omitempty"`
	Recovery     string              `json:"recovery,omitempty"`
	Record       string              `json:"record,omitempty"`
	LastFailback *metav1.Time        `json:"lastFailback,omitempty"`
	Displaced    int                 `json:"displaced"`
	Evicting     int                 `json:"evicting"`
	Workloads    []PublishedWorkload `json:"workloads,omitempty"`
}

// Describe turns the published state into what `failback status` shows,
// at now (the API server's time, which the daemon's clock follows).
func Describe(state *PublishedState, now time.Time) []ClusterView {
	if state == nil {
		return nil
	}
	cooldown := state.Cooldown.Duration
	views := make([]ClusterView, 0, len(state.Clusters))
	for _, c := range state.Clusters {
		v := ClusterView{Name: c.Name, Since: c.Since, Recovery: c.Recovery, Record: c.Record, LastFailback: c.LastFailback,
			Displaced: c.Displaced, Evicting: c.Evicting, Workloads: c.Workloads}
		left := func(end time.Time) *metav1.Duration {
			return &metav1.Duration{Duration: max(end.Sub(now), 0).Round(time.Second)}
		}
		switch c.Phase {
		case PhaseDown:
			v.State, v.Detail = StateFailed, c.Reason
			if c.Held && cooldown > state.Window.Duration {
				v.Detail = joinDetail(v.Detail, fmt.Sprintf("it failed less than --cooldown %s after its last failback: once it recovers, it must stay healthy for %s", cooldown, cooldown))
			}
		case PhaseStabilizing:
			v.State = StateRecovering
			window := state.Window.Duration
			if c.Window != nil {
				window = c.Window.Duration
			}
			v.Detail = fmt.Sprintf("stabilization window %s", window)
			if c.Held && window > state.Window.Duration {
				v.Detail = fmt.Sprintf("window of --cooldown %s: it failed again less than that after its last failback", window)
			}
			if c.WindowEnds != nil {
				v.TimeLeft = left(c.WindowEnds.Time)
				if !c.WindowEnds.After(now) {
					v.Detail += "; over, the failback starts"
				}
			}
		case PhaseFailingBack:
			v.State = StateFailingBack
			if c.Record != "" {
				v.Detail = "failing back, recorded as workloadrebalancer " + c.Record
			}
		case PhaseSteady:
			v.State = StateHealthy
			if c.LastFailback != nil && cooldown > 0 && now.Sub(c.LastFailback.Time) < cooldown {
				v.State = StateCoolingDown
				v.TimeLeft = left(c.LastFailback.Add(cooldown))
				v.Detail = fmt.Sprintf("failed back at %s: a failure within --cooldown %s of it makes its next window last %s",
					c.LastFailback.UTC().Format(time.RFC3339), cooldown, max(cooldown, state.Window.Duration))
			}
			if c.Record != "" {
				v.Detail = joinDetail(v.Detail, "failing back the workloads whose eviction ended late, recorded as workloadrebalancer "+c.Record)
			}
		default:
			v.State = StateUnknown
		}
		if c.Excluded {
			v.Detail = joinDetail(v.Detail, "not failed back to (not in --clusters)")
		}
		views = append(views, v)
	}
	return views
}

func joinDetail(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// Record states in `failback status`.
const (
	RecordRunning     = "Running"
	RecordFinished    = "Finished"
	RecordBudgetSpent = "BudgetSpent"
	RecordInterrupted = "Interrupted"
)

// RecordView is a failback record as `failback status` shows it.
type RecordView struct {
	Name     string       `json:"name"`
	Cluster  string       `json:"cluster"`
	Recovery string       `json:"recovery"`
	FollowUp bool         `json:"followUp,omitempty"`
	Created  metav1.Time  `json:"created"`
	Finished *metav1.Time `json:"finished,omitempty"`
	// State: Running (the daemon's view says so), Finished, BudgetSpent
	// (its failure budget stopped it for good) or Interrupted (a restart,
	// a lost Lease or the cluster failing again stopped it; the leader
	// resumes it while its recovery is the cluster's current one).
	State string `json:"state"`
	// Workloads it set out to move; Pending counts those without a
	// result, unstarted ones included.
	Workloads  int `json:"workloads"`
	Successful int `json:"successful"`
	Failed     int `json:"failed"`
	Pending    int `json:"pending"`
}

// DescribeRecords returns the failback records among items, newest first,
// at most last of them (0: all); running names the records of the
// failbacks the daemon runs now.
func DescribeRecords(items []appsv1alpha1.WorkloadRebalancer, running map[string]bool, last int) []RecordView {
	var views []RecordView
	for i := range items {
		rb := &items[i]
		if rb.Labels[LabelManagedBy] != ManagedBy {
			continue
		}
		v := RecordView{Name: rb.Name, Cluster: rb.Labels[LabelCluster], Recovery: rb.Labels[LabelRecovery], Created: rb.CreationTimestamp, Finished: rb.Status.FinishTime}
		v.FollowUp = v.Cluster != "" && v.Name != RecordName(v.Cluster, v.Recovery)
		status := rb.Status
		if status.ObservedGeneration < rb.Generation {
			status = record.SyncStatus(rb.Status, rb.Spec, rb.Generation)
		}
		listed := map[string]bool{}
		for _, e := range status.ObservedWorkloads {
			listed[WorkloadIdentity(e.Workload)] = true
			switch e.Result {
			case appsv1alpha1.RebalanceSuccessful:
				v.Successful++
			case appsv1alpha1.RebalanceFailed:
				v.Failed++
			default:
				v.Pending++
			}
		}
		v.Workloads = len(status.ObservedWorkloads)
		if planned, ok := Planned(rb); ok {
			for _, w := range planned {
				if !listed[WorkloadIdentity(w)] {
					v.Workloads++
					v.Pending++
				}
			}
		}
		switch {
		case running[rb.Name]:
			v.State = RecordRunning
		case budgetSpent(rb):
			v.State = RecordBudgetSpent
		case unfinished(rb):
			v.State = RecordInterrupted
		default:
			v.State = RecordFinished
		}
		views = append(views, v)
	}
	sort.SliceStable(views, func(i, j int) bool {
		if !views[i].Created.Equal(&views[j].Created) {
			return views[j].Created.Before(&views[i].Created)
		}
		return views[i].Name < views[j].Name
	})
	if last > 0 && len(views) > last {
		views = views[:last]
	}
	return views
}
