package cmd

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/record"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// planAnnotations keeps on a waved record what `resume` needs beyond what
// the record lists: every workload of the run and its pacing. A plan too
// large for an annotation is left out with a warning; resume then continues
// with the workloads the record lists.
func (o *RebalanceOptions) planAnnotations(targets []rebalance.Target) map[string]string {
	opts := record.RunOptions{
		MaxInFlight: o.MaxInFlight, WaitReady: o.WaitReady, ProgressDeadline: metav1.Duration{Duration: o.ProgressDeadline},
		MaxFailures: o.MaxFailures, Pause: metav1.Duration{Duration: o.Pause}, Order: o.Order, TTL: o.ttl,
		Steps: waves.FormatSteps(o.steps),
	}
	out, err := record.PlanAnnotations(rebalance.DistinctWorkloads(targets), opts)
	if err != nil && o.recordFlagsGiven() {
		fmt.Fprintf(o.ErrOut, "warning: the record will not list the workloads not started yet (%v); `kubectl rebalance resume` continues with those it lists\n", err)
	}
	return out
}
