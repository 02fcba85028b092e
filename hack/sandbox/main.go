// Command sandbox runs a local Karmada control plane in the foreground for
// trying kubectl-rebalance by hand: `make sandbox`, then in another shell the
// printed `export KUBECONFIG=...`. Ctrl-C stops everything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kubectl-rebalance/kubectl-rebalance/test/harness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	dir := os.Getenv("SANDBOX_DIR")
	if dir == "" {
		dir = "_sandbox"
	}
	opts := harness.Options{Progress: os.Stderr}
	flag.StringVar(&dir, "dir", dir, "folder for the kubeconfig, certificates, logs and the ready file ($SANDBOX_DIR)")
	flag.IntVar(&opts.Members, "members", 3, "number of member clusters")
	flag.IntVar(&opts.NodesPerMember, "nodes", 1, "kwok nodes per member cluster")
	flag.StringVar(&opts.NodeCPU, "node-cpu", "32", "CPU capacity of each node")
	flag.StringVar(&opts.NodeMemory, "node-memory", "256Gi", "memory capacity of each node")
	flag.StringVar(&opts.NodePods, "node-pods", "110", "pod capacity of each node")
	estimator := true
	flag.BoolVar(&estimator, "scheduler-estimator", true,
		"run a karmada-scheduler-estimator per member and karmada-scheduler with --enable-scheduler-estimator, as local-up-karmada does; false is a deviation from the users' environment")
	flag.BoolVar(&opts.AllPush, "all-push", false,
		"join member3 in Push mode too; by default it is a Pull cluster served by karmada-agent, as local-up-karmada makes it")
	flag.Parse()
	opts.WithoutSchedulerEstimator = !estimator

	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := prepareDir(abs); err != nil {
		return err
	}
	opts.Dir = abs
	if err := os.WriteFile(filepath.Join(abs, "pid"), []byte(fmt.Sprintln(os.Getpid())), 0o644); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	cp, err := harness.Start(startCtx, opts)
	cancel()
	if err != nil {
		return err
	}
	defer cp.Stop()

	ready := filepath.Join(abs, "ready")
	if err := os.WriteFile(ready, []byte(cp.Kubeconfig+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(ready)
	fmt.Printf("\nKarmada %s sandbox (Kubernetes %s) is ready: contexts %s", cp.Versions.Karmada, cp.Versions.Kubernetes, harness.KarmadaContext)
	for _, m := range cp.Members {
		fmt.Printf(", %s", m.Name)
	}
	fmt.Printf("\n\n  export KUBECONFIG=%s\n\nLogs are in %s/logs. Press Ctrl-C to stop.\n", cp.Kubeconfig, abs)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping the sandbox")
	return nil
}

// prepareDir empties a folder left by an earlier sandbox, refusing one that a
// sandbox did not make, and refusing one whose sandbox still runs.
func prepareDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if pid, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
		var n int
		if _, err := fmt.Sscan(string(pid), &n); err == nil && syscall.Kill(n, 0) == nil {
			return fmt.Errorf("a sandbox (pid %d) is already running in %s; pass --dir or set SANDBOX_DIR for a second one", n, dir)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "pki")); err != nil {
		return fmt.Errorf("%s is not empty and was not made by a sandbox; choose another --dir", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}
