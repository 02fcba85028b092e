package predict

import (
	"context"
	"fmt"
	"testing"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// BenchmarkPredictFleetShape predicts a batch of BenchmarkPlan2000's shape in
// process (no API server): 800 dynamic weights of 3 replicas and 400
// Aggregated of 1, all on member2 and member3 after a failover of member1,
// which has more room than either. What it costs is Karmada's algorithm and
// the batch timing check, apart from reading the API.
func BenchmarkPredictFleetShape(b *testing.B) {
	clusters := []*clusterv1alpha1.Cluster{cluster("member1", 3700), cluster("member2", 2050), cluster("member3", 2050)}
	var bindings []*workv1alpha2.ResourceBinding
	var targets []rebalance.Target
	for i := range 800 {
		name := fmt.Sprintf("dyn-%04d", i)
		bindings = append(bindings, binding(name, dynamic, 3, tc("member2", 2), tc("member3", 1)))
		targets = append(targets, deploy(name))
	}
	for i := range 400 {
		name := fmt.Sprintf("agg-%04d", i)
		bindings = append(bindings, binding(name, aggregated, 1, tc("member2", 1)))
		targets = append(targets, deploy(name))
	}
	in := input(clusters, bindings...)
	b.ResetTimer()
	for range b.N {
		got, err := Predict(context.Background(), in, targets, Options{InFlight: 100})
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != len(targets) {
			b.Fatalf("%d predictions for %d targets", len(got), len(targets))
		}
	}
}
