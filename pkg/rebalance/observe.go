package rebalance

import (
	"context"
	"fmt"
	"math"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Observe fills in what the scheduler made of the triggers someone else
// (the in-cluster controller) wrote for the rows with a Successful result,
// reading their bindings until each has an answer or ctx ends; unanswered
// rows stay Waiting. at is the rebalancer's creationTimestamp.
func Observe(ctx context.Context, api BindingAPI, at metav1.Time, rows []Row) {
	written := make(map[int]int64)
	settled := make(map[int]bool)
	// Read every half second at first, then less often, up to every 5s.
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: math.MaxInt32}
	// Until ctx ends, every 5s once the cap is reached.
	_ = backoff.DelayFunc().Until(ctx, true, false, func(ctx context.Context) (bool, error) {
		waiting := 0
		for i := range rows {
			row := &rows[i]
			if row.Result != appsv1alpha1.RebalanceSuccessful || settled[i] {
				continue
			}
			b, err := api.Get(ctx, row.Workload.Namespace, row.Binding)
			switch {
			case apierrors.IsNotFound(err):
				row.Observation = ignored(ReasonBindingDeleted, BindingRef(row.Workload)+" was deleted")
				settled[i] = true
				continue
			case err != nil:
				if ctx.Err() != nil {
					return true, nil
				}
				row.Observation = Observation{Outcome: OutcomeWaiting, Reason: ReasonAwaitingScheduler, Message: fmt.Sprintf("reading %s failed: %v", BindingRef(row.Workload), err)}
				waiting++
				continue
			}
			row.After = b.Spec.Clusters
			trigger := b.Spec.RescheduleTriggeredAt
			if trigger == nil || truncate(trigger.Time).Before(truncate(at.Time)) {
				row.Observation = Observation{Outcome: OutcomeWaiting, Reason: ReasonAwaitingScheduler, Message: "the binding does not hold the trigger yet"}
				waiting++
				continue
			}
			row.TriggeredAt = trigger
			if _, ok := written[i]; !ok {
				written[i] = b.Generation
			}
			obs := ClassifyOutcome(b.Generation, b.Spec, b.Status, written[i], *trigger)
			if obs.Outcome == OutcomeWaiting {
				if pre := PreTriggerCheck(b.Labels, b.Spec, b.Status, *trigger); pre.Reason == ReasonNoPolicy {
					obs = pre
				}
			}
			row.Observation = obs
			if obs.Outcome == OutcomeWaiting {
				waiting++
			} else {
				settled[i] = true
			}
		}
		return waiting == 0, nil
	})
}
