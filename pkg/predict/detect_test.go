package predict

import (
	"context"
	"testing"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	karmadafake "github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

func schedulerWith(command []string, args ...string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: EstimatorNamespace, Name: SchedulerDeployment},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "karmada-scheduler", Command: command, Args: args}}}}},
	}
}

func estimatorService(cluster string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: EstimatorNamespace, Name: EstimatorServicePrefix + cluster}}
}

// Auto detection finds the estimators where standard installs put them: the
// host cluster's Services, and karmada-scheduler's own flag, which decides
// when it can be read.
func TestDetectEstimatorsInTheHostCluster(t *testing.T) {
	localUp := []string{"/bin/karmada-scheduler", "--kubeconfig=/etc/karmada/config", "--enable-scheduler-estimator=true", "--feature-gates=AllAlpha=true,AllBeta=true"}
	tests := []struct {
		name    string
		karmada []runtime.Object
		host    []runtime.Object
		noHost  bool
		want    []string
	}{
		{name: "local-up-karmada: flag on, a Service per member in the host", want: []string{"member1", "member2", "member3"},
			host: []runtime.Object{schedulerWith(localUp), estimatorService("member1"), estimatorService("member2"), estimatorService("member3")}},
		{name: "flag on, Services of two members only: the third is not consulted", want: []string{"member1", "member2"},
			host: []runtime.Object{schedulerWith(localUp), estimatorService("member1"), estimatorService("member2")}},
		{name: "flag on, Services out of sight: every member", want: []string{"member1", "member2", "member3"},
			host: []runtime.Object{schedulerWith(nil, "--enable-scheduler-estimator")}},
		{name: "flag off wins over Services", want: nil,
			host: []runtime.Object{schedulerWith(nil, "--enable-scheduler-estimator=true", "--enable-scheduler-estimator=false"), estimatorService("member1")}},
		{name: "no flag: the default is off", want: nil,
			host: []runtime.Object{schedulerWith([]string{"/bin/karmada-scheduler"}), estimatorService("member1")}},
		{name: "no scheduler Deployment: the host's Services", want: []string{"member3"},
			host: []runtime.Object{estimatorService("member3")}},
		{name: "no host: the Karmada apiserver's Services", noHost: true, want: []string{"member2"},
			karmada: []runtime.Object{estimatorService("member2")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			karmada := karmadafake.NewSimpleClientset(
				&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}},
				&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member2"}},
				&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member3"}},
			)
			s := Source{Karmada: karmada, Kube: kubefake.NewSimpleClientset(tt.karmada...)}
			if !tt.noHost {
				s.Host = kubefake.NewSimpleClientset(tt.host...)
			}
			in, err := s.Read(context.Background(), []rebalance.Target{deploy("a")}, false)
			require.NoError(t, err)
			assert.Equal(t, tt.want, in.Estimated)
		})
	}
}
