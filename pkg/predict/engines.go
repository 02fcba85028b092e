package predict

import (
	"sync"

	"github.com/karmada-io/karmada/pkg/scheduler/core"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"
	"github.com/karmada-io/karmada/pkg/scheduler/framework/plugins"
	frameworkruntime "github.com/karmada-io/karmada/pkg/scheduler/framework/runtime"
)

// engine is the part of a karmadaScheduler that does not depend on the
// clusters: Karmada's generic algorithm and a framework of the same in-tree
// plugins, both reading the clusters through cache.
//
// Engines are kept and handed out again rather than built per scheduler
// because Karmada's framework cannot be let go of: each one it builds
// (NewGenericScheduler builds one, NewFramework another) starts a metrics
// recorder goroutine with a 1,000-slot buffer that runs for the life of the
// process, and nothing outside Karmada's package can stop it. A run that
// predicts every move on its own (one scheduler per workload) thus held two
// goroutines and about 18 KB per workload until it ended, 175 MB at 10,000
// workloads; a daemon held them forever. With engines reused, a process
// holds as many as it ever used at once. The plugins hold no state of their
// own (karmada v1.18's in-tree plugins are empty structs) and the algorithm
// keeps nothing between passes but the cache it is given, so a reused engine
// schedules exactly as a new one.
type engine struct {
	algorithm core.ScheduleAlgorithm
	// framework runs the same plugins outside the algorithm, to see the
	// candidates a release divides differently (release.go).
	framework framework.Framework
	// cache is the one the algorithm was built with; a scheduler that takes
	// the engine points it at its own clusters (snapshotCache.Cache).
	cache *snapshotCache
}

// engines are the engines not in use.
var engines struct {
	sync.Mutex
	free []*engine
	// built counts the engines made, for tests.
	built int
}

// takeEngine hands out an engine no scheduler uses, building one when none
// is free.
func takeEngine() (*engine, error) {
	engines.Lock()
	defer engines.Unlock()
	if n := len(engines.free); n > 0 {
		e := engines.free[n-1]
		engines.free = engines.free[:n-1]
		return e, nil
	}
	c := &snapshotCache{}
	algorithm, err := core.NewGenericScheduler(c, plugins.NewInTreeRegistry())
	if err != nil {
		return nil, err
	}
	fwk, err := frameworkruntime.NewFramework(plugins.NewInTreeRegistry())
	if err != nil {
		return nil, err
	}
	engines.built++
	return &engine{algorithm: algorithm, framework: fwk, cache: c}, nil
}

// giveBack returns e to the free engines. It drops the clusters and
// assumptions e's last scheduler read, so that a free engine holds nothing
// of a prediction and the next scheduler starts from its own clusters only.
func (e *engine) giveBack() {
	e.cache.Cache, e.cache.kept = nil, nil
	engines.Lock()
	defer engines.Unlock()
	engines.free = append(engines.free, e)
}

// enginesBuilt is how many engines this process has built.
func enginesBuilt() int {
	engines.Lock()
	defer engines.Unlock()
	return engines.built
}
