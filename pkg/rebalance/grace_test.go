package rebalance

import (
	"context"
	"testing"
	"time"

	appsv1alpha1 "github.com/karmada-io/karmada/pkg/apis/apps/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inFlightAPI plays the network between the run and the fake API server: the
// run's context ends (Ctrl-C) while a trigger write is on its way; the server
// applies the write after delay, or never answers when hang is set, and the
// client hears what its request context allows.
type inFlightAPI struct {
	*fakeAPI
	interrupt context.CancelFunc
	delay     time.Duration
	hang      bool
}

func (a *inFlightAPI) PatchTrigger(ctx context.Context, w TriggerWrite) (*Binding, error) {
	a.interrupt()
	if a.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	time.Sleep(a.delay)
	b, err := a.fakeAPI.PatchTrigger(ctx, w)
	if ctx.Err() != nil {
		// The server applied it; the client gave up on the answer.
		return nil, ctx.Err()
	}
	return b, err
}

func TestRunInterruptedWhileTheTriggerIsInFlight(t *testing.T) {
	tests := []struct {
		name    string
		delay   time.Duration
		hang    bool
		success bool
	}{
		{name: "the answer comes within the grace", delay: 100 * time.Millisecond, success: true},
		{name: "the server hangs", hang: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRunnerFixture(Options{Wait: true})
			b := scheduledBinding(webDeploy, serverNow.Add(-time.Hour), member2Only...)
			f.api.add(b)
			f.api.scheduler = reschedulingTo(backInMember...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			f.runner.API = &inFlightAPI{fakeAPI: f.api, interrupt: cancel, delay: tt.delay, hang: tt.hang}

			result, err := f.runner.Run(ctx, targetsOf(webDeploy))
			require.NoError(t, err)
			row := result.Rows[0]
			if !tt.success {
				assert.Empty(t, row.Result, "the run cannot know")
				assert.Contains(t, row.Message, "whose answer was lost (it may have landed)")
				return
			}
			// The trigger the scheduler acts on is the run's, and its row
			// and the record say so.
			assert.Equal(t, 1, f.api.persisted[b.key()])
			assert.Equal(t, appsv1alpha1.RebalanceSuccessful, row.Result, row.Message)
			assert.Equal(t, 1, result.Written)
		})
	}
}
