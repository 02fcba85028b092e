package predict

import (
	"context"
	"fmt"
	"testing"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// memberSized is cluster with what a joined member's Cluster object carries
// besides: the API enablements of a Kubernetes member (about 25 group
// versions) and the nine default resource models with their node counts.
// Their size is what copying a Cluster costs.
func memberSized(name string, pods int64) *clusterv1alpha1.Cluster {
	c := cluster(name, pods)
	c.Status.APIEnablements = nil
	for i := range 25 {
		gv := clusterv1alpha1.APIEnablement{GroupVersion: fmt.Sprintf("group%02d.example.io/v1", i)}
		for j := range 4 {
			gv.Resources = append(gv.Resources, clusterv1alpha1.APIResource{Name: fmt.Sprintf("kind%ds", j), Kind: fmt.Sprintf("Kind%d", j)})
		}
		c.Status.APIEnablements = append(c.Status.APIEnablements, gv)
	}
	c.Status.APIEnablements = append(c.Status.APIEnablements, clusterv1alpha1.APIEnablement{GroupVersion: "apps/v1",
		Resources: []clusterv1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}, {Name: "statefulsets", Kind: "StatefulSet"}}})
	for grade := range 9 {
		low, high := int64(1)<<grade>>1, int64(1)<<grade
		c.Spec.ResourceModels = append(c.Spec.ResourceModels, clusterv1alpha1.ResourceModel{Grade: uint(grade), Ranges: []clusterv1alpha1.ResourceModelRange{
			{Name: corev1.ResourceCPU, Min: *resource.NewQuantity(low, resource.DecimalSI), Max: *resource.NewQuantity(high, resource.DecimalSI)},
			{Name: corev1.ResourceMemory, Min: *resource.NewQuantity(low<<32, resource.BinarySI), Max: *resource.NewQuantity(high<<32, resource.BinarySI)},
		}})
		c.Status.ResourceSummary.AllocatableModelings = append(c.Status.ResourceSummary.AllocatableModelings, clusterv1alpha1.AllocatableModeling{Grade: uint(grade)})
	}
	c.Status.ResourceSummary.Allocated = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(10, resource.DecimalSI)}
	return c
}

// BenchmarkPredictFleetShape predicts a batch of BenchmarkPlan2000's shape in
// process (no API server): 800 dynamic weights of 3 replicas and 400
// Aggregated of 1, all on member2 and member3 after a failover of member1,
// which has more room than either. What it costs is Karmada's algorithm and
// the batch timing check, apart from reading the API.
func BenchmarkPredictFleetShape(b *testing.B) {
	clusters := []*clusterv1alpha1.Cluster{memberSized("member1", 3700), memberSized("member2", 2050), memberSized("member3", 2050)}
	bindings, targets := recoveryBatch(800, 3, 400, 1)
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
