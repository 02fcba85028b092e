package deschedule

import "github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"

// env is one test's namespace on the shared control plane; what it can do
// is shared with the noestimator tests.
type env struct{ *deschedtest.Env }

type podCounts = deschedtest.PodCounts
