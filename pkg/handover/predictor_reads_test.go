package handover

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
	r := &moveReads{now: func() time.Time { return now }, read: func(context.Context, readNeeds) (predict.Input, error) {
		reads++
		if fail {
			return predict.Input{}, errors.New("boom")
		}
		return predict.Input{Estimated: []string{"member1"}}, nil
	}}
	ctx := context.Background()
	for range 12 {
		in, err := r.input(ctx, false)
		require.NoError(t, err)
		assert.Equal(t, []string{"member1"}, in.Estimated)
	}
	assert.Equal(t, 1, reads, "twelve moves at once, one read")

	now = now.Add(moveReadsMaxAge - time.Second)
	_, err := r.input(ctx, false)
	require.NoError(t, err)
	assert.Equal(t, 1, reads, "still fresh")

	now = now.Add(2 * time.Second)
	fail = true
	_, err = r.input(ctx, false)
	assert.Error(t, err)
	fail = false
	_, err = r.input(ctx, false)
	require.NoError(t, err)
	assert.Equal(t, 3, reads, "read again once stale; a failed read is not kept")
}

// TestMoveReadsListWhatMovesNeed: the bindings are listed only once a move
// looked for its binding in the read (a run that follows its bindings with
// the waves' watches never does), and the members only once a move's
// placement depends on free capacity, added to a young read without
// renewing it.
func TestMoveReadsListWhatMovesNeed(t *testing.T) {
	now := time.Unix(1000, 0)
	var asked []readNeeds
	membersRead := 0
	r := &moveReads{
		now: func() time.Time { return now },
		read: func(_ context.Context, need readNeeds) (predict.Input, error) {
			asked = append(asked, need)
			return predict.Input{Estimated: []string{"member1"}}, nil
		},
		members: func(_ context.Context, in *predict.Input) {
			membersRead++
			in.Accurate = map[string]predict.AccurateEstimator{"member1": nil}
		},
	}
	ctx := context.Background()
	_, err := r.input(ctx, false)
	require.NoError(t, err)
	in, err := r.input(ctx, true)
	require.NoError(t, err)
	assert.Contains(t, in.Accurate, "member1")
	_, err = r.input(ctx, true)
	require.NoError(t, err)
	assert.Equal(t, []readNeeds{{}}, asked, "one read, without bindings or members")
	assert.Equal(t, 1, membersRead, "members added once to the young read")

	r.wantBindings.Store(true)
	now = now.Add(moveReadsMaxAge)
	_, err = r.input(ctx, true)
	require.NoError(t, err)
	assert.Equal(t, []readNeeds{{}, {bindings: true, members: true}}, asked)
}
