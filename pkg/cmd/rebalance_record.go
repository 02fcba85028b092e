package cmd

import (
	"fmt"
	"strings"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
)

// recordOptions are the flags that make a run a recorded WorkloadRebalancer.
type recordOptions struct {
	// Name is --name: the WorkloadRebalancer to create, or to reconcile again.
	Name string
	// TTLFlag is --ttl (a duration or seconds); ttl is its value in
	// seconds once validated.
	TTLFlag time.Duration
	ttl     *int32
	// WaitTTL is --wait-ttl: after the run, wait for the TTL and delete.
	// Unless it is given, a run whose record Karmada's controller deletes
	// leaves the deletion to it (waitTTLGiven).
	WaitTTL      bool
	waitTTLGiven bool
	// ServerSide is --server-side: leave the triggers to the in-cluster controller.
	ServerSide bool
}

// addRecordFlags registers the flags of recorded runs.
func (o *RebalanceOptions) addRecordFlags(cmd *cobra.Command) {
	flags := cmd.Flags()
	flags.StringVar(&o.Name, "name", "", "Record the run as a WorkloadRebalancer (apps.karmada.io/v1alpha1) of this name. An existing one that lists the same workloads is reconciled again; one that lists others is left alone.")
	durationVar(flags, &o.TTLFlag, "ttl", 0, "Record the run (with a generated name unless --name is given) and set spec.ttlSecondsAfterFinished: the WorkloadRebalancer is deleted this long after it finished (a duration such as 5m, or seconds such as 300, counted in whole seconds); 0 deletes it at once.")
	flags.BoolVar(&o.WaitTTL, "wait-ttl", true, "With a TTL, keep watching the recorded WorkloadRebalancer after the run, reconcile spec edits, and delete it when the TTL runs out. Unless given, a run whose record Karmada's workloadRebalancer controller is seen to handle leaves the deletion to it, says when it is due, and returns. With false, always return after the run and leave the deletion to Karmada's controller or a later 'kubectl rebalance workloadrebalancer/NAME'.")
	flags.BoolVar(&o.ServerSide, "server-side", false, "Record the run, but leave the triggers to Karmada's in-cluster workloadRebalancer controller: create or update the WorkloadRebalancer and follow the status the controller writes. Fails when no controller records a status within --timeout (at most 30s).")
}

// validateRecord checks the recording flags.
func (o *RebalanceOptions) validateRecord(cmd *cobra.Command) error {
	o.ttl = nil
	o.waitTTLGiven = cmd.Flags().Changed("wait-ttl")
	if cmd.Flags().Changed("ttl") {
		if o.TTLFlag < 0 {
			return cmdutil.UsageErrorf(cmd, "invalid --ttl %s: a ttl cannot be negative; give 0 to delete the workloadrebalancer as soon as it finished, or leave --ttl out to keep it", o.TTLFlag)
		}
		ttl, err := wholeSeconds("ttl", o.TTLFlag, "5m")
		if err != nil {
			return cmdutil.UsageErrorf(cmd, "%v", err)
		}
		o.ttl = &ttl
	}
	if cmd.Flags().Changed("name") {
		if problems := validation.IsDNS1123Subdomain(o.Name); len(problems) > 0 {
			return cmdutil.UsageErrorf(cmd, "invalid --name %q: %s", o.Name, strings.Join(problems, "; "))
		}
	}
	if o.recordFlagsGiven() && o.DryRun != rebalance.DryRunNone {
		return cmdutil.UsageErrorf(cmd, "a dry run records nothing: leave out --dry-run, or --name, --ttl and --server-side")
	}
	return nil
}

// recordFlagsGiven reports whether a flag asks for a recorded run.
func (o *RebalanceOptions) recordFlagsGiven() bool {
	return o.Name != "" || o.ttl != nil || o.ServerSide
}

// rebalancerKindError explains a failure to map the WorkloadRebalancer kind
// of a manifest: the control plane predates the CRD.
func (o *session) rebalancerKindError(err error) error {
	if meta.IsNoMatchError(err) && strings.Contains(err.Error(), appsv1alpha1.ResourceKindWorkloadRebalancer) {
		return o.rebalancerNotServed()
	}
	return err
}

// rebalancerNotServed says that the control plane has no WorkloadRebalancer CRD.
func (o *session) rebalancerNotServed() error {
	return fmt.Errorf("the Karmada control plane behind context %q (%s) does not serve %s: it is older than Karmada v1.10, which introduced WorkloadRebalancers; "+
		"rebalance without --name, --ttl, --server-side or a WorkloadRebalancer manifest (nothing is recorded then), or upgrade Karmada",
		o.contextName(), o.serverURL(), record.RebalancerResource)
}

// printRecorded writes the rows (or the recorded object) to stdout and the
// summary to stderr.
func (o *RebalanceOptions) printRecorded(obj *appsv1alpha1.WorkloadRebalancer, rows []rebalance.Row) error {
	switch o.OutputFormat {
	case "", "wide":
		opts := rbprinters.RowPrintOptions{Wide: o.OutputFormat == "wide", NoHeaders: o.NoHeaders, WithNamespace: o.AllNamespaces}
		if err := rbprinters.PrintRows(o.Out, rows, opts); err != nil {
			return err
		}
	default:
		if err := o.printer.PrintObj(printable(obj), o.Out); err != nil {
			return fmt.Errorf("printing workloadrebalancer %s failed: %w", obj.Name, err)
		}
	}
	fmt.Fprintln(o.ErrOut, rbprinters.Summarize(rows).String())
	return nil
}

// printable returns a copy of a WorkloadRebalancer read from the server as
// kubectl get prints it: with its kind, without managed fields.
func printable(obj *appsv1alpha1.WorkloadRebalancer) *appsv1alpha1.WorkloadRebalancer {
	out := obj.DeepCopy()
	out.APIVersion, out.Kind = appsv1alpha1.SchemeGroupVersion.String(), appsv1alpha1.ResourceKindWorkloadRebalancer
	out.ManagedFields = nil
	return out
}
