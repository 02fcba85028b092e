package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// VersionEnv names the environment variable that picks the Karmada version of
// the control plane (hack/build-controlplane.sh builds it into a directory of
// its own, _output/controlplane-$KARMADA_VERSION).
const VersionEnv = "KARMADA_VERSION"

// DefaultKarmadaVersion is the version built into _output/controlplane, the
// one `make test` and CI run.
const DefaultKarmadaVersion = "v1.18.2"

// defaultKubernetesVersion goes with DefaultKarmadaVersion.
const defaultKubernetesVersion = "v1.35.3"

// Versions are the releases a set of control-plane assets was built from.
type Versions struct {
	// Karmada is Karmada's release, e.g. v1.12.0.
	Karmada string
	// Kubernetes is the release of kube-apiserver, kube-controller-manager
	// and kube-scheduler, the one that Karmada release was built against.
	Kubernetes string
}

// KarmadaMinor returns the minor number of the Karmada release (12 for v1.12.0).
func (v Versions) KarmadaMinor() int { return minorOf(v.Karmada) }

// KarmadaAtLeast reports whether the Karmada release is v1.<minor> or newer.
func (v Versions) KarmadaAtLeast(minor int) bool { return v.KarmadaMinor() >= minor }

func minorOf(version string) int {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(parts[1])
	return n
}

// readVersions reads the versions file hack/build-controlplane.sh writes. An
// older build has none: it is the default version.
func readVersions(assetsDir string) (Versions, error) {
	v := Versions{Karmada: DefaultKarmadaVersion, Kubernetes: defaultKubernetesVersion}
	data, err := os.ReadFile(filepath.Join(assetsDir, "versions"))
	if os.IsNotExist(err) {
		return v, nil
	}
	if err != nil {
		return v, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch key {
		case "karmada":
			v.Karmada = value
		case "kubernetes":
			v.Kubernetes = value
		}
	}
	if minorOf(v.Karmada) == 0 {
		return v, fmt.Errorf("%s/versions names no Karmada release (%q): rebuild with %s", assetsDir, v.Karmada, BuildCommand)
	}
	return v, nil
}

// checkRequestedVersion fails when $KARMADA_VERSION asks for another Karmada
// than the assets hold, which happens when $KUBECTL_REBALANCE_CONTROLPLANE
// points at another version's build.
func checkRequestedVersion(assetsDir string, v Versions) error {
	want := os.Getenv(VersionEnv)
	if want == "" || want == v.Karmada {
		return nil
	}
	return fmt.Errorf("%s=%s, but the control plane in %s is Karmada %s: unset %s, or point it at a build of %s (KARMADA_VERSION=%s %s)",
		VersionEnv, want, assetsDir, v.Karmada, AssetsEnv, want, want, BuildCommand)
}

// SchedulerVerbosityEnv, when set, starts karmada-scheduler with that --v
// (for example 4, where it logs what the estimators answered for each
// binding); unset keeps the default verbosity. For reading a failure only:
// the logs of a verbose 2-core run grow quickly.
const SchedulerVerbosityEnv = "KUBECTL_REBALANCE_SCHEDULER_V"
