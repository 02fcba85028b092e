package cmd

import (
	"context"
	"errors"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestRunSteps: a step's error is the user's to fix and exits with
// ExitError, the steps after it and the run do not happen; the run's error
// keeps its own exit code.
func TestRunSteps(t *testing.T) {
	tests := []struct {
		name      string
		stepErr   []error
		runErr    error
		wantCode  int
		wantCalls []string
	}{
		{name: "all pass", stepErr: []error{nil, nil}, wantCode: ExitOK, wantCalls: []string{"step0", "step1", "run"}},
		{name: "first step fails", stepErr: []error{errors.New("bad flag"), nil}, wantCode: ExitError, wantCalls: []string{"step0"}},
		{name: "second step fails", stepErr: []error{nil, errors.New("bad flag")}, wantCode: ExitError, wantCalls: []string{"step0", "step1"}},
		{name: "run keeps its code", stepErr: []error{nil}, runErr: withExitCode(ExitPending, errors.New("timed out")), wantCode: ExitPending, wantCalls: []string{"step0", "run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			var steps []func(*cobra.Command, []string) error
			for i, err := range tt.stepErr {
				name := []string{"step0", "step1"}[i]
				steps = append(steps, func(*cobra.Command, []string) error { calls = append(calls, name); return err })
			}
			run := func(context.Context) error { calls = append(calls, "run"); return tt.runErr }
			streams := genericiooptions.NewTestIOStreamsDiscard()
			cmd := &cobra.Command{Use: "x", RunE: runSteps(run, steps...), SilenceErrors: true, SilenceUsage: true}
			cmd.SetArgs(nil)
			require.NotPanics(t, func() { assert.Equal(t, tt.wantCode, Execute(cmd, streams)) })
			assert.Equal(t, tt.wantCalls, calls)
		})
	}
}
