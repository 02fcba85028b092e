package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// AssetsEnv names the environment variable that points at the control-plane
// assets built by hack/build-controlplane.sh.
const AssetsEnv = "KUBECTL_REBALANCE_CONTROLPLANE"

// BuildCommand is what a person runs to build the assets.
const BuildCommand = "hack/build-controlplane.sh (or make controlplane)"

var requiredBinaries = []string{
	"server", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
	"aggregated-apiserver", "controller-manager", "scheduler", "scheduler-estimator", "webhook", "agent", "descheduler", "kwok",
}

// DefaultAssetsDir returns $KUBECTL_REBALANCE_CONTROLPLANE, or, in the
// repository that holds the working directory, _output/controlplane for the
// default Karmada version and _output/controlplane-$KARMADA_VERSION for
// another one.
func DefaultAssetsDir() (string, error) {
	if dir := os.Getenv(AssetsEnv); dir != "" {
		return dir, nil
	}
	root, err := repositoryRoot()
	if err != nil {
		return "", err
	}
	if v := os.Getenv(VersionEnv); v != "" && v != DefaultKarmadaVersion {
		return filepath.Join(root, "_output", "controlplane-"+v), nil
	}
	return filepath.Join(root, "_output", "controlplane"), nil
}

// repositoryRoot walks up from the working directory to the plugin's go.mod.
func repositoryRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/kubectl-rebalance/kubectl-rebalance\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("cannot find the kubectl-rebalance repository above the working directory; set %s", AssetsEnv)
		}
		dir = parent
	}
}

// ErrAssetsMissing is wrapped by the error Start returns when the binaries
// have not been built.
var ErrAssetsMissing = errors.New("control plane binaries are missing")

func checkAssets(dir string) error {
	var missing []string
	for _, b := range requiredBinaries {
		if _, err := os.Stat(filepath.Join(dir, "bin", b)); err != nil {
			missing = append(missing, "bin/"+b)
		}
	}
	for _, f := range []string{"crds", "manifests", "webhook-configuration.yaml", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		build := BuildCommand
		if v := os.Getenv(VersionEnv); v != "" {
			build = VersionEnv + "=" + v + " " + build
		}
		return fmt.Errorf("%w in %s (%s): run %s", ErrAssetsMissing, dir, strings.Join(missing, ", "), build)
	}
	versions, err := readVersions(dir)
	if err != nil {
		return err
	}
	return checkRequestedVersion(dir, versions)
}

// AssetsPresent reports whether the binaries are built, and if not, why.
func AssetsPresent() error {
	dir, err := DefaultAssetsDir()
	if err != nil {
		return err
	}
	return checkAssets(dir)
}
