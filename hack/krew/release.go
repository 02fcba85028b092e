package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const (
	pluginName = "rebalance"
	binaryName = "kubectl-rebalance"
	// completionScript is kubectl's name for the plugin's completion helper.
	completionScript = "kubectl_complete-rebalance"
	homepage         = "https://github.com/kubectl-rebalance/kubectl-rebalance"
	// releaseURL is where GitHub serves a release's files: tag, then file name.
	releaseURL = homepage + "/releases/download/%s/%s"
)

// target is one os/arch pair that every release ships, matching .goreleaser.yaml.
type target struct{ OS, Arch string }

var targets = []target{
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"linux", "amd64"}, {"linux", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// archiveName is the file name that .goreleaser.yaml gives the archive of t.
func archiveName(t target) string {
	ext := ".tar.gz"
	if t.OS == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("%s_%s_%s%s", binaryName, t.OS, t.Arch, ext)
}

func binFor(t target) string {
	if t.OS == "windows" {
		return binaryName + ".exe"
	}
	return binaryName
}

// archiveFiles lists what an archive of t must contain.
func archiveFiles(t target) []string {
	return []string{binFor(t), "LICENSE", "README.md", completionScript}
}

// installedFiles lists what krew copies out of the archive of t.
func installedFiles(t target) []string {
	if t.OS == "windows" {
		// kubectl on Windows cannot run the completion helper, a shell script.
		return []string{binFor(t), "LICENSE", "README.md"}
	}
	return archiveFiles(t)
}

// release is what the manifest is rendered from.
type release struct {
	Version  string
	Homepage string
	// Build names the goreleaser run the archives came from, so that a
	// manifest rendered from a snapshot says so.
	Build     string
	Platforms []platform
}

type platform struct {
	OS, Arch, URI, SHA256, Bin string
	// Files are copied from the archive into the plugin's directory.
	Files []string
}

// metadata is the part of goreleaser's dist/metadata.json that is read.
type metadata struct {
	Tag     string `json:"tag"`
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

// loadRelease reads the release in dist and checks every archive against
// checksums.txt and archiveFiles. version, when set, must be the release's
// own version.
func loadRelease(dist, version string) (release, error) {
	raw, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err != nil {
		return release{}, fmt.Errorf("reading the release metadata: %w; run `make release-snapshot` or goreleaser release first", err)
	}
	var meta metadata
	if err := json.Unmarshal(raw, &meta); err != nil {
		return release{}, fmt.Errorf("parsing %s: %w", filepath.Join(dist, "metadata.json"), err)
	}
	// goreleaser's version never has the "v" that krew requires.
	built := "v" + strings.TrimPrefix(meta.Version, "v")
	if version == "" {
		version = built
	}
	if !strings.HasPrefix(version, "v") {
		return release{}, fmt.Errorf("version %q has no leading v: pass it as v%s", version, version)
	}
	// The checksums are those of the archives in dist: a manifest naming
	// another version would point at downloads with other bytes (that is
	// how a snapshot's checksums once ended up under a release's URLs).
	if version != built {
		return release{}, fmt.Errorf("the archives in %s are %s, not %s: build the release of %s and render from its archives", dist, built, version, version)
	}

	sums, err := readChecksums(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		return release{}, err
	}

	rel := release{
		Version:  version,
		Homepage: homepage,
		Build:    fmt.Sprintf("goreleaser version %s, commit %s", meta.Version, meta.Commit),
	}
	var problems []error
	for _, t := range targets {
		name := archiveName(t)
		want, ok := sums[name]
		if !ok {
			problems = append(problems, fmt.Errorf("checksums.txt lists no %s: check the archives section of .goreleaser.yaml", name))
			continue
		}
		if err := checkArchive(filepath.Join(dist, name), want, archiveFiles(t)); err != nil {
			problems = append(problems, err)
			continue
		}
		rel.Platforms = append(rel.Platforms, platform{
			OS:     t.OS,
			Arch:   t.Arch,
			URI:    fmt.Sprintf(releaseURL, version, name),
			SHA256: want,
			Bin:    binFor(t),
			Files:  installedFiles(t),
		})
	}
	if err := errors.Join(problems...); err != nil {
		return release{}, fmt.Errorf("release in %s is incomplete:\n%w", dist, err)
	}
	return rel, nil
}

// readChecksums parses goreleaser's checksums file: "<sha256>  <file name>" lines.
func readChecksums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the release checksums: %w; enable the checksum section of .goreleaser.yaml", err)
	}
	defer f.Close()
	sums := map[string]string{}
	scanner := bufio.NewScanner(f)
	for line := 1; scanner.Scan(); line++ {
		fields := strings.Fields(scanner.Text())
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"<sha256>  <file>\", got %q", path, line, scanner.Text())
		}
		sums[fields[1]] = fields[0]
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return sums, nil
}

// checkArchive checks that the archive at path has the sha256 want and holds
// files at its top level.
func checkArchive(path, want string, files []string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading archive: %w", err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("%s has sha256 %s but checksums.txt says %s: build the release again", path, got, want)
	}
	var entries map[string]os.FileMode
	if strings.HasSuffix(path, ".zip") {
		entries, err = zipEntries(data)
	} else {
		entries, err = tarGzEntries(data)
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", path, err)
	}
	var missing []string
	for _, f := range files {
		if _, ok := entries[f]; !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%s lacks %s: check the archives files of .goreleaser.yaml", path, strings.Join(missing, ", "))
	}
	if mode, ok := entries[completionScript]; ok && mode&0o111 == 0 {
		return fmt.Errorf("%s holds %s without execute permission (mode %v): kubectl would not run it", path, completionScript, mode)
	}
	return nil
}

func tarGzEntries(data []byte) (map[string]os.FileMode, error) {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	entries := map[string]os.FileMode{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return nil, err
		}
		entries[strings.TrimPrefix(h.Name, "./")] = h.FileInfo().Mode()
	}
}

func zipEntries(data []byte) (map[string]os.FileMode, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	entries := map[string]os.FileMode{}
	for _, f := range zr.File {
		entries[strings.TrimPrefix(f.Name, "./")] = f.Mode()
	}
	return entries, nil
}
