package cmd

import (
	"context"
	"fmt"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/run"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// handoverOptions are the flags of make-before-break moves, in the words
// of a Deployment's rolling update.
type handoverOptions struct {
	MaxSurge       string
	MaxUnavailable string
	budget         handover.Budget
}

func (h *handoverOptions) addFlags(cmd *cobra.Command) {
	def := handover.DefaultBudget()
	h.MaxSurge, h.MaxUnavailable = def.MaxSurge.String(), def.MaxUnavailable.String()
	flags := cmd.Flags()
	flags.StringVar(&h.MaxSurge, "max-surge", h.MaxSurge,
		"How many replicas above the workload's count may run while it moves (a number, or a percentage of its replicas, rounded up). The replicas a cluster gains start, and become ready, before another cluster loses any; a smaller surge moves in more steps.")
	flags.StringVar(&h.MaxUnavailable, "max-unavailable", h.MaxUnavailable,
		"How many of the replicas ready before a move may be unavailable during it (a number, or a percentage, rounded down). 0 keeps them all; 100% moves in one write, as a bare trigger does, and Karmada scales the losing clusters down at once.")
}

// validate parses the flags into a budget.
func (h *handoverOptions) validate() error {
	h.budget = handover.Budget{MaxSurge: intstr.Parse(h.MaxSurge), MaxUnavailable: intstr.Parse(h.MaxUnavailable)}
	return h.budget.Validate()
}

// oneWrite reports whether the budget asks for today's one-write moves for
// every workload (--max-unavailable=100%).
func (h *handoverOptions) oneWrite() bool {
	l, err := h.budget.Resolve(1 << 20)
	return err == nil && l.OneWrite(1<<20)
}

// handoverMover builds the make-before-break mover of a run on engine, or
// nil with a warning on stderr when the control plane's Karmada cannot
// suspend scheduling (v1.12), or the flags ask for one-write moves.
func (o *RebalanceOptions) handoverMover(engine *run.Engine) waves.Mover {
	if o.DryRun != rebalance.DryRunNone || o.oneWrite() {
		return nil
	}
	// A release that cannot be told is tried: a first write the API server
	// strips of spec.suspension is undone at once and the workload moves in
	// one write (see handover.ErrNoSuspension).
	if info, err := o.karmadaRelease(); err == nil && info.SuspendsScheduling().Known && !info.SuspendsScheduling().Yes {
		fmt.Fprintf(o.ErrOut, "warning: Karmada %s has no spec.suspension.scheduling on bindings (added in v1.13): moving in one write, so replicas leaving a cluster stop before their replacements are ready\n", info.Range())
		return nil
	}
	oneWrite := &waves.BindingMover{
		Runner: &rebalance.Runner{
			API:      rebalance.NewBindingAPI(engine.Karmada),
			Clock:    engine.Clock,
			Failures: engine.Failures,
			Options:  rebalance.Options{Wait: o.Wait, Workers: 1, Settle: run.SettleWindow, Explain: engine.ExplainMissing},
		},
		WaitReady: o.MaxInFlight > 0 && o.WaitReady,
	}
	return &handover.Mover{
		Karmada:   engine.Karmada,
		Clock:     engine.Clock,
		Predict:   o.predictOne,
		Budget:    o.budget,
		OneWrite:  oneWrite,
		WaitReady: o.MaxInFlight > 0 && o.WaitReady,
	}
}

// predictOne predicts one workload's fresh reschedule from a fresh read of
// the clusters, its binding and the estimators: what a move stages. A held
// binding is predicted without the hold's suspension.
func (o *RebalanceOptions) predictOne(ctx context.Context, t rebalance.Target, held bool) (handover.Prediction, error) {
	source, err := o.predictSource(predict.EstimatorMode(o.Estimator))
	if err != nil {
		return handover.Prediction{}, err
	}
	readCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	in, err := source.Read(readCtx, []rebalance.Target{t}, false)
	if err != nil {
		return handover.Prediction{}, err
	}
	if b := in.Bindings[predict.Key(t.Workload.Namespace, rebalance.BindingNameFor(t.Workload))]; held && b != nil && b.Spec.Suspension != nil {
		// A binding held ahead of its move (the first of a recorded run) is
		// predicted as the scheduler will see it once released.
		b = b.DeepCopy()
		b.Spec.Suspension.Scheduling = nil
		in.Bindings[predict.Key(t.Workload.Namespace, rebalance.BindingNameFor(t.Workload))] = b
	}
	opts := predict.Options{}
	if info, err := o.karmadaRelease(); err == nil {
		opts.Release = &info
	}
	predictions, err := predict.Predict(readCtx, in, []rebalance.Target{t}, opts)
	if err != nil || len(predictions) != 1 {
		return handover.Prediction{}, fmt.Errorf("predicting %s: %v", t.Workload, err)
	}
	p := predictions[0]
	switch p.Verdict {
	case predict.WouldMove, predict.Unchanged, predict.CannotChange:
		out := handover.Prediction{Placements: [][]workv1alpha2.TargetCluster{p.Predicted}}
		if len(p.Alternative) > 0 {
			out.Placements = append(out.Placements, p.Alternative)
		}
		return out, nil
	}
	return handover.Prediction{Why: fmt.Sprintf("%s (%s): %s", p.Verdict, p.Reason, p.Message)}, nil
}
