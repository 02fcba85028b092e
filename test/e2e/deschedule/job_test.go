package deschedule

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/cmd"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/deschedule/deschedtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
)

// job is the seed example's workload as a Job: parallelism pods of nginx,
// 2 CPUs each, labelled app=NAME. nginx serves until it is stopped, so the
// pods run until the Job is deleted; Karmada divides the parallelism.
func job(ns, name string, parallelism int32) *batchv1.Job {
	tpl := fixtures.Deployment(ns, name, parallelism).Spec.Template
	tpl.Spec.Containers[0].Name, tpl.Spec.Containers[0].Image = "nginx", "nginx"
	tpl.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(parallelism),
			Template:    tpl,
		},
	}
}

// memberJob describes the member's copy of Job name, for the messages of
// waits that depend on its controller.
func (e *env) memberJob(member, name string) string {
	j, err := e.Member(member).BatchV1().Jobs(e.NS).Get(e.Ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var conds []string
	for _, c := range j.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	return fmt.Sprintf("job parallelism %d active %d ready %d succeeded %d failed %d conditions %v",
		ptr.Deref(j.Spec.Parallelism, 0), j.Status.Active, ptr.Deref(j.Status.Ready, 0), j.Status.Succeeded, j.Status.Failed, conds)
}

// waitJobPods waits until the pods of Job name in member are exactly want,
// describing the member's Job while they are not.
func (e *env) waitJobPods(member, name string, want podCounts) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("pods of job %s in %s", name, member), func() (bool, string) {
		got := e.Pods(member, name)
		return got == want, fmt.Sprintf("%+v, want %+v; %s", got, want, e.memberJob(member, name))
	})
}

// TestDescheduleSeedExampleJob is the seed's descheduler example with a Job
// in place of the Deployment: three nginx pods run in parallel, divided over
// the members; cordon every node of member1 and delete the pod there. The
// member's job controller replaces it, member1 cannot place the new pod, and
// one pass moves that replica to another member for good. Karmada does not reflect a Job's ready count, so member1's is
// unknown, which never changes a Job's result (see docs/deschedule.md).
func TestDescheduleSeedExampleJob(t *testing.T) {
	// Not parallel: cordoning member1 must not disturb the other tests.
	e := namespacedEnv(t, "seed-job")
	const name, binding = "nginx", "nginx-job"
	e.kindPolicy("batch/v1", "Job", name, deschedtest.DynamicWeight("member1", "member2", "member3"))
	_, err := e.C.Kube.BatchV1().Jobs(e.NS).Create(e.Ctx, job(e.NS, name, 3), metav1.CreateOptions{})
	require.NoError(t, err)

	// The job controller replaces the deleted pod, which member1 cannot place.
	want := e.strandInMember1(binding, name, e.waitJobPods)

	// --kinds without jobs leaves the binding out of scope.
	code, report := e.RunJSON("--kinds", "deployments.apps,statefulsets.apps", "--unschedulable-threshold", "1s")
	require.Equal(t, cmd.ExitOK, code)
	assert.Zero(t, report.Summary.Listed)

	// Jobs are in the default --kinds.
	code, stdout, stderr := e.Run("-n", e.NS, "--unschedulable-threshold", "1s")
	require.Equal(t, cmd.ExitOK, code, stderr)
	assert.Regexp(t, fmt.Sprintf(`%s\s+member1\s+%d\s+<unknown>\s+%d\s+0\s+evict`, binding, want, want), stdout)
	assert.Contains(t, stderr, fmt.Sprintf("descheduled 1 binding(s) moving %d replica(s)", want))

	e.movedOffMember1(binding, name, e.waitJobPods)

	// A later pass finds nothing to do: nothing bounced back.
	code, report = e.RunJSON("--kinds", "jobs.batch", "--unschedulable-threshold", "1s")
	require.Equal(t, cmd.ExitOK, code)
	assert.Equal(t, 1, report.Summary.Listed)
	assert.Zero(t, report.Summary.EvictedReplicas)
	for _, b := range report.Bindings {
		assert.NotEqual(t, deschedule.OutcomeBouncedBack, b.Outcome, "%s", b.Name)
	}
}
