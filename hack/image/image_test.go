package main

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestImageTarball builds the image as `make image` does, loads the tar as
// a registry client would (an OCI image layout), and checks the platforms,
// the entrypoint, the user and the files of every platform's image; the
// binary of this machine's platform is run from the extracted layer.
func TestImageTarball(t *testing.T) {
	out := filepath.Join(t.TempDir(), "kubectl-rebalance.tar")
	tag := DefaultRepository + ":v9.9.9-test"
	if err := Build(Options{
		Root: "../..", Version: "v9.9.9-test", Platforms: []string{"linux/amd64", "linux/arm64"},
		CABundle: caBundle, Output: out, Tag: tag,
	}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	untar(t, out, dir)
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != tag {
		t.Fatalf("index.json should name one image, %s: %+v", tag, topManifest.Manifests)
	}
	index, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range manifest.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("platforms %v, want linux/amd64 and linux/arm64", platforms)
	}

	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, d := range manifest.Manifests {
		arch := d.Platform.Architecture
		t.Run(arch, func(t *testing.T) {
			img, err := index.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Architecture != arch || cfg.OS != "linux" {
				t.Errorf("config platform %s/%s", cfg.OS, cfg.Architecture)
			}
			if !slices.Equal(cfg.Config.Entrypoint, []string{Binary}) {
				t.Errorf("entrypoint %q, want [%s]", cfg.Config.Entrypoint, Binary)
			}
			if cfg.Config.User != User {
				t.Errorf("user %q, want %s (non-root)", cfg.Config.User, User)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("want one layer on an empty base, got %d (%v)", len(layers), err)
			}
			files := extract(t, img)
			bin, ok := files[strings.TrimPrefix(Binary, "/")]
			if !ok {
				t.Fatalf("no %s in the image", Binary)
			}
			if !strings.Contains(string(files["etc/ssl/certs/ca-certificates.crt"]), "BEGIN CERTIFICATE") {
				t.Error("no CA certificates in the image")
			}
			if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") {
				t.Error("no non-root user in /etc/passwd")
			}
			binPath := filepath.Join(t.TempDir(), "kubectl-rebalance")
			if err := os.WriteFile(binPath, bin, 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := elf.Open(binPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Machine != machines[arch] {
				t.Errorf("binary built for %v, want %v", f.Machine, machines[arch])
			}
			for _, prog := range f.Progs {
				if prog.Type == elf.PT_INTERP {
					t.Error("the binary is dynamically linked; the image has no libc")
				}
			}
			if arch == runtime.GOARCH && runtime.GOOS == "linux" {
				got, err := exec.Command(binPath, "version").CombinedOutput()
				if err != nil || !strings.Contains(string(got), "v9.9.9-test") {
					t.Errorf("running the image's binary: %v\n%s", err, got)
				}
			}
		})
	}
}

func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// extract reads the regular files of img's filesystem.
func extract(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = data
		}
	}
}
