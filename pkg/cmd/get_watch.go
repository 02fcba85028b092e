package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	rbprinters "github.com/kubectl-rebalance/kubectl-rebalance/pkg/printers"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/watch"
)

var watchColumns = []metav1.TableColumnDefinition{
	{Name: "Namespace", Type: "string", Description: "The workload's namespace; empty when cluster-scoped."},
	{Name: "Workload", Type: "string", Description: "The resource template, as kind.group/name."},
	{Name: "State", Type: "string", Description: "waiting, held, staging, settling, released, done, failed or ignored."},
	{Name: "Before", Type: "string", Description: "The placement before its move, when known."},
	{Name: "After", Type: "string", Description: "The placement its move heads for, or got."},
	{Name: "Ready", Type: "string", Description: "Ready/wanted replicas on the clusters a staging move adds replicas to."},
	{Name: "Reason", Type: "string", Description: "Why the workload is in its state."},
}

var watchRecordColumn = metav1.TableColumnDefinition{Name: "Rebalancer", Type: "string", Description: "The WorkloadRebalancer of the run."}

// runWatch follows one record until its run is finished, or every record
// until interrupted, printing rows as they change (kubectl get -w).
func (o *GetOptions) runWatch(ctx context.Context) error {
	f := &watch.Follower{Client: o.karmada, Name: o.Name, SyncTimeout: o.Timeout}
	if o.Name != "" {
		reqCtx, cancel := deadlineContext(ctx, time.Now().Add(o.Timeout))
		rb, err := o.client.Get(reqCtx, o.Name, metav1.GetOptions{})
		defer cancel()
		if apierrors.IsNotFound(err) && !isUnservedResource(err) {
			return withExitCode(ExitError, fmt.Errorf("workloadrebalancer %s not found; run `kubectl rebalance get` to list them", o.Name))
		}
		if err != nil {
			return withExitCode(ExitError, o.requestError(ctx, reqCtx, "get", err))
		}
		// Watch only the bindings of the run's namespaces.
		f.Scope = watch.Workloads(rb)
	}
	columns := watchColumns
	if o.Name == "" {
		columns = append([]metav1.TableColumnDefinition{watchRecordColumn}, watchColumns...)
	}
	// One printer for the whole watch: it prints the header once.
	printer := printers.NewTablePrinter(printers.PrintOptions{NoHeaders: o.NoHeaders, Wide: o.OutputFormat == "wide"})
	var (
		final    *watch.Update
		printErr error
		gone     bool
	)
	err := f.Run(ctx, func(u watch.Update) bool {
		if u.Deleted {
			fmt.Fprintf(o.ErrOut, "workloadrebalancer %s was deleted\n", u.Record.Name)
			if o.Name != "" {
				gone = true
				return false
			}
			return true
		}
		if len(u.Changed) > 0 {
			table := &metav1.Table{ColumnDefinitions: columns}
			for _, row := range u.Changed {
				cells := []any{row.Workload.Namespace, rbprinters.WorkloadName(row.Workload), string(row.State),
					placementText(row.Before), placementText(row.After), noneIfEmpty(row.Ready), noneIfEmpty(row.Reason)}
				if o.Name == "" {
					cells = append([]any{u.Record.Name}, cells...)
				}
				table.Rows = append(table.Rows, metav1.TableRow{Cells: cells})
			}
			if printErr = printer.PrintObj(table, o.Out); printErr != nil {
				return false
			}
		}
		if u.SummaryChanged {
			fmt.Fprintln(o.ErrOut, u.Summary.String())
		}
		if o.Name != "" && u.Summary.Finished {
			final = &u
			return false
		}
		return true
	})
	var syncErr *watch.SyncError
	switch {
	case printErr != nil:
		return withExitCode(ExitError, printErr)
	case errors.As(err, &syncErr):
		base := &session{ConfigFlags: o.ConfigFlags, guard: o.guard}
		return withExitCode(ExitError, fmt.Errorf("%v: the API server at %s (context %q) did not answer in time (--timeout); check that it is up and that you may list and watch workloadrebalancers, resourcebindings and clusterresourcebindings", err, base.serverURL(), base.contextName()))
	case err != nil:
		return withExitCode(ExitError, o.requestError(ctx, ctx, "watch", err))
	case gone:
		return withExitCode(ExitError, fmt.Errorf("workloadrebalancer %s was deleted before its run finished; the triggers already written stay", o.Name))
	case final != nil:
		fmt.Fprintln(o.Out)
		return o.printOne(final.Record)
	case o.Name != "":
		return withExitCode(ExitPending, fmt.Errorf("interrupted before the run of workloadrebalancer %s finished; `kubectl rebalance get %s -w` follows it again", o.Name, o.Name))
	}
	return nil
}

// placementText shows a placement as the scheduler's events do, or
// <unknown>.
func placementText(p []workv1alpha2.TargetCluster) string {
	if p == nil {
		return "<unknown>"
	}
	return rebalance.FormatPlacement(p)
}
