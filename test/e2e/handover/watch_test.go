package handover

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// readyWatch is fixtures.ReadyWatch: the fewest ready replicas of one
// Deployment summed over the members, watched.
type readyWatch = fixtures.ReadyWatch

// watchReady starts watching Deployment ns/name on members.
func watchReady(t *testing.T, cp *harness.ControlPlane, members []string, ns, name string) *readyWatch {
	t.Helper()
	kubes := make(map[string]kubernetes.Interface, len(members))
	for _, m := range members {
		kube, err := kubernetes.NewForConfig(cp.Member(m).Config)
		require.NoError(t, err)
		kubes[m] = kube
	}
	return fixtures.WatchReady(t, kubes, ns, name)
}
