package cmd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/handover"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
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
	MoveTimeout    time.Duration
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
	durationVar(flags, &h.MoveTimeout, "move-timeout", handover.DefaultMoveTimeout,
		"How long one make-before-break move may hold its binding, from its first write to its release, whatever --timeout says. The binding records it as the move's deadline: past it, `kubectl rebalance recover` and the deschedule and failback daemons recover a move whose process is gone.")
}

// validate parses the flags into a budget.
func (h *handoverOptions) validate() error {
	if h.MoveTimeout < 10*time.Second {
		return fmt.Errorf("--move-timeout must be at least 10s, got %s", h.MoveTimeout)
	}
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
func (o *RebalanceOptions) handoverMover(engine *run.Engine, targets []rebalance.Target) waves.MakeBeforeBreak {
	if o.DryRun != rebalance.DryRunNone {
		return nil
	}
	return o.session.handoverMover(engine, targets, moveSettings{
		handover:  &o.handoverOptions,
		wait:      o.Wait,
		waitReady: o.MaxInFlight > 0 && o.WaitReady,
		allAtOnce: o.MaxInFlight == 0,
	})
}

// moveSettings are what a run's make-before-break mover takes from the
// command beyond its targets: kubectl rebalance and the failback daemon
// both build their movers with session.handoverMover.
type moveSettings struct {
	handover *handoverOptions
	// wait waits for the scheduler's answer to a one-write move.
	wait bool
	// waitReady, in waves, makes a move done only once the replicas of its
	// new placement are ready.
	waitReady bool
	// allAtOnce: the run moves every workload at once, not in waves.
	allAtOnce bool
}

// handoverMover builds the make-before-break mover of a run on engine, or
// nil when the moves go in one write: the budget asks for it
// (--max-unavailable=100%), or the control plane's Karmada cannot suspend
// scheduling (v1.12), which a warning on ErrOut says.
func (o *session) handoverMover(engine *run.Engine, targets []rebalance.Target, s moveSettings) waves.MakeBeforeBreak {
	if s.handover.oneWrite() {
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
			Options:  rebalance.Options{Wait: s.wait, Workers: 1, Settle: run.SettleWindow, Explain: engine.ExplainMissing},
		},
		WaitReady: s.waitReady,
	}
	return handover.New(handover.Config{
		Karmada:     engine.Karmada,
		Clock:       engine.Clock,
		Reads:       predictReads{o},
		Targets:     targets,
		Budget:      s.handover.budget,
		MoveTimeout: s.handover.MoveTimeout,
		OneWrite:    oneWrite,
		WaitReady:   s.waitReady,
		AllAtOnce:   s.allAtOnce,
	})
}

// predictReads is where the predictions of a run's moves read from
// (handover.Reads): the command's kubeconfig and --estimator, and the
// release it detected.
type predictReads struct{ o *session }

func (r predictReads) Source() (handover.Source, error) {
	return r.o.predictSource(predict.EstimatorMode(r.o.Estimator))
}

func (r predictReads) Release() (karmadaversion.Info, error) { return r.o.karmadaRelease() }
