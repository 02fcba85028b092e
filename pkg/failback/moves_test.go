package failback

import (
	"context"
	"testing"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// TestMovesNotedOnTheRecord: the record of a failback says how each
// workload moved (staged before the release, one write and why, stopped
// and undone), and a resumed failback adds to what it says.
func TestMovesNotedOnTheRecord(t *testing.T) {
	at := metav1.Now()
	w := func(name string) rebalance.Workload {
		return rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: name}
	}
	staged := []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 3}}
	tests := []struct {
		name       string
		row        rebalance.Row
		runWhy     string
		count, how string
	}{
		{"staged and released", rebalance.Row{Workload: w("a"), TriggeredAt: &at, Staged: staged},
			"", "madeBeforeBreak", "made before break: staged {member1:1, member2:3} before the release"},
		{"one write, the mover says why", rebalance.Row{Workload: w("b"), TriggeredAt: &at, OneWrite: "no cluster gains a replica, so there is nothing to start first"},
			"", "oneWrite", "one write: no cluster gains a replica, so there is nothing to start first"},
		{"one write, the run says why", rebalance.Row{Workload: w("c"), TriggeredAt: &at},
			"--max-unavailable 100% lets every replica be unavailable", "oneWrite", "one write: --max-unavailable 100% lets every replica be unavailable"},
		{"stopped before the release", rebalance.Row{Workload: w("d"), Message: "interrupted while the gained replicas were starting; make-before-break move stopped before the release: the staged replicas were removed"},
			"", "stopped", "stopped before the release, undone: interrupted while the gained replicas were starting; make-before-break move stopped before the release: the staged replicas were removed"},
		{"not moved", rebalance.Row{Workload: w("e")}, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			count, how := MoveOf(tt.row, tt.runWhy)
			assert.Equal(t, tt.count, count)
			assert.Equal(t, tt.how, how)
		})
	}

	name := RecordName("member1", "k")
	client := karmadafake.NewSimpleClientset(&appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: name}})
	l := Ledger{Client: client.AppsV1alpha1().WorkloadRebalancers()}
	rows := []rebalance.Row{tests[0].row, tests[1].row, tests[3].row, tests[4].row}
	m, err := l.NoteMoves(context.Background(), name, rows, "")
	require.NoError(t, err)
	assert.Equal(t, "1 made before break, 1 in one write, 1 stopped before the release", m.Text())

	// Resumed: d moves now, made before break; it counts once, as it moved last.
	again := rebalance.Row{Workload: w("d"), TriggeredAt: &at, Staged: staged}
	m, err = l.NoteMoves(context.Background(), name, []rebalance.Row{again}, "")
	require.NoError(t, err)
	assert.Equal(t, "2 made before break, 1 in one write", m.Text())
	rb, err := l.Client.Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	noted := ReadMoves(rb.Annotations)
	assert.Equal(t, Moves{MadeBeforeBreak: 2, OneWrite: 1, Workloads: map[string]string{
		"Deployment/shop/a": "made before break: staged {member1:1, member2:3} before the release",
		"Deployment/shop/b": "one write: no cluster gains a replica, so there is nothing to start first",
		"Deployment/shop/d": "made before break: staged {member1:1, member2:3} before the release",
	}}, noted)
}
