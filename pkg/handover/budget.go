package handover

import (
	"cmp"
	"fmt"
	"slices"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Budget is how far a move may stray from the workload's replica count, in
// the words of a Deployment's rolling update: MaxSurge replicas above it may
// run at once, and ready replicas may fall MaxUnavailable below the count
// that was ready when the move started. Both are a number or a percentage of
// the binding's spec.replicas; a surge rounds up, unavailability down.
type Budget struct {
	MaxSurge       intstr.IntOrString
	MaxUnavailable intstr.IntOrString
}

// DefaultBudget keeps every replica that was ready available, and stages
// all the replicas a move gains at once.
func DefaultBudget() Budget {
	return Budget{MaxSurge: intstr.FromString("100%"), MaxUnavailable: intstr.FromInt32(0)}
}

// Limits are a Budget resolved for a binding of a given replica count.
type Limits struct {
	Surge, Unavailable int32
}

// Resolve turns the budget into replica counts for replicas.
func (b Budget) Resolve(replicas int32) (Limits, error) {
	surge, err := intstr.GetScaledValueFromIntOrPercent(&b.MaxSurge, int(replicas), true)
	if err != nil {
		return Limits{}, fmt.Errorf("--max-surge %s: %w", b.MaxSurge.String(), err)
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(&b.MaxUnavailable, int(replicas), false)
	if err != nil {
		return Limits{}, fmt.Errorf("--max-unavailable %s: %w", b.MaxUnavailable.String(), err)
	}
	if surge < 0 || unavailable < 0 {
		return Limits{}, fmt.Errorf("--max-surge %s and --max-unavailable %s must not be negative", b.MaxSurge.String(), b.MaxUnavailable.String())
	}
	return Limits{Surge: int32(surge), Unavailable: int32(unavailable)}, nil
}

// Validate checks the budget as given on the command line: a number or a
// percentage, not negative, and not both zero (a move could never start).
func (b Budget) Validate() error {
	l, err := b.Resolve(100)
	if err != nil {
		return err
	}
	if l.Surge == 0 && l.Unavailable == 0 && isZero(b.MaxSurge) && isZero(b.MaxUnavailable) {
		return fmt.Errorf("--max-surge and --max-unavailable cannot both be 0: a move needs room for an extra replica or leave to stop one first")
	}
	return nil
}

func isZero(v intstr.IntOrString) bool {
	return v.String() == "0" || v.String() == "0%"
}

// OneWrite reports whether the budget lets every replica be unavailable:
// the move is then today's single trigger write.
func (l Limits) OneWrite(replicas int32) bool {
	return l.Unavailable >= replicas
}

// placement is spec.clusters as an ordered list of names and their counts.
type placement struct {
	names    []string
	replicas map[string]int32
}

func toPlacement(clusters []workv1alpha2.TargetCluster) placement {
	p := placement{replicas: make(map[string]int32, len(clusters))}
	for _, c := range clusters {
		p.set(c.Name, p.replicas[c.Name]+c.Replicas)
	}
	return p
}

func (p *placement) set(name string, n int32) {
	if _, ok := p.replicas[name]; !ok {
		p.names = append(p.names, name)
	}
	p.replicas[name] = n
}

func (p placement) get(name string) int32 { return p.replicas[name] }

func (p placement) clone() placement {
	c := placement{names: slices.Clone(p.names), replicas: make(map[string]int32, len(p.replicas))}
	for k, v := range p.replicas {
		c.replicas[k] = v
	}
	return c
}

func (p placement) sum() int32 {
	var n int32
	for _, v := range p.replicas {
		n += v
	}
	return n
}

// clusters is the placement as spec.clusters: clusters with no replica left
// out, names sorted as the scheduler writes them.
func (p placement) clusters() []workv1alpha2.TargetCluster {
	out := make([]workv1alpha2.TargetCluster, 0, len(p.names))
	for _, n := range p.names {
		if r := p.replicas[n]; r > 0 {
			out = append(out, workv1alpha2.TargetCluster{Name: n, Replicas: r})
		}
	}
	slices.SortFunc(out, func(a, b workv1alpha2.TargetCluster) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func (p placement) equal(q placement) bool {
	return slices.Equal(p.clusters(), q.clusters())
}

// Covering is the placement to stage for a move from now to every one of
// targets: per cluster the most any of them holds. Staging it starts every
// replica any target adds, whatever the scheduler then picks among them.
func Covering(now []workv1alpha2.TargetCluster, targets ...[]workv1alpha2.TargetCluster) []workv1alpha2.TargetCluster {
	p := toPlacement(now)
	for _, t := range targets {
		for _, c := range toPlacement(t).clusters() {
			if c.Replicas > p.get(c.Name) {
				p.set(c.Name, c.Replicas)
			}
		}
	}
	return p.clusters()
}

// keeping is what every one of targets holds, per cluster: the least of
// them (a cluster missing from one holds none). A staged placement shrinks
// toward it and never below, whichever the scheduler then picks.
func keeping(targets ...[]workv1alpha2.TargetCluster) placement {
	p := placement{replicas: map[string]int32{}}
	for i, t := range targets {
		tp := toPlacement(t)
		if i == 0 {
			p = tp
			continue
		}
		for _, name := range p.names {
			p.replicas[name] = min(p.replicas[name], tp.get(name))
		}
	}
	return p
}

// gaining is cover restricted to the clusters it holds more on than
// original: the only ones a move starts replicas on.
func gaining(original, cover placement) placement {
	p := placement{replicas: map[string]int32{}}
	for _, name := range cover.names {
		if cover.get(name) > original.get(name) {
			p.set(name, cover.get(name))
		}
	}
	return p
}

// grow adds to cur, toward target, as many of the replicas target gains as
// the surge leaves room for, above replicas; clusters in target's order.
// done is set when cur then holds every replica target has.
func grow(cur, target placement, replicas, surge int32) (next placement, done bool) {
	next = cur.clone()
	room := surge - (cur.sum() - replicas)
	done = true
	for _, name := range target.names {
		want := target.get(name) - next.get(name)
		if want <= 0 {
			continue
		}
		add := min(want, max(room, 0))
		if add > 0 {
			next.set(name, next.get(name)+add)
			room -= add
		}
		if add < want {
			done = false
		}
	}
	return next, done
}

// shrink takes from cur the replicas of the clusters target holds fewer on,
// as many as bring the total back to replicas less the unavailable budget;
// clusters in name order.
func shrink(cur, target placement, replicas, unavailable int32) placement {
	next := cur.clone()
	excess := cur.sum() - (replicas - unavailable)
	names := slices.Clone(cur.names)
	slices.Sort(names)
	for _, name := range names {
		if excess <= 0 {
			break
		}
		lose := next.get(name) - target.get(name)
		if lose <= 0 {
			continue
		}
		take := min(lose, excess)
		next.set(name, next.get(name)-take)
		excess -= take
	}
	return next
}

// readyWithin counts the ready replicas that stay once the placement is
// after: per cluster, what is ready there now, at most what after keeps.
func readyWithin(ready map[string]int32, after placement) int32 {
	var n int32
	for name, want := range after.replicas {
		n += min(ready[name], want)
	}
	return n
}
