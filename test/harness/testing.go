package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// Shared is the control plane of one e2e test package, set by RunTests.
// It is nil when the binaries are missing outside CI.
var shared *ControlPlane

// skipReason says why tests that need the control plane are skipped.
var skipReason string

// RunTests is for an e2e package's TestMain: it starts one control plane for
// all the package's tests, runs them, and stops it, also on SIGINT/SIGTERM.
// Without the binaries it fails under CI=true and otherwise lets the tests
// skip with the command that builds them.
func RunTests(m *testing.M, opts Options) int {
	flag.Parse()
	if err := AssetsPresent(); err != nil {
		// Only missing binaries skip; a build of another version fails.
		if os.Getenv("CI") == "true" || !IsAssetsMissing(err) {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			return 1
		}
		skipReason = err.Error()
		return m.Run()
	}
	if testing.Short() {
		skipReason = "real control plane tests are skipped with -short"
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cp, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: start control plane: %v\n", err)
		return 1
	}
	shared = cp
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		cp.Stop()
		os.Exit(130)
	}()
	code := m.Run()
	signal.Stop(signals)
	if code != 0 {
		// Keep the logs of a failed run for whoever reads the failure.
		cp.removeDir = false
		fmt.Fprintf(os.Stderr, "control plane logs are in %s/logs\n", cp.Dir)
	}
	cp.Stop()
	return code
}

// RunBenchmarks is for the TestMain of a package that holds only
// benchmarks: the control plane is started only when -test.bench asks for
// some, since a plain `go test` (vet, make test) runs none of them.
// Progress defaults to stderr, where a long set-up reports itself.
func RunBenchmarks(m *testing.M, opts Options) int {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		return m.Run()
	}
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	return RunTests(m, opts)
}

// Require returns the package's control plane or skips the test.
func Require(tb testing.TB) *ControlPlane {
	tb.Helper()
	if shared == nil {
		if skipReason == "" {
			skipReason = "no control plane: call harness.RunTests from TestMain"
		}
		tb.Skip(skipReason)
	}
	return shared
}

// IsAssetsMissing reports whether err says the binaries were not built.
func IsAssetsMissing(err error) bool { return errors.Is(err, ErrAssetsMissing) }
