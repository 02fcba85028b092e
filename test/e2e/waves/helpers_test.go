package waves

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/waves/wavestest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
)

// watchTimeline follows the bindings of ns (wavestest.Timeline).
func watchTimeline(ctx context.Context, t *testing.T, c *fixtures.Clients, ns string, ready bool) *wavestest.Timeline {
	t.Helper()
	return wavestest.WatchTimeline(ctx, t, c, ns, ready)
}

// names returns prefix-0 ... prefix-(n-1).
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// deployArgs names deployments as command arguments.
func deployArgs(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, "deploy/"+n)
	}
	return out
}

// setClusterLabel sets (or with an empty value removes) a label on a Cluster.
func setClusterLabel(ctx context.Context, t *testing.T, c *fixtures.Clients, cluster, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, key)
	}
	_, err := c.Karmada.ClusterV1alpha1().Clusters().Patch(ctx, cluster, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err, "label cluster %s", cluster)
}
