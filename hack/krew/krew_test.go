package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// committedManifest is the manifest that makes this repository a krew
// index. It is committed only by a release, rendered from the archives it
// published (docs/install.md); until then there is none.
const committedManifest = "../../plugins/rebalance.yaml"

// TestCommittedManifestIsValid checks a committed manifest against krew's
// rules and against what a release renders: never a snapshot's archives.
func TestCommittedManifestIsValid(t *testing.T) {
	data, err := os.ReadFile(committedManifest)
	if os.IsNotExist(err) {
		t.Skip("no krew manifest is committed before the first release")
	}
	require.NoError(t, err)
	require.NoError(t, validateFile(committedManifest))
	assert.NotContains(t, string(data), "snapshot", "a committed manifest is rendered from a published release, never from a snapshot")
	var m Manifest
	require.NoError(t, yaml.UnmarshalStrict(data, &m))
	assert.Contains(t, string(data), "# Krew plugin manifest for kubectl-rebalance "+m.Spec.Version+", with the archives\n# of goreleaser version "+strings.TrimPrefix(m.Spec.Version, "v")+",",
		"the archives are the release's own")
}

func TestRunCheck(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "rebalance.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(validManifest(t)), 0o644))
	require.NoError(t, run([]string{"-check", manifest}))
	assert.ErrorContains(t, run([]string{"-check", "testdata/missing.yaml"}), "reading krew manifest")
	assert.ErrorContains(t, run([]string{"stray"}), `unexpected arguments ["stray"]`)
}

// archiveFile is one entry of a fake release archive.
type archiveFile struct {
	name string
	mode int64
}

func defaultArchive(tg target) []archiveFile {
	var files []archiveFile
	for _, f := range archiveFiles(tg) {
		files = append(files, archiveFile{name: f, mode: 0o755})
	}
	return files
}

// writeDist writes a fake goreleaser dist directory: metadata.json,
// checksums.txt and one archive per target, with contents from files.
func writeDist(t *testing.T, version string, files func(target) []archiveFile) string {
	t.Helper()
	dist := t.TempDir()
	meta := fmt.Sprintf(`{"project_name":"kubectl-rebalance","tag":"v%s","version":%q}`, version, version)
	require.NoError(t, os.WriteFile(filepath.Join(dist, "metadata.json"), []byte(meta), 0o644))
	var sums strings.Builder
	for _, tg := range targets {
		data := buildArchive(t, strings.HasSuffix(archiveName(tg), ".zip"), files(tg))
		require.NoError(t, os.WriteFile(filepath.Join(dist, archiveName(tg)), data, 0o644))
		sum := sha256.Sum256(data)
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), archiveName(tg))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dist, "checksums.txt"), []byte(sums.String()), 0o644))
	return dist
}

func buildArchive(t *testing.T, isZip bool, files []archiveFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	if isZip {
		zw := zip.NewWriter(&buf)
		for _, f := range files {
			h := &zip.FileHeader{Name: f.name, Method: zip.Deflate}
			h.SetMode(os.FileMode(f.mode))
			w, err := zw.CreateHeader(h)
			require.NoError(t, err)
			_, err = w.Write([]byte(f.name))
			require.NoError(t, err)
		}
		require.NoError(t, zw.Close())
		return buf.Bytes()
	}
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.name)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(f.name))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

