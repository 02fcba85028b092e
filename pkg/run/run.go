package run

import (
	"context"
	"maps"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	eventrecord "k8s.io/client-go/tools/record"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// SettleWindow is how long a waiting run lingers after the scheduler
// answered, to report the placement of a second scheduling pass.
const SettleWindow = 2 * time.Second

// Request is one rebalance: which workloads, and how.
type Request struct {
	// Targets are the workloads, in input order, possibly repeated.
	Targets []rebalance.Target
	// Rebalancers are the WorkloadRebalancer manifests the targets came
	// from; a run driven by exactly one of them records it.
	Rebalancers []*appsv1alpha1.WorkloadRebalancer
	// DryRun writes nothing (client) or sends every write with dryRun=All
	// (server). A dry run is never recorded and never waved.
	DryRun rebalance.DryRun
	// Wait waits for the scheduler's answer to every trigger.
	Wait bool
	// Workers bounds the requests in flight.
	Workers int
	// Timeout is the budget of the run as the user gave it, for messages
	// and for the passes of a followed TTL; Deadline is when it runs out.
	Timeout  time.Duration
	Deadline time.Time
	// Waves, when set, paces the run (at most MaxInFlight workloads in
	// flight); nil triggers every workload at once.
	Waves *Waves
	// Mover, when set, moves each workload of a run all at once that is
	// not a dry run (plain, or recorded client-side) one by one, Workers
	// at a time, instead of writing every trigger in one batch: the
	// make-before-break move of package handover, built by the caller.
	Mover waves.MakeBeforeBreak
	// Record asks for a recorded run (see Recording).
	Record Recording
	// Hooks hear what happens during the run.
	Hooks Hooks
}

// Waves paces a waved run.
type Waves struct {
	waves.Options
	// Given starts the workloads in the order of Targets instead of a
	// WorkloadRebalancer's order.
	Given bool
	// Mover is the make-before-break move of each workload (package
	// handover). Nil triggers a fresh reschedule and waits for it (and,
	// with WaitReady, for the replicas), as waves.BindingMover does.
	Mover waves.MakeBeforeBreak
	// Steps are approval gates (--steps) of a recorded run: after each
	// step the run waits for `kubectl rebalance approve` (gates.go).
	Steps []waves.Step
}

// Recording makes a run a recorded WorkloadRebalancer. The zero value
// records nothing, unless a single WorkloadRebalancer manifest drives the
// run.
type Recording struct {
	// Name of the WorkloadRebalancer; generated when empty.
	Name string
	// TTL is its spec.ttlSecondsAfterFinished; nil leaves it without one.
	TTL *int32
	// WaitTTL waits after the run for the TTL and deletes the record.
	WaitTTL bool
	// LeaveTTLToController, with WaitTTL, returns after the run instead of
	// waiting when Karmada's workloadRebalancer controller is seen to
	// handle the finished record and its release deletes it when the TTL
	// runs out: the run says when that is due. (The controller is one of
	// karmada-controller-manager's default controllers, so on a default
	// control plane a run need not stay for a long TTL.)
	LeaveTTLToController bool
	// ServerSide leaves the triggers to Karmada's in-cluster controller and
	// follows the status it writes.
	ServerSide bool
	// Labels go on a WorkloadRebalancer the run creates for a selection.
	Labels map[string]string
	// Annotations go on it too (the failback daemon lists there the
	// workloads of a failback, which a waved record only lists as they
	// start).
	Annotations map[string]string
}

func (r Recording) asked() bool {
	return r.Name != "" || r.TTL != nil || r.ServerSide
}

// Hooks are told what happens during a run. Every one may be nil.
type Hooks struct {
	// Progress hears how far each phase of a run all at once got.
	Progress func(rebalance.Progress)
	// Waves hears every change of a waved run's counts.
	Waves func(waves.Status)
	// Notice hears one line worth telling a person (a record created, a
	// warning, why waves stopped).
	Notice func(string)
	// Rows hears the rows of the run once they are known, before a
	// recorded run follows its TTL; an error it returns ends the run.
	Rows func(*Result) error
}

func (h Hooks) notice(line string) {
	if h.Notice != nil {
		h.Notice(line)
	}
}

// Result is how a run ended.
type Result struct {
	// Rows has one row per distinct target, in controller order (or the
	// record's status order).
	Rows []rebalance.Row
	// TriggerTime and FinishTime are those of a run that was not recorded.
	TriggerTime metav1.Time
	FinishTime  *metav1.Time
	// Written counts the bindings whose trigger was written.
	Written int
	// Failed and Pending count the rows that failed and those still
	// without an answer.
	Failed, Pending int
	// Waves is how a waved run ended; nil for a run all at once.
	Waves *waves.Result
	// Record is the WorkloadRebalancer of a recorded run, as last read;
	// nil when the run was not recorded.
	Record *appsv1alpha1.WorkloadRebalancer
	// Interrupted is set when the context ended (Ctrl-C) before the run
	// was over: what was done is in the rows.
	Interrupted bool
	// TTLCutShort is set when a recorded run's wait for its TTL ended
	// before the record was deleted.
	TTLCutShort bool
}

// Stopped reports why a waved run left workloads unstarted; StopNone when
// it did not.
func (r *Result) Stopped() waves.StopReason {
	if r == nil || r.Waves == nil {
		return waves.StopNone
	}
	return r.Waves.Stop
}

// IncompleteError is a run that ended (Ctrl-C, the deadline) before it
// wrote anything: the caller may run it again as it is.
type IncompleteError struct{ Err error }

func (e *IncompleteError) Error() string { return e.Err.Error() }
func (e *IncompleteError) Unwrap() error { return e.Err }

// Engine runs rebalances against one Karmada control plane. Its clients and
// helpers are shared by every run.
type Engine struct {
	// Karmada reaches the bindings and WorkloadRebalancers; Clock is fed by
	// its answers (NewClockedClient).
	Karmada karmadaclient.Interface
	Clock   *rebalance.ServerClock
	// Failures, when set, reads the scheduler's failure events.
	Failures rebalance.FailureEvents
	// Explain, when set, rewrites an error of the API server into words
	// that say what to do.
	Explain func(error) error
	// ExplainMissing, when set, says why a workload has no binding.
	ExplainMissing func(context.Context, rebalance.Target) string
	// Release, when set, detects the Karmada release of the control plane;
	// asked only where behaviour depends on it.
	Release func() (karmadaversion.Info, error)
	// WithDeadline derives the context the request's Deadline bounds;
	// nil means context.WithDeadline.
	WithDeadline func(context.Context, time.Time) (context.Context, context.CancelFunc)
	// Events, when set, records the history of every recorded run as
	// Kubernetes Events on its WorkloadRebalancer (see events.go); the
	// caller flushes it before it exits.
	Events eventrecord.EventRecorder
}

// NewClockedClient builds a Karmada client whose responses feed a server
// clock, so that trigger times come from the API server, never from this
// machine.
func NewClockedClient(config *rest.Config) (karmadaclient.Interface, *rebalance.ServerClock, error) {
	clock := rebalance.NewServerClock()
	config = rest.CopyConfig(config)
	config.Wrap(clock.Wrap)
	client, err := karmadaclient.NewForConfig(config)
	if err != nil {
		return nil, nil, err
	}
	return client, clock, nil
}

// Run rebalances the request's targets: recorded when the request asks for
// it (Recorded), otherwise all at once or in waves. It returns an error for
// what kept the run from doing its work (an *IncompleteError when nothing
// was written); failed and pending workloads are in the result.
func (e *Engine) Run(ctx context.Context, req Request) (*Result, error) {
	plan, err := req.recordPlan()
	if err != nil {
		return nil, err
	}
	if plan != nil {
		return e.runRecorded(ctx, req, plan)
	}
	return e.runPlain(ctx, req)
}

// Recorded reports whether the run is recorded as a WorkloadRebalancer, or
// why it cannot be.
func (r Request) Recorded() (bool, error) {
	plan, err := r.recordPlan()
	return plan != nil, err
}

// waved reports whether the run goes in waves. A dry run writes nothing and
// waits for nothing, so it shows every workload at once.
func (r Request) waved() bool {
	return r.Waves != nil && r.Waves.MaxInFlight > 0 && r.DryRun == rebalance.DryRunNone
}

func (e *Engine) withDeadline(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if e.WithDeadline != nil {
		return e.WithDeadline(ctx, deadline)
	}
	return context.WithDeadline(ctx, deadline)
}

func (e *Engine) explain(err error) error {
	if e.Explain == nil || err == nil {
		return err
	}
	return e.Explain(err)
}

// runner is the template of the rebalance.Runner of a run.
func (e *Engine) runner(req Request, api rebalance.BindingAPI) *rebalance.Runner {
	return &rebalance.Runner{
		API:      api,
		Clock:    e.Clock,
		Failures: e.Failures,
		Lister:   waves.NewBindingLister(e.Karmada),
		Options: rebalance.Options{
			DryRun:   req.DryRun,
			Wait:     req.Wait,
			Workers:  req.Workers,
			Settle:   SettleWindow,
			Progress: req.Hooks.Progress,
			Explain:  e.ExplainMissing,
		},
	}
}

// waveEngine builds the engine of a waved run.
func (e *Engine) waveEngine(req Request) *waves.Engine {
	opts := req.Waves.Options
	opts.Progress = req.Hooks.Waves
	if req.Waves.Given {
		rank := make(map[rebalance.Workload]int, len(req.Targets))
		for i, t := range req.Targets {
			if _, ok := rank[t.Workload]; !ok {
				rank[t.Workload] = i
			}
		}
		opts.Order = func(a, b rebalance.Workload) int { return rank[a] - rank[b] }
	}
	return &waves.Engine{Handover: req.Waves.Mover, Lister: waves.NewBindingLister(e.Karmada), Options: opts}
}

func cloneLabels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	return maps.Clone(labels)
}
