package cmd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/predict"
)

// TestMoveReadsAreShared: the moves of a run read the clusters, estimators
// and members once, and again only once the read is older than
// moveReadsMaxAge; a failed read is not kept.
func TestMoveReadsAreShared(t *testing.T) {
	now := time.Unix(1000, 0)
	reads, fail := 0, false
	r := &moveReads{now: func() time.Time { return now }, read: func(context.Context) (predict.Input, error) {
		reads++
		if fail {
			return predict.Input{}, errors.New("boom")
		}
		return predict.Input{Estimated: []string{"member1"}}, nil
	}}
	ctx := context.Background()
	for range 12 {
		in, err := r.input(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{"member1"}, in.Estimated)
	}
	assert.Equal(t, 1, reads, "twelve moves at once, one read")

	now = now.Add(moveReadsMaxAge - time.Second)
	_, err := r.input(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, reads, "still fresh")

	now = now.Add(2 * time.Second)
	fail = true
	_, err = r.input(ctx)
	assert.Error(t, err)
	fail = false
	_, err = r.input(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, reads, "read again once stale; a failed read is not kept")
}
