package predict

import (
	"context"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
)

// maxWorkers bounds the goroutines that predict a batch side by side.
const maxWorkers = 4

// rowsPerWorker is the fewest rows worth a goroutine, and a scheduler, of
// their own: setting one up costs about as much as scheduling a few rows.
const rowsPerWorker = 64

// workersFor is how many goroutines share n independent rows: one per
// processor the process may use, at most maxWorkers, fewer for a small batch.
func workersFor(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), maxWorkers, n/rowsPerWorker))
}

// clone returns a scheduler of its own over copies of s's clusters as they
// are now. Its assumption cache starts empty: clones serve the default mode,
// where no decision assumes anything.
func (s *karmadaScheduler) clone() (*karmadaScheduler, error) {
	clusters := make([]*clusterv1alpha1.Cluster, 0, len(s.clusters))
	for _, name := range slices.Sorted(maps.Keys(s.clusters)) {
		clusters = append(clusters, s.clusters[name])
	}
	return newKarmadaScheduler(clusters)
}

// schedulers returns s and workers-1 clones of it; the caller gives the
// clones' engines back (done). Karmada's scheduler and
// its snapshot are not shared between goroutines, and the timing check
// changes the clusters' summaries while it tries the members' reports.
func (s *karmadaScheduler) schedulers(workers int) ([]*karmadaScheduler, error) {
	out := []*karmadaScheduler{s}
	for range workers - 1 {
		c, err := s.clone()
		if err != nil {
			for _, made := range out[1:] {
				made.done()
			}
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// eachRow calls do for every row index below n, on as many goroutines as
// scheds, each with its own scheduler. Rows are taken in order, so a
// cancelled ctx stops the batch at about the same row on every goroutine.
func eachRow(ctx context.Context, scheds []*karmadaScheduler, n int, do func(s *karmadaScheduler, i int)) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, s := range scheds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				do(s, i)
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}