func TestLoadRelease(t *testing.T) {
	tests := []struct {
		name        string
		version     string
		files       func(target) []archiveFile
		edit        func(t *testing.T, dist string)
		wantVersion string
		wantErr     []string
	}{
		{
			name:        "release version gets a v",
			files:       defaultArchive,
			wantVersion: "v1.2.3",
		},
		{
			name:        "explicit version",
			version:     "v1.2.3",
			files:       defaultArchive,
			wantVersion: "v1.2.3",
		},
		{
			name:    "another version than the archives'",
			version: "v0.1.0",
			files:   defaultArchive,
			wantErr: []string{"are v1.2.3, not v0.1.0: build the release of v0.1.0 and render from its archives"},
		},
		{
			name:    "explicit version without v",
			version: "1.3.0",
			files:   defaultArchive,
			wantErr: []string{`version "1.3.0" has no leading v: pass it as v1.3.0`},
		},
		{
			name: "archive without licence or readme",
			files: func(tg target) []archiveFile {
				return []archiveFile{{name: binFor(tg), mode: 0o755}, {name: completionScript, mode: 0o755}}
			},
			wantErr: []string{"kubectl-rebalance_linux_arm64.tar.gz lacks LICENSE, README.md", "kubectl-rebalance_windows_amd64.zip lacks LICENSE, README.md"},
		},
		{
			name: "completion script not executable",
			files: func(tg target) []archiveFile {
				files := defaultArchive(tg)
				for i := range files {
					if files[i].name == completionScript {
						files[i].mode = 0o644
					}
				}
				return files
			},
			wantErr: []string{"kubectl-rebalance_darwin_amd64.tar.gz holds kubectl_complete-rebalance without execute permission"},
		},
		{
			name:  "archive changed after checksumming",
			files: defaultArchive,
			edit: func(t *testing.T, dist string) {
				require.NoError(t, os.WriteFile(filepath.Join(dist, "kubectl-rebalance_linux_amd64.tar.gz"), []byte("other"), 0o644))
			},
			wantErr: []string{"kubectl-rebalance_linux_amd64.tar.gz has sha256", "build the release again"},
		},
		{
			name:  "archive missing from checksums",
			files: defaultArchive,
			edit: func(t *testing.T, dist string) {
				path := filepath.Join(dist, "checksums.txt")
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				var kept []string
				for _, line := range strings.Split(string(data), "\n") {
					if !strings.Contains(line, "windows_arm64") {
						kept = append(kept, line)
					}
				}
				require.NoError(t, os.WriteFile(path, []byte(strings.Join(kept, "\n")), 0o644))
			},
			wantErr: []string{"checksums.txt lists no kubectl-rebalance_windows_arm64.zip"},
		},
		{
			name:  "no release built",
			files: defaultArchive,
			edit: func(t *testing.T, dist string) {
				require.NoError(t, os.Remove(filepath.Join(dist, "metadata.json")))
			},
			wantErr: []string{"run `make release-snapshot` or goreleaser release first"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dist := writeDist(t, "1.2.3", tt.files)
			if tt.edit != nil {
				tt.edit(t, dist)
			}
			rel, err := loadRelease(dist, tt.version)
			if len(tt.wantErr) > 0 {
				require.Error(t, err)
				for _, want := range tt.wantErr {
					assert.Contains(t, err.Error(), want)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantVersion, rel.Version)
			require.Len(t, rel.Platforms, len(targets))
			linux := rel.Platforms[2]
			assert.Equal(t, "linux", linux.OS)
			assert.Equal(t, "amd64", linux.Arch)
			assert.Equal(t, "https://github.com/kubectl-rebalance/kubectl-rebalance/releases/download/"+tt.wantVersion+"/kubectl-rebalance_linux_amd64.tar.gz", linux.URI)
			assert.Equal(t, []string{"kubectl-rebalance", "LICENSE", "README.md", "kubectl_complete-rebalance"}, linux.Files)
			windows := rel.Platforms[4]
			assert.Equal(t, "kubectl-rebalance.exe", windows.Bin)
			assert.Equal(t, []string{"kubectl-rebalance.exe", "LICENSE", "README.md"}, windows.Files)
		})
	}
}

func TestRenderWritesAValidManifest(t *testing.T) {
	dist := writeDist(t, "0.4.0", defaultArchive)
	out := filepath.Join(t.TempDir(), "rebalance.yaml")
	require.NoError(t, run([]string{"-dist", dist, "-o", out}))
	require.NoError(t, validateFile(out))

	data, err := os.ReadFile(out)
	require.NoError(t, err)
	sums, err := readChecksums(filepath.Join(dist, "checksums.txt"))
	require.NoError(t, err)
	for _, tg := range targets {
		assert.Contains(t, string(data), "sha256: "+sums[archiveName(tg)])
	}
	assert.Contains(t, string(data), "  version: v0.4.0\n")
	assert.Contains(t, string(data), "/store/rebalance/v0.4.0/kubectl_complete-rebalance")
}

// validManifest renders a manifest that passes validate, for the cases below to break.
func validManifest(t *testing.T) string {
	t.Helper()
	rel, err := loadRelease(writeDist(t, "0.1.0", defaultArchive), "")
	require.NoError(t, err)
	data, err := render(rel)
	require.NoError(t, err)
	require.NoError(t, validate(pluginName, data))
	return string(data)
}

func TestValidate(t *testing.T) {
	valid := validManifest(t)
	tests := []struct {
		name     string
		plugin   string
		old, new string
		wantErr  []string
	}{
		{name: "valid", plugin: "rebalance"},
		{name: "file name differs", plugin: "rebalancer", wantErr: []string{`metadata.name is "rebalance": it must match the file name "rebalancer"`}},
		{name: "unsafe name", plugin: "re/balance", wantErr: []string{`plugin name "re/balance" is not allowed`}},
		{name: "reserved windows name", plugin: "nul", wantErr: []string{`plugin name "nul" is not allowed`}},
		{name: "api version", plugin: "rebalance", old: "/v1alpha2", new: "/v1alpha1", wantErr: []string{"krew only reads"}},
		{name: "kind", plugin: "rebalance", old: "kind: Plugin", new: "kind: Plugins", wantErr: []string{`kind is "Plugins"`}},
		{name: "version without v", plugin: "rebalance", old: "version: v0.1.0", new: "version: 0.1.0", wantErr: []string{`spec.version "0.1.0" has no leading v`}},
		{name: "version not semver", plugin: "rebalance", old: "version: v0.1.0", new: "version: v0.1", wantErr: []string{`spec.version "v0.1" is not a semantic version`}},
		{name: "short description too long", plugin: "rebalance", old: "shortDescription: Reschedule", new: "shortDescription: Reschedule, rebalance and redistribute", wantErr: []string{"shorten it to 50"}},
		{name: "no homepage", plugin: "rebalance", old: "homepage: https://", new: "homepage: http://", wantErr: []string{"is not an https address: point it at the project page"}},
		{name: "misspelled field", plugin: "rebalance", old: "caveats:", new: "caveat:", wantErr: []string{`unknown field "caveat"`}},
		{name: "bad sha256", plugin: "rebalance", old: "sha256: ", new: "sha256: ABC", wantErr: []string{"is not 64 lower-case hex digits"}},
		{name: "bin not installed", plugin: "rebalance", old: "bin: kubectl-rebalance.exe", new: "bin: rebalance.exe", wantErr: []string{`bin "rebalance.exe" is not among the files`}},
		{name: "unknown selector label", plugin: "rebalance", old: "os: darwin", new: "distro: darwin", wantErr: []string{`selector label "distro" is not supported`, "0 platforms match darwin/amd64"}},
		{name: "overlapping platforms", plugin: "rebalance", old: "arch: arm64", new: "arch: amd64", wantErr: []string{"2 platforms match darwin/amd64", "0 platforms match darwin/arm64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := valid
			if tt.old != "" {
				require.Contains(t, data, tt.old)
				data = strings.Replace(data, tt.old, tt.new, 1)
			}
			err := validate(tt.plugin, []byte(data))
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}
