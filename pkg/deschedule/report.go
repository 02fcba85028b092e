package deschedule

import (
	"encoding/json"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ReportGroupVersion and ReportKind identify a PassReport in JSON and YAML.
// They name a document format of this tool, not an API served anywhere.
var ReportGroupVersion = schema.GroupVersion{Group: "deschedule.kubectl-rebalance.io", Version: "v1alpha1"}

// ReportKind is the kind of a PassReport.
const ReportKind = "DeschedulePass"

// PassReport is the stable, documented form of a PassResult printed by
// `-o json` and `-o yaml`. Fields are only ever added within a version.
type PassReport struct {
	metav1.TypeMeta `json:",inline"`
	// StartTime and EndTime bound the pass.
	StartTime metav1.Time `json:"startTime"`
	EndTime   metav1.Time `json:"endTime"`
	// DryRun is none, client or server.
	DryRun DryRun `json:"dryRun"`
	// UnschedulableThreshold is how long a pod had to be unschedulable to
	// count, as a Go duration ("5m0s").
	UnschedulableThreshold string `json:"unschedulableThreshold"`
	// Summary holds the pass's totals.
	Summary ReportSummary `json:"summary"`
	// Bindings holds every candidate binding, ordered by namespace and name.
	Bindings []BindingReport `json:"bindings"`
	// Skipped holds the listed bindings that are not candidates, with why.
	Skipped []SkippedBinding `json:"skipped"`
	// ClusterErrors holds the member clusters that could not be listed.
	ClusterErrors []ClusterError `json:"clusterErrors,omitempty"`
	// TemplateErrors holds the template kinds that could not be listed.
	TemplateErrors []TemplateError `json:"templateErrors,omitempty"`
}

// TemplateError is a template kind that could not be listed.
type TemplateError struct {
	Kind  string `json:"kind"`
	Error string `json:"error"`
}

// ReportSummary is the totals of a pass.
type ReportSummary struct {
	// Listed counts the bindings in scope, excluded namespaces left out.
	Listed int `json:"listed"`
	// Candidates counts the bindings the descheduler examined.
	Candidates int `json:"candidates"`
	// Descheduled counts the bindings written (or, in a dry run, to be written).
	Descheduled int `json:"descheduled"`
	// EvictedReplicas sums the replicas moved (or to be moved).
	EvictedReplicas int32 `json:"evictedReplicas"`
	// Blocked, Limited and Failed count bindings by those outcomes.
	Blocked int `json:"blocked"`
	Limited int `json:"limited"`
	Failed  int `json:"failed"`
	// BouncedBack counts the binding clusters left alone because the
	// scheduler put the replicas an earlier pass evicted straight back.
	BouncedBack int `json:"bouncedBack"`
	// Stopped is true when the pass was stopped before all writes were done.
	Stopped bool `json:"stopped"`
	// Text is the one-line summary printed under the table.
	Text string `json:"text"`
}

// BindingReport is one candidate binding in a PassReport.
type BindingReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Resource is the binding's resource template.
	Resource ResourceReport `json:"resource"`
	// Outcome is descheduled, dry-run, unchanged, blocked, limited,
	// bounced-back, skipped, failed or stopped.
	Outcome Outcome `json:"outcome"`
	// EvictedReplicas is the number of replicas moved (or to be moved).
	EvictedReplicas int32 `json:"evictedReplicas"`
	// Message is the event message of a descheduled binding, or why
	// nothing was written.
	Message string `json:"message,omitempty"`
	// Error is the failed write's error.
	Error string `json:"error,omitempty"`
	// EventError says why an event could not be recorded.
	EventError string `json:"eventError,omitempty"`
	// Retried is true when a conflict made the pass re-read the binding.
	Retried bool `json:"retried,omitempty"`
	// Clusters holds one entry per target cluster, in spec.clusters order.
	Clusters []ClusterReport `json:"clusters"`
}

// ResourceReport names a resource template.
type ResourceReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
}

