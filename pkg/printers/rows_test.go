package printers

import (
	"bytes"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

var (
	triggeredAt = metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.FixedZone("CEST", 2*60*60)))

	scheduledRow = rebalance.Row{
		Workload:    rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"},
		Binding:     "nginx-deployment",
		Result:      appsv1alpha1.RebalanceSuccessful,
		TriggeredAt: &triggeredAt,
		Observation: rebalance.Observation{Outcome: rebalance.OutcomeScheduled, Reason: "Success", Message: "Binding has been scheduled successfully."},
		Before:      []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 3}},
		After:       []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 1}},
	}
	notFoundRow = rebalance.Row{
		Workload: rebalance.Workload{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "settings"},
		Binding:  "settings-configmap",
		Result:   appsv1alpha1.RebalanceFailed,
		Reason:   appsv1alpha1.RebalanceObjectNotFound,
	}
	ignoredRow = rebalance.Row{
		Workload:    rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"},
		Binding:     "web-deployment",
		Result:      appsv1alpha1.RebalanceSuccessful,
		TriggeredAt: &triggeredAt,
		Observation: rebalance.Observation{Outcome: rebalance.OutcomeIgnored, Reason: rebalance.ReasonTriggerNotAfterLastSchedule, Message: "trigger is not after lastScheduledTime\nsecond line"},
		Before:      []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 1}},
		After:       []workv1alpha2.TargetCluster{{Name: "member1", Replicas: 1}},
	}
	pendingClusterRow = rebalance.Row{
		Workload: rebalance.Workload{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "system:edit"},
		Binding:  "system.edit-clusterrole",
		Message:  "conflict while writing the trigger; retry",
	}
)

func TestPrintRows(t *testing.T) {
	tests := []struct {
		name string
		rows []rebalance.Row
		opts RowPrintOptions
		want string
	}{
		{
			name: "no rows print nothing",
			want: "",
		},
		{
			name: "one namespace: no namespace column",
			rows: []rebalance.Row{scheduledRow, notFoundRow, ignoredRow},
			want: "" +
				"WORKLOAD                RESULT       OUTCOME     BEFORE        AFTER                    REASON\n" +
				"deployment.apps/nginx   Successful   Scheduled   {member1:3}   {member1:2, member2:1}   Success\n" +
				"configmap/settings      Failed       <none>      <none>        <none>                   ReferencedBindingNotFound\n" +
				"deployment.apps/web     Successful   Ignored     {member1:1}   {member1:1}              TriggerNotAfterLastSchedule\n",
		},
		{
			name: "namespace column on request, without headers",
			rows: []rebalance.Row{notFoundRow},
			opts: RowPrintOptions{WithNamespace: true, NoHeaders: true},
			want: "default   configmap/settings   Failed   <none>   <none>   <none>   ReferencedBindingNotFound\n",
		},
		{
			name: "namespaced and cluster-scoped rows get a namespace column",
			rows: []rebalance.Row{scheduledRow, pendingClusterRow},
			want: "" +
				"NAMESPACE   WORKLOAD                                            RESULT       OUTCOME     BEFORE        AFTER                    REASON\n" +
				"default     deployment.apps/nginx                               Successful   Scheduled   {member1:3}   {member1:2, member2:1}   Success\n" +
				"            clusterrole.rbac.authorization.k8s.io/system:edit   Pending      <none>      <none>        <none>                   <none>\n",
		},
		{
			name: "wide",
			rows: []rebalance.Row{scheduledRow, notFoundRow, ignoredRow, pendingClusterRow},
			opts: RowPrintOptions{Wide: true},
			want: "" +
				"NAMESPACE   WORKLOAD                                            RESULT       OUTCOME     BEFORE        AFTER                    BINDING                   TRIGGERED-AT           REASON                        MESSAGE\n" +
				"default     deployment.apps/nginx                               Successful   Scheduled   {member1:3}   {member1:2, member2:1}   nginx-deployment          2024-05-01T08:00:00Z   Success                       Binding has been scheduled successfully.\n" +
				"default     configmap/settings                                  Failed       <none>      <none>        <none>                   settings-configmap        <none>                 ReferencedBindingNotFound     <none>\n" +
				"default     deployment.apps/web                                 Successful   Ignored     {member1:1}   {member1:1}              web-deployment            2024-05-01T08:00:00Z   TriggerNotAfterLastSchedule   trigger is not after lastScheduledTime...\n" +
				"            clusterrole.rbac.authorization.k8s.io/system:edit   Pending      <none>      <none>        <none>                   system.edit-clusterrole   <none>                 <none>                        conflict while writing the trigger; retry\n",
		},
		{
			name: "dry run",
			rows: []rebalance.Row{{Workload: scheduledRow.Workload, Binding: scheduledRow.Binding, Before: scheduledRow.Before,
				Observation: rebalance.Observation{Outcome: rebalance.OutcomeIgnored, Reason: rebalance.ReasonNoPolicy}}},
			opts: RowPrintOptions{DryRun: true, Wide: true},
			want: "" +
				"WORKLOAD                RESULT   OUTCOME   BEFORE        AFTER    BINDING            TRIGGERED-AT   REASON     MESSAGE\n" +
				"deployment.apps/nginx   DryRun   Ignored   {member1:3}   <none>   nginx-deployment   <none>         NoPolicy   <none>\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, PrintRows(&out, tt.rows, tt.opts))
			assert.Equal(t, tt.want, out.String())
		})
	}
}

func TestWorkloadName(t *testing.T) {
	tests := []struct {
		name     string
		workload rebalance.Workload
		want     string
	}{
		{name: "apps group", workload: rebalance.Workload{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}, want: "deployment.apps/nginx"},
		{name: "core group", workload: rebalance.Workload{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"}, want: "configmap/settings"},
		{name: "dotted group", workload: rebalance.Workload{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job", Name: "train"}, want: "job.batch.volcano.sh/train"},
		{name: "unparsable apiVersion", workload: rebalance.Workload{APIVersion: "a/b/c", Kind: "Thing", Name: "x"}, want: "thing/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, WorkloadName(tt.workload))
		})
	}
}
