package run

import (
	"context"
	"fmt"
	"sort"
	"sync"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/waves"
)

// affinityNotes is a BindingAPI that notes the bindings a run reads which
// sit in a later clusterAffinities group than the first: whether a
// rebalance can take them back to the first group depends on the release.
// It also stops a trigger the server silently dropped.
type affinityNotes struct {
	rebalance.BindingAPI

	mu    sync.Mutex
	later map[string]affinityNote // by namespace/name
}

type affinityNote struct {
	binding, current, first string
}

func newAffinityNotes(api rebalance.BindingAPI) *affinityNotes {
	return &affinityNotes{BindingAPI: api, later: map[string]affinityNote{}}
}

// Get reads the binding and notes its affinity group.
func (a *affinityNotes) Get(ctx context.Context, namespace, name string) (*rebalance.Binding, error) {
	b, err := a.BindingAPI.Get(ctx, namespace, name)
	if err == nil && b != nil {
		a.observe(b)
	}
	return b, err
}

// PatchTrigger writes the trigger, and refuses the answer of a server whose
// ResourceBinding has no spec.rescheduleTriggeredAt (Karmada older than
// v1.10 prunes it): the write "succeeds" but nothing would ever reschedule.
func (a *affinityNotes) PatchTrigger(ctx context.Context, w rebalance.TriggerWrite) (*rebalance.Binding, error) {
	b, err := a.BindingAPI.PatchTrigger(ctx, w)
	if err == nil && b != nil && b.Spec.RescheduleTriggeredAt == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API server kept no spec.rescheduleTriggeredAt on binding %s: its ResourceBinding has no such field, "+
			"so this control plane runs a Karmada older than v1.10, which cannot reschedule on request; kubectl rebalance supports Karmada %s and newer",
			bindingRef(w.Namespace, w.Name), karmadaversion.OldestSupported))
	}
	return b, err
}

// observing returns mover with its make-before-break moves noting, too,
// the bindings they start from: the mover reads them itself, so the run's
// warnings about clusterAffinities groups (report) cover its workloads as
// they cover those moved in one write. Nil stays nil.
func (a *affinityNotes) observing(mover waves.MakeBeforeBreak) waves.MakeBeforeBreak {
	if mover == nil {
		return nil
	}
	return mover.WithObserver(func(b *workv1alpha2.ResourceBinding) { a.observe(rebalance.BindingFromObject(b)) })
}

func (a *affinityNotes) observe(b *rebalance.Binding) {
	p := b.Spec.Placement
	if p == nil || len(p.ClusterAffinities) < 2 {
		return
	}
	current, first := b.Status.SchedulerObservedAffinityName, p.ClusterAffinities[0].AffinityName
	if current == "" || current == first {
		return
	}
	key := bindingRef(b.Namespace, b.Name)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.later[key] = affinityNote{binding: key, current: current, first: first}
}

func bindingRef(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// report warns, in plain words, what the rebalance does to the noted
// bindings on the detected release.
func (a *affinityNotes) report(notice func(string), detect func() (karmadaversion.Info, error)) {
	a.mu.Lock()
	notes := make([]affinityNote, 0, len(a.later))
	for _, n := range a.later {
		notes = append(notes, n)
	}
	a.mu.Unlock()
	if len(notes) == 0 {
		return
	}
	sort.Slice(notes, func(i, j int) bool { return notes[i].binding < notes[j].binding })
	info, err := karmadaversion.Info{}, fmt.Errorf("no release detection")
	if detect != nil {
		info, err = detect()
	}
	restarts := info.RescheduleRestartsAffinityGroups()
	for _, n := range notes {
		prefix := fmt.Sprintf("warning: binding %s was placed by its clusterAffinities group %q, not the first group %q", n.binding, n.current, n.first)
		switch {
		case err == nil && restarts.Known && !restarts.Yes:
			notice(fmt.Sprintf("%s: %s, which reschedules from the group a workload is in, so this rebalance keeps it in %q and cannot bring it back to %q (Karmada v1.19 changed that, karmada#5425)",
				prefix, karmadaversion.Describe(info, err), n.current, n.first))
		case err == nil && restarts.Known:
			notice(fmt.Sprintf("%s: %s, which reschedules from the first group, so this rebalance may have moved it back to %q",
				prefix, karmadaversion.Describe(info, err), n.first))
		default:
			notice(fmt.Sprintf("%s: Karmada v1.19 and newer reschedule from the first group and may move it back to %q, v1.18 and older keep it in %q; %s",
				prefix, n.first, n.current, karmadaversion.Describe(info, err)))
		}
	}
}

// controllerDeletes reports whether Karmada's workloadRebalancer controller
// can be left to delete the finished workloadrebalancer name when its ttl
// runs out. Karmada v1.12's cannot: then the run says so and deletes it
// itself, as it does without ServerSide.
func (e *Engine) controllerDeletes(name string, notice func(string)) bool {
	if e.Release == nil {
		return true
	}
	info, err := e.Release()
	if err != nil {
		return true
	}
	if deletes := info.ControllerDeletesAfterTTL(); deletes.Known && !deletes.Yes {
		notice(fmt.Sprintf("note: %s, whose workloadRebalancer controller does not delete a finished workloadrebalancer when its ttl runs out "+
			"(fixed in v1.13, karmada#5989); kubectl rebalance deletes workloadrebalancer %s itself then", karmadaversion.Describe(info, nil), name))
		return false
	}
	return true
}
