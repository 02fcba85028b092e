package failback

import (
	"encoding/json"
	"fmt"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/rebalance"
)

// PlannedAnnotation on a failback's record lists every workload the
// failback set out to move, as JSON. A waved record lists its workloads only
// as they start (docs/waves.md), so after a restart the record alone does
// not say which workloads were still to come; the daemon that resumes it
// reads them here.
const PlannedAnnotation = "failback.kubectl-rebalance.io/workloads"

// maxPlannedBytes keeps the annotation well inside the 256 KiB an object's
// annotations may hold in all (about 4,000 workloads). A larger failback is
// recorded without it and, resumed after a restart, finishes the workloads
// its record lists.
const maxPlannedBytes = 192 << 10

// PlannedAnnotations returns the annotations that list ws on a record, or
// nil with the reason when the list is too large to keep there.
func PlannedAnnotations(ws []rebalance.Workload) (map[string]string, error) {
	data, err := json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	if len(data) > maxPlannedBytes {
		return nil, fmt.Errorf("%d workloads take %d bytes, more than the %d a record's annotation may hold", len(ws), len(data), maxPlannedBytes)
	}
	return map[string]string{PlannedAnnotation: string(data)}, nil
}

// Planned returns the workloads rb's PlannedAnnotation lists; false when it
// has none or it cannot be read.
func Planned(rb *appsv1alpha1.WorkloadRebalancer) ([]rebalance.Workload, bool) {
	raw, ok := rb.Annotations[PlannedAnnotation]
	if !ok {
		return nil, false
	}
	var ws []rebalance.Workload
	if err := json.Unmarshal([]byte(raw), &ws); err != nil || len(ws) == 0 {
		return nil, false
	}
	return ws, true
}
