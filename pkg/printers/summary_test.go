package printers

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

func TestPrintSummary(t *testing.T) {
	waitingRow := scheduledRow
	waitingRow.Observation = rebalance.Observation{Outcome: rebalance.OutcomeWaiting}
	failedRow := scheduledRow
	failedRow.Observation = rebalance.Observation{Outcome: rebalance.OutcomeSchedulingFailed}

	tests := []struct {
		name string
		rows []rebalance.Row
		want string
	}{
		{name: "nothing", want: "0 workloads: 0 successful, 0 failed, 0 pending; 0 rescheduled, 0 ignored\n"},
		{name: "one", rows: []rebalance.Row{scheduledRow}, want: "1 workload: 1 successful, 0 failed, 0 pending; 1 rescheduled, 0 ignored\n"},
		{
			name: "mixed",
			rows: []rebalance.Row{scheduledRow, notFoundRow, ignoredRow, pendingClusterRow},
			want: "4 workloads: 2 successful, 1 failed, 1 pending; 1 rescheduled, 1 ignored\n",
		},
		{
			name: "scheduling failures and waiting appear when present",
			rows: []rebalance.Row{scheduledRow, waitingRow, failedRow, failedRow},
			want: "4 workloads: 4 successful, 0 failed, 0 pending; 1 rescheduled, 0 ignored, 2 scheduling failed, 1 waiting\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, PrintSummary(&out, tt.rows))
			assert.Equal(t, tt.want, out.String())
		})
	}
}
