package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// BuildPlugin builds kubectl-rebalance into dir as releases and make build
// build it (without cgo, which would map about 30 MiB more of the binary),
// and returns the binary's path. Tests and benchmarks that run the plugin as
// a process of its own (real signals, its own peak RSS) use it.
func BuildPlugin(dir string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	binary := filepath.Join(dir, "kubectl-rebalance")
	build := exec.Command("go", "build", "-o", binary, "./cmd/kubectl-rebalance")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build of kubectl-rebalance: %w\n%s", err, out)
	}
	return binary, nil
}
