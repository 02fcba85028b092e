package waves

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSteps(t *testing.T) {
	tests := []struct {
		value   string
		want    []Step
		wantErr string
	}{
		{value: "1,10%,100%", want: []Step{{Count: 1}, {Percent: 10}, {Percent: 100}}},
		{value: "1, 100%", want: []Step{{Count: 1}, {Percent: 100}}},
		{value: "2,5", want: []Step{{Count: 2}, {Count: 5}}},
		{value: "", wantErr: `invalid --steps "": give at least one step`},
		{value: "0,100%", wantErr: `"0" is neither a count of workloads (1 or more) nor a percentage`},
		{value: "1,abc", wantErr: `"abc" is neither a count`},
		{value: "1,150%", wantErr: `"150%" is not a percentage from 1% to 100%`},
		{value: "50%,10%", wantErr: "the steps must grow, and 10% does not come after 50%"},
		{value: "5,5", wantErr: "the steps must grow, and 5 does not come after 5"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			got, err := ParseSteps(tt.value)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "e.g. --steps 1,10%,100%", "every error shows a valid example")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.want, mustParse(t, FormatSteps(got)), "FormatSteps writes what ParseSteps reads")
		})
	}
}

func mustParse(t *testing.T, s string) []Step {
	steps, err := ParseSteps(s)
	require.NoError(t, err)
	return steps
}

func TestBoundaries(t *testing.T) {
	tests := []struct {
		steps string
		total int
		want  []int
	}{
		{"1,100%", 3, []int{1}},
		{"1,10%,100%", 5, []int{1}},     // 10% of 5 rounds up to 1: one gate
		{"1,10%,100%", 50, []int{1, 5}}, // the last step is the run's end
		{"1,10%", 50, []int{1, 5}},      // the rest after the last gate
		{"10,50%", 8, []int{4}},         // a count past the run is no gate
		{"1,100%", 1, nil},              // one workload: nothing to wait for
		{"3,25%", 100, []int{3, 25}},    // kinds mixed, in order
		{"50%,3", 100, []int{3, 50}},    // ascending whatever the order given
	}
	for _, tt := range tests {
		t.Run(tt.steps, func(t *testing.T) {
			assert.Equal(t, tt.want, Boundaries(mustParse(t, tt.steps), tt.total))
		})
	}
}

// TestGatesWaitForApproval checks that a run stops starting workloads at
// each gate until every workload of the step is done, asks once per gate,
// and goes on only when approved.
func TestGatesWaitForApproval(t *testing.T) {
	mover := &fakeMover{}
	var (
		mu    sync.Mutex
		asked []int
		// startedAtAsk is how many moves had started when each gate was asked.
		startedAtAsk []int
		paused       []bool
	)
	e := &Engine{Options: Options{MaxInFlight: 2, Gates: []int{1, 3},
		Approve: func(ctx context.Context, gate int) error {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, gate)
			mover.mu.Lock()
			startedAtAsk = append(startedAtAsk, len(mover.order))
			assert.Zero(t, mover.inFlight, "the step's workloads are done before the gate asks")
			mover.mu.Unlock()
			return nil
		},
		Progress: func(s Status) { paused = append(paused, s.Paused) },
	}}
	res, err := e.Run(context.Background(), mover, targets(names(5)...), nil)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, asked)
	assert.Equal(t, []int{1, 3}, startedAtAsk)
	assert.Equal(t, 5, res.Written)
	assert.Contains(t, paused, true, "the progress hears the pause")
}

// TestGateRefusedOrInterrupted checks that a run waiting at a gate stops
// without starting more: on an error of the approval, and on an abort.
func TestGateRefusedOrInterrupted(t *testing.T) {
	t.Run("error", func(t *testing.T) {
		mover := &fakeMover{}
		e := &Engine{Options: Options{MaxInFlight: 1, Gates: []int{1},
			Approve: func(context.Context, int) error { return errors.New("the record is gone") }}}
		res, err := e.Run(context.Background(), mover, targets(names(3)...), nil)
		require.Error(t, err)
		assert.Equal(t, StopError, res.Stop)
		assert.Equal(t, []string{"app-00"}, mover.order)
		assert.Equal(t, 2, res.NotStarted)
	})
	t.Run("aborted", func(t *testing.T) {
		mover := &fakeMover{}
		ctx, cancel := context.WithCancelCause(context.Background())
		e := &Engine{Options: Options{MaxInFlight: 1, Gates: []int{0},
			Approve: func(ctx context.Context, _ int) error {
				cancel(&AbortError{Message: "aborted by alice"})
				<-ctx.Done()
				return ctx.Err()
			}}}
		res, err := e.Run(ctx, mover, targets(names(2)...), nil)
		require.NoError(t, err)
		assert.Equal(t, StopAborted, res.Stop)
		assert.Equal(t, "aborted by alice", res.StopMessage)
		assert.Empty(t, mover.order, "a gate at 0 waits before the first start")
	})
}
