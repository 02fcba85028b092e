package predict

import (
	"context"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// What was read ahead serves the targets only when its scope covers
// theirs; otherwise the caller is told to read for itself.
func TestReadAheadInput(t *testing.T) {
	deployment := func(ns string) rebalance.Target {
		return rebalance.Target{Workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "x"}}
	}
	tests := []struct {
		name          string
		scope         Scope
		targets       []rebalance.Target
		allNamespaces bool
		wantOK        bool
	}{
		{name: "same namespace", scope: Scope{Namespaces: []string{"a"}}, targets: []rebalance.Target{deployment("a")}, wantOK: true},
		{name: "all namespaces cover any", scope: Scope{Namespaces: []string{metav1.NamespaceAll}}, targets: []rebalance.Target{deployment("a"), deployment("b")}, allNamespaces: true, wantOK: true},
		{name: "another namespace", scope: Scope{Namespaces: []string{"a"}}, targets: []rebalance.Target{deployment("b")}, wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			karmada := karmadafake.NewSimpleClientset(
				&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}},
				&workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x-deployment"}},
			)
			r := StartReadAhead(context.Background(), time.Now().Add(time.Minute), Source{Karmada: karmada, Estimator: EstimatorDisabled}, tt.scope)
			defer r.Stop()
			in, ok, err := r.Input(context.Background(), tt.targets, tt.allNamespaces)
			require.NoError(t, err)
			assert.Equal(t, tt.wantOK, ok)
			if tt.wantOK {
				assert.Len(t, in.Clusters, 1)
				assert.Contains(t, in.Bindings, "a/x-deployment")
			}
		})
	}
}

// A nil ReadAhead (nothing was started) reads nothing and stops quietly.
func TestReadAheadNil(t *testing.T) {
	var r *ReadAhead
	_, ok, err := r.Input(context.Background(), nil, false)
	require.NoError(t, err)
	assert.False(t, ok)
	r.Stop()
}
