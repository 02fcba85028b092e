package handover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclient "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// DefaultMoveTimeout bounds a move when Mover.MoveTimeout is zero: long
// enough for replicas that take minutes to start, short enough that a
// leftover of a killed process on another machine is recovered the same
// hour.
const DefaultMoveTimeout = 10 * time.Minute

var (
	ownerOnce sync.Once
	owner     string
)

// DefaultOwner names this process in a ledger: host/pid/random. A process
// of the plugin on the same host tells from the pid whether the owner is
// still running (OwnerGone).
func DefaultOwner() string {
	ownerOnce.Do(func() {
		host, _ := os.Hostname()
		suffix := make([]byte, 3)
		_, _ = rand.Read(suffix)
		owner = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(suffix))
	})
	return owner
}

// OwnerGone reports whether a ledger's owner is a process of this host
// that no longer runs: its move cannot end by itself, so its ledger is
// recovered before its deadline. An owner of another host, or a daemon
// (not host/pid/random), is never taken for gone: its deadline tells.
func OwnerGone(o string) bool {
	parts := strings.Split(o, "/")
	if len(parts) != 3 {
		return false
	}
	host, _ := os.Hostname()
	pid, err := strconv.Atoi(parts[1])
	if parts[0] != host || err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return o != DefaultOwner()
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func (m *Mover) owner() string {
	if m.Owner != "" {
		return m.Owner
	}
	return DefaultOwner()
}

func (m *Mover) moveTimeout() time.Duration {
	if m.MoveTimeout > 0 {
		return m.MoveTimeout
	}
	return DefaultMoveTimeout
}

// decide is Decide for owner self, with a gone owner's ledger taken as
// past its deadline.
func decide(b *workv1alpha2.ResourceBinding, now time.Time, self string) Decision {
	if l, err := ReadLedger(b); err == nil && l != nil && l.Owner != self && OwnerGone(l.Owner) && l.Deadline != nil && now.Before(l.Deadline.Time) {
		b = b.DeepCopy()
		l.Deadline = &metav1.Time{Time: now}
		raw, _ := jsonLedger(*l)
		b.Annotations[LedgerAnnotation] = raw
	}
	return Decide(b, now, self)
}

// Recoverer recovers the bindings that moves of this plugin left behind,
// by Decide's rules. The daemons run it on every pass, `kubectl rebalance
// recover` on demand, and a move on its own binding before it starts.
type Recoverer struct {
	Karmada karmadaclient.Interface
	// Clock gives the server's time for deadlines; without an answer yet,
	// the local time is used.
	Clock *rebalance.ServerClock
	// Owner is the caller's owner name: its own ledgers are never waited
	// for. Empty means DefaultOwner().
	Owner string
	// DryRun sends the writes as server-side dry runs.
	DryRun bool
	// ByDeadline waits for every other owner's deadline, even one of this
	// host that is gone: a daemon recovers only leftovers past their
	// deadline or changed under their move, so that a failback resumed by
	// the next leader finds its own leftover and moves it again (its
	// record already counts the workload done).
	ByDeadline bool
}

// decide is Decide as this recoverer applies it.
func (r *Recoverer) decide(b *workv1alpha2.ResourceBinding, now time.Time) Decision {
	if r.ByDeadline {
		return Decide(b, now, r.self())
	}
	return decide(b, now, r.self())
}

// Leftover is a binding that carries a move's ledger, with what recovery
// would do with it.
type Leftover struct {
	Namespace, Name string
	Workload        workv1alpha2.ObjectReference
	Ledger          *Ledger
	Decision        Decision
	// Age is how long ago the move started; zero when unknown.
	Age time.Duration
	// Binding is the binding as read.
	Binding *workv1alpha2.ResourceBinding
	// Recovered is set by Sweep when it carried Decision out; Err when
	// that failed.
	Recovered bool
	Err       error
}

// String says in one line what a leftover is and what was done with it.
func (lo Leftover) String() string {
	ref := lo.Name
	if lo.Namespace != "" {
		ref = lo.Namespace + "/" + lo.Name
	}
	what := fmt.Sprintf("binding %s held by an unfinished make-before-break move (phase %s", ref, lo.Decision.Phase)
	if lo.Ledger != nil && lo.Ledger.Owner != "" {
		what += ", owner " + lo.Ledger.Owner
	}
	if lo.Age > 0 {
		what += ", started " + lo.Age.Round(time.Second).String() + " ago"
	}
	what += ")"
	switch {
	case lo.Err != nil:
		return fmt.Sprintf("%s: recovering it failed: %v", what, lo.Err)
	case lo.Recovered && lo.Decision.Action == ActionUndo:
		return fmt.Sprintf("%s: undone (%s): %s", what, lo.Decision.Reason, lo.Decision.Message)
	case lo.Recovered:
		return fmt.Sprintf("%s: let go (%s): %s", what, lo.Decision.Reason, lo.Decision.Message)
	}
	return fmt.Sprintf("%s: %s (%s)", what, strings.ToLower(string(lo.Decision.Action)), lo.Decision.Message)
}

func (r *Recoverer) now() time.Time {
	if r.Clock != nil {
		if now, ok := r.Clock.Now(); ok {
			return now
		}
	}
	return time.Now()
}

func (r *Recoverer) self() string {
	if r.Owner != "" {
		return r.Owner
	}
	return DefaultOwner()
}

// Find lists the bindings of namespace (every namespace and the
// cluster-scoped ones when namespace is empty and all is set) that carry
// a ledger, each with what Recover would do with it now.
func (r *Recoverer) Find(ctx context.Context, namespace string, all bool) ([]Leftover, error) {
	var found []*workv1alpha2.ResourceBinding
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := r.Karmada.WorkV1alpha2().ResourceBindings(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			if _, ok := list.Items[i].Annotations[LedgerAnnotation]; ok {
				found = append(found, &list.Items[i])
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	if all {
		opts = metav1.ListOptions{Limit: 500}
		for {
			list, err := r.Karmada.WorkV1alpha2().ClusterResourceBindings().List(ctx, opts)
			if err != nil {
				return nil, err
			}
			for i := range list.Items {
				if _, ok := list.Items[i].Annotations[LedgerAnnotation]; ok {
					found = append(found, asResourceBinding(&list.Items[i]))
				}
			}
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
	}
	now := r.now()
	out := make([]Leftover, 0, len(found))
	for _, b := range found {
		out = append(out, r.leftover(b, now))
	}
	return out, nil
}

func (r *Recoverer) leftover(b *workv1alpha2.ResourceBinding, now time.Time) Leftover {
	lo := Leftover{Namespace: b.Namespace, Name: b.Name, Workload: b.Spec.Resource, Binding: b, Decision: r.decide(b, now)}
	if l, err := ReadLedger(b); err == nil && l != nil {
		lo.Ledger = l
		if !l.Started.IsZero() {
			lo.Age = now.Sub(l.Started.Time)
		}
	}
	return lo
}

// Recover reads the binding again and carries out what Decide says of it
// then: an undo or a let-go, each one guarded write; a binding another
// live process moves is left alone. It returns the decision carried out.
func (r *Recoverer) Recover(ctx context.Context, namespace, name string) (Decision, error) {
	api := bindings{client: r.Karmada, dryRun: r.DryRun}
	b, err := api.get(ctx, namespace, name)
	if err != nil {
		return Decision{}, err
	}
	var d Decision
	_, err = writeGuarded(ctx, api, b, func(b *workv1alpha2.ResourceBinding) ([]byte, error) {
		d = r.decide(b, r.now())
		return decisionPatch(b, d)
	})
	return d, err
}

// decisionPatch is the write that carries out d on b, nil for none.
func decisionPatch(b *workv1alpha2.ResourceBinding, d Decision) ([]byte, error) {
	switch d.Action {
	case ActionUndo:
		l, err := ReadLedger(b)
		if err != nil || l == nil {
			return letGoPatch(b)
		}
		return undoPatch(b, l)
	case ActionLetGo:
		return letGoPatch(b)
	}
	return nil, nil
}

// recoverBinding carries out on b, as this mover, what Decide says: the undo or
// let-go of a move of ours that ends early, or of a leftover a move finds
// on its binding. It returns the binding as written (or as read) and the
// decision carried out; ActionWait means another live process moves it.
func (m *Mover) recoverBinding(ctx context.Context, api bindings, b *workv1alpha2.ResourceBinding) (*workv1alpha2.ResourceBinding, Decision, error) {
	var d Decision
	out, err := writeGuarded(ctx, api, b, func(b *workv1alpha2.ResourceBinding) ([]byte, error) {
		d = decide(b, m.now(), m.owner())
		return decisionPatch(b, d)
	})
	if err == nil && out != nil && m.wrote != nil && (d.Action == ActionUndo || d.Action == ActionLetGo) {
		m.wrote(out)
	}
	return out, d, err
}

// Sweep finds the leftovers in scope (Find) and recovers those Decide says
// to undo or let go: past their deadline, owned by a process that is gone,
// or changed under their move. It returns every leftover with the decision
// carried out (or why it failed in Err). The daemons call it on every pass.
func (r *Recoverer) Sweep(ctx context.Context, namespace string, all bool) ([]Leftover, error) {
	found, err := r.Find(ctx, namespace, all)
	if err != nil {
		return nil, err
	}
	for i, lo := range found {
		if lo.Decision.Action != ActionUndo && lo.Decision.Action != ActionLetGo {
			continue
		}
		d, err := r.Recover(ctx, lo.Namespace, lo.Name)
		if err != nil {
			found[i].Err = err
			continue
		}
		found[i].Decision, found[i].Recovered = d, d.Action == ActionUndo || d.Action == ActionLetGo
	}
	return found, nil
}