// ClusterReport is one target cluster of a binding in a PassReport.
type ClusterReport struct {
	Cluster string `json:"cluster"`
	// Spec is the replicas assigned before the pass.
	Spec int32 `json:"spec"`
	// Ready is the reported ready replicas; null when the cluster has not
	// reported any.
	Ready *int32 `json:"ready"`
	// Unschedulable is the number of pods unschedulable past the threshold;
	// null when the cluster was not counted (all replicas ready, or the
	// count failed).
	Unschedulable *int32 `json:"unschedulable"`
	// New is the replicas assigned after the pass.
	New int32 `json:"new"`
	// Evicted is Spec - New.
	Evicted int32 `json:"evicted"`
	// Action is ready, none, evict, over-spec, count-failed, blocked, limited or bounced-back.
	Action Action `json:"action"`
	// Error is why the cluster could not be counted.
	Error string `json:"error,omitempty"`
}

// ClusterError is a member cluster that could not be listed.
type ClusterError struct {
	Cluster string `json:"cluster"`
	Error   string `json:"error"`
}

var _ runtime.Object = (*PassReport)(nil)

// DeepCopyObject implements runtime.Object.
func (r *PassReport) DeepCopyObject() runtime.Object {
	if r == nil {
		return nil
	}
	raw, err := json.Marshal(r)
	if err != nil {
		panic(err) // a PassReport only holds JSON-safe values
	}
	out := &PassReport{}
	if err := json.Unmarshal(raw, out); err != nil {
		panic(err)
	}
	return out
}

// Report converts r into its printable, stable form.
func (r *PassResult) Report() *PassReport {
	report := &PassReport{
		TypeMeta:               metav1.TypeMeta{APIVersion: ReportGroupVersion.String(), Kind: ReportKind},
		StartTime:              metav1.NewTime(r.Start),
		EndTime:                metav1.NewTime(r.End),
		DryRun:                 r.DryRun,
		UnschedulableThreshold: r.UnschedulableThreshold.String(),
		Summary: ReportSummary{
			Listed:          r.Listed,
			Candidates:      len(r.Bindings),
			Descheduled:     r.Descheduled,
			EvictedReplicas: r.EvictedReplicas,
			Blocked:         r.count(OutcomeBlocked),
			Limited:         r.count(OutcomeLimited),
			Failed:          r.Failed,
			BouncedBack:     r.bouncedBack(),
			Stopped:         r.Stopped,
			Text:            r.Summary(),
		},
		Bindings: make([]BindingReport, 0, len(r.Bindings)),
		Skipped:  append([]SkippedBinding{}, r.Skipped...),
	}
	if report.DryRun == "" {
		report.DryRun = DryRunNone
	}
	for i := range r.Bindings {
		report.Bindings = append(report.Bindings, bindingReport(&r.Bindings[i]))
	}
	clusters := make([]string, 0, len(r.ClusterErrors))
	for c := range r.ClusterErrors {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	for _, c := range clusters {
		report.ClusterErrors = append(report.ClusterErrors, ClusterError{Cluster: c, Error: r.ClusterErrors[c].Error()})
	}
	kinds := make([]string, 0, len(r.TemplateErrors))
	for k := range r.TemplateErrors {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		report.TemplateErrors = append(report.TemplateErrors, TemplateError{Kind: k, Error: r.TemplateErrors[k].Error()})
	}
	return report
}

func bindingReport(br *BindingResult) BindingReport {
	out := BindingReport{
		Namespace: br.Namespace,
		Name:      br.Name,
		Resource: ResourceReport{
			APIVersion: br.Resource.APIVersion, Kind: br.Resource.Kind, Namespace: br.Resource.Namespace, Name: br.Resource.Name,
		},
		Outcome:         br.Outcome,
		EvictedReplicas: br.Evicted,
		Message:         br.Message,
		Error:           errorText(br.Err),
		EventError:      errorText(br.EventErr),
		Retried:         br.Retried,
		Clusters:        make([]ClusterReport, 0, len(br.Rows)),
	}
	for _, row := range br.Rows {
		c := ClusterReport{
			Cluster: row.Cluster,
			Spec:    row.Spec,
			Ready:   copyInt32(row.Ready),
			New:     row.New,
			Evicted: row.Evicted(),
			Action:  row.Action,
			Error:   errorText(row.Err),
		}
		if row.Counted {
			c.Unschedulable = copyInt32(&row.Unschedulable)
		}
		out.Clusters = append(out.Clusters, c)
	}
	return out
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
