package krewcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// platforms are the archives every release ships (.goreleaser.yaml).
var platforms = []struct{ os, arch string }{
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"linux", "amd64"}, {"linux", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// run runs name with args in dir and env added, failing the test on error.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestSnapshotReleaseInstallsWithKrew(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	here := filepath.Dir(file)
	root := filepath.Join(here, "..", "..")
	tools := t.TempDir()
	run(t, here, nil, "go", "build", "-o", tools+string(os.PathSeparator), "sigs.k8s.io/krew/cmd/krew", "sigs.k8s.io/krew/cmd/validate-krew-manifest")

	// The release as a tag would build it, into dist/ (goreleaser's own).
	dist := filepath.Join(root, "dist")
	t.Logf("%s", run(t, root, nil, "hack/release-snapshot.sh"))
	var meta struct {
		Version string `json:"version"`
	}
	raw, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	version := "v" + meta.Version

	// krew-index's own check of the manifest; its install step would
	// download the archives, so the installs below use the local ones.
	manifest := filepath.Join(dist, "krew", "rebalance.yaml")
	t.Logf("%s", run(t, here, nil, filepath.Join(tools, "validate-krew-manifest"), "-manifest", manifest, "-skip-install"))

	krew := filepath.Join(tools, "krew")
	for _, p := range platforms {
		t.Run(p.os+"/"+p.arch, func(t *testing.T) {
			archive := fmt.Sprintf("kubectl-rebalance_%s_%s.tar.gz", p.os, p.arch)
			bin := "kubectl-rebalance"
			if p.os == "windows" {
				archive = strings.TrimSuffix(archive, ".tar.gz") + ".zip"
				bin += ".exe"
			}
			krewRoot := t.TempDir()
			env := []string{"KREW_ROOT=" + krewRoot, "KREW_OS=" + p.os, "KREW_ARCH=" + p.arch}
			out := run(t, here, env, krew, "install", "--manifest="+manifest, "--archive="+filepath.Join(dist, archive))
			t.Logf("%s", out)
			store := filepath.Join(krewRoot, "store", "rebalance", version)
			for _, f := range []string{bin, "LICENSE", "README.md"} {
				if _, err := os.Stat(filepath.Join(store, f)); err != nil {
					t.Errorf("krew did not install %s: %v", f, err)
				}
			}
			if p.os != "windows" {
				if _, err := os.Stat(filepath.Join(store, "kubectl_complete-rebalance")); err != nil {
					t.Errorf("krew did not install the completion helper: %v", err)
				}
			}
			// krew's receipt records the install at the release's version
			// (`krew list` would first fetch krew's default index).
			receipt, err := os.ReadFile(filepath.Join(krewRoot, "receipts", "rebalance.yaml"))
			if err != nil || !strings.Contains(string(receipt), "version: "+version) {
				t.Errorf("no receipt of rebalance %s: %v\n%s", version, err, receipt)
			}
			if p.os == runtime.GOOS && p.arch == runtime.GOARCH {
				// The plugin runs from krew's bin directory and reports the version krew installed.
				got := run(t, here, nil, filepath.Join(krewRoot, "bin", "kubectl-rebalance"), "version", "-o", "json")
				if !strings.Contains(got, `"version": "`+version+`"`) {
					t.Errorf("the installed plugin reports\n%s\nwant version %s", got, version)
				}
			}
		})
	}
}
