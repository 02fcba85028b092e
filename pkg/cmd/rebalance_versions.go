package cmd

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/karmadaversion"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// karmadaRelease detects, once per command, the Karmada release behind the
// context (pkg/karmadaversion). It is asked only where behaviour differs
// between releases, so a plain run pays no request for it.
func (o *RebalanceOptions) karmadaRelease() (karmadaversion.Info, error) {
	o.releaseOnce.Do(func() {
		disco, err := o.factory.ToDiscoveryClient()
		if err != nil {
			o.releaseErr = err
			return
		}
		o.release, o.releaseErr = karmadaversion.Detect(disco)
		if o.releaseErr == nil {
			warnNewerThanTested(o.ErrOut, o.release)
		}
	})
	return o.release, o.releaseErr
}

// warnNewerThanTested says, once per command, that the control plane runs a
// release newer than the newest one the plugin was tested on.
func warnNewerThanTested(w io.Writer, info karmadaversion.Info) {
	if info.Oldest.Minor <= karmadaversion.NewestTested.Minor {
		return
	}
	fmt.Fprintf(w, "warning: %s, newer than %s, the newest release kubectl-rebalance was tested on; predictions follow the newer release where its changes are known (a triggered reschedule restarts from the first clusterAffinities group, karmada#5425) and %s otherwise\n",
		releaseName(info, nil), karmadaversion.NewestTested, karmadaversion.NewestTested)
}

// releaseName says which release was detected and from what, for a message.
func releaseName(info karmadaversion.Info, err error) string {
	if err != nil {
		return fmt.Sprintf("the Karmada release could not be told (%v)", err)
	}
	return fmt.Sprintf("this control plane runs Karmada %s (%s)", info.Range(), info.Evidence)
}

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

// print warns, in plain words, what the rebalance does to the noted bindings
// on the detected release.
func (a *affinityNotes) print(w io.Writer, detect func() (karmadaversion.Info, error)) {
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
	info, err := detect()
	restarts := info.RescheduleRestartsAffinityGroups()
	for _, n := range notes {
		prefix := fmt.Sprintf("warning: binding %s was placed by its clusterAffinities group %q, not the first group %q", n.binding, n.current, n.first)
		switch {
		case err == nil && restarts.Known && !restarts.Yes:
			fmt.Fprintf(w, "%s: %s, which reschedules from the group a workload is in, so this rebalance keeps it in %q and cannot bring it back to %q (Karmada v1.19 changed that, karmada#5425)\n",
				prefix, releaseName(info, err), n.current, n.first)
		case err == nil && restarts.Known:
			fmt.Fprintf(w, "%s: %s, which reschedules from the first group, so this rebalance may have moved it back to %q\n",
				prefix, releaseName(info, err), n.first)
		default:
			fmt.Fprintf(w, "%s: Karmada v1.19 and newer reschedule from the first group and may move it back to %q, v1.18 and older keep it in %q; %s\n",
				prefix, n.first, n.current, releaseName(info, err))
		}
	}
}

// controllerDeletes reports whether Karmada's workloadRebalancer controller
// can be left to delete the finished workloadrebalancer name when its ttl
// runs out. Karmada v1.12's cannot: then the command says so and deletes it
// itself, as it does without --server-side.
func (o *RebalanceOptions) controllerDeletes(name string) bool {
	info, err := o.karmadaRelease()
	if err != nil {
		return true
	}
	if deletes := info.ControllerDeletesAfterTTL(); deletes.Known && !deletes.Yes {
		fmt.Fprintf(o.ErrOut, "note: %s, whose workloadRebalancer controller does not delete a finished workloadrebalancer when its ttl runs out "+
			"(fixed in v1.13, karmada#5989); kubectl rebalance deletes workloadrebalancer %s itself then\n", releaseName(info, nil), name)
		return false
	}
	return true
}
