// Package cmd holds the cobra commands of kubectl-rebalance: each turns its
// flags into a request, hands it to the package that does the work (pkg/run,
// pkg/deschedule, pkg/failback, pkg/predict, pkg/record) and prints the
// result with its exit code. It owns two things besides: the targets
// (targetOptions, targets.go: arguments and files resolved into workloads
// with cli-runtime) and the session of the server a command talks to
// (session, session.go: its clients, request guard, release and estimators),
// built once per command as kubectl's cmdutil.Factory. The session's
// messages that name the server are in errors.go; its methods that serve one
// step (start-up, events, moves) sit with that step.
package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Exit codes of kubectl-rebalance, documented in `kubectl rebalance --help` and docs/exit-codes.md.
const (
	// ExitOK means every workload was triggered and, when waiting, rescheduled.
	ExitOK = 0
	// ExitError means bad usage, bad input, or the control plane could not be used.
	ExitError = 1
	// ExitFailed means at least one workload failed (binding not found, scheduling failed).
	ExitFailed = 2
	// ExitPending means the timeout expired with workloads still pending.
	ExitPending = 3
)

// ExitError carries a non-default exit code together with the error to print.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// runSteps is the RunE of a command in kubectl's shape: steps (Complete,
// Validate) judge the flags and arguments in order, and the first error,
// the user's to fix, exits with ExitError; run does the work, and its
// error carries its own exit code.
func runSteps(run func(context.Context) error, steps ...func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		for _, step := range steps {
			if err := step(cmd, args); err != nil {
				return withExitCode(ExitError, err)
			}
		}
		return run(cmd.Context())
	}
}

// withoutArgs makes a step of a check that needs neither the command nor
// its arguments (a Validate).
func withoutArgs(check func() error) func(*cobra.Command, []string) error {
	return func(*cobra.Command, []string) error { return check() }
}

// withExitCode wraps err so that Execute exits with code.
func withExitCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// Execute runs the command tree and returns the process exit code. It is the
// single place where errors are printed.
func Execute(root *cobra.Command, streams genericiooptions.IOStreams) int {
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	code := ExitError
	var coded *exitError
	if errors.As(err, &coded) {
		code = coded.code
	}
	var silent silentError
	if !errors.As(err, &silent) {
		fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
	}
	return code
}

// silentError is returned when the command already reported what went wrong
// (for example in its result table) and only the exit code is left to give.
type silentError struct{ msg string }

func (s silentError) Error() string { return s.msg }
