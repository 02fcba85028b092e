package handover

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/e2e/handover/batchtest"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/fixtures"
	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

// BenchmarkBatchMove moves a batch of one-replica workloads (20 by default,
// REBALANCE_BATCH_WORKLOADS), whose pods take 20 s to start, back to member1
// after its failover and recovery, twice: with every flag at its default
// (make-before-break) and with --max-unavailable=100% (one write each, what
// a bare trigger does). It reports each wall time until every workload runs
// its replica ready again, their ratio, the requests by verb and how many
// workloads were without a ready replica at some moment.
func BenchmarkBatchMove(b *testing.B) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("REBALANCE_BATCH_WORKLOADS")); err == nil && v > 0 {
		n = v
	}
	cp := harness.Require(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c := fixtures.TestClients(b, cp.Karmada)
	const ns = "bench-batch"
	names := batchtest.Fleet(ctx, b, cp, c, ns, n, 20*time.Second)
	for i := 0; i < b.N; i++ {
		batchtest.FailedOver(ctx, b, cp, c, ns, names)
		mbb := batchtest.Move(ctx, b, cp, c, ns, names)
		batchtest.FailedOver(ctx, b, cp, c, ns, names)
		one := batchtest.Move(ctx, b, cp, c, ns, names, "--max-unavailable=100%")
		if mbb.Run.Code != 0 || one.Run.Code != 0 {
			b.Fatalf("exit codes: make-before-break %d, one write %d", mbb.Run.Code, one.Run.Code)
		}
		b.ReportMetric(mbb.Took.Seconds(), "mbb-s")
		b.ReportMetric(one.Took.Seconds(), "one-write-s")
		b.ReportMetric(mbb.Took.Seconds()/one.Took.Seconds(), "ratio")
		b.ReportMetric(float64(len(mbb.Dipped)), "mbb-without-ready")
		b.ReportMetric(float64(len(one.Dipped)), "one-write-without-ready")
		b.Logf("FIGURES batch of %d: make-before-break %s (requests %v, %d without a ready replica), one write %s (requests %v, %d without a ready replica): ratio %.2f",
			n, mbb.Took.Round(time.Second), mbb.Requests, len(mbb.Dipped), one.Took.Round(time.Second), one.Requests, len(one.Dipped), mbb.Took.Seconds()/one.Took.Seconds())
	}
}
