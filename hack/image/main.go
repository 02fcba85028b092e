// Command image builds the container image of kubectl-rebalance (the
// descheduler daemon of deploy/host) for linux/amd64 and linux/arm64, without
// a Docker daemon and without pulling a base image: each platform's image is
// one layer on an empty base holding the static binary, Debian's CA
// certificates and a non-root user. It writes the multi-platform image as an
// OCI image layout in a tar file (loadable with `docker load` from Docker 25,
// `podman load`, or `skopeo copy oci-archive:...`), and with -push sends it
// to a registry.
//
// Usage (from this directory; `make image` does it):
//
//	go run . -root ../.. -version v0.1.0 -o ../../_output/image/kubectl-rebalance.tar [-push ghcr.io/kubectl-rebalance/kubectl-rebalance:v0.1.0]
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Binary is where the image keeps the plugin; it is the entrypoint.
	Binary = "/usr/local/bin/kubectl-rebalance"
	// User is the image's non-root user and group, the same numbers as
	// distroless's nonroot so that existing securityContexts keep working.
	User = "65532:65532"
	// DefaultRepository is where releases push the image, tagged with the
	// release's git tag; deploy/host references it.
	DefaultRepository = "ghcr.io/kubectl-rebalance/kubectl-rebalance"
	caBundle          = "/etc/ssl/certs/ca-certificates.crt"
	module            = "github.com/kubectl-rebalance/kubectl-rebalance"
)

// Options of one build.
type Options struct {
	Root      string   // the repository root
	Version   string   // stamped into the binary and the image's labels
	Platforms []string // os/arch pairs
	CABundle  string   // the CA certificates to copy in
	Output    string   // the OCI layout tar to write
	Tag       string   // the reference recorded in the tar (and pushed)
	Push      bool
	// Created is the images' creation time: the commit's, so that a
	// rebuild of one commit gives the same image.
	Created time.Time
}

func main() {
	o := Options{}
	var platforms, push string
	flag.StringVar(&o.Root, "root", "../..", "the repository root")
	flag.StringVar(&o.Version, "version", "v0.0.0-dev", "version stamped into the binary, e.g. v0.1.0")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch pairs")
	flag.StringVar(&o.CABundle, "ca-bundle", caBundle, "CA certificates to put in the image (Debian's ca-certificates package)")
	flag.StringVar(&o.Output, "o", "../../_output/image/kubectl-rebalance.tar", "the OCI image layout tar to write")
	flag.StringVar(&push, "push", "", "also push the image to this reference, e.g. "+DefaultRepository+":v0.1.0")
	flag.Parse()
	o.Platforms = strings.Split(platforms, ",")
	o.Tag = DefaultRepository + ":" + o.Version
	if push != "" {
		o.Tag, o.Push = push, true
	}
	if err := Build(o); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

// Build builds the image of every platform, writes the tar and pushes.
func Build(o Options) error {
	if o.Created.IsZero() {
		o.Created = commitTime(o.Root)
	}
	ca, err := os.ReadFile(o.CABundle)
	if err != nil {
		return fmt.Errorf("reading the CA certificates: %w; on Debian install them with apt-get install ca-certificates, or pass -ca-bundle", err)
	}
	ref, err := name.ParseReference(o.Tag)
	if err != nil {
		return fmt.Errorf("invalid image reference %q: %w", o.Tag, err)
	}
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		osName, arch, ok := strings.Cut(p, "/")
		if !ok {
			return fmt.Errorf("invalid platform %q: use os/arch, e.g. linux/arm64", p)
		}
		img, err := platformImage(o, osName, arch, ca)
		if err != nil {
			return err
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}},
		})
	}
	if err := writeTar(o.Output, index, ref.Name()); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s (%s, %s)\n", o.Output, ref.Name(), strings.Join(o.Platforms, ", "))
	if o.Push {
		if err := remote.WriteIndex(ref, index, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref.Name(), err)
		}
		fmt.Fprintf(os.Stderr, "pushed %s\n", ref.Name())
	}
	return nil
}

// platformImage is the image of one platform: one layer on nothing.
func platformImage(o Options, osName, arch string, ca []byte) (v1.Image, error) {
	bin, err := buildBinary(o, osName, arch)
	if err != nil {
		return nil, err
	}
	layerTar, err := rootfs(bin, ca, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = osName, arch
	cfg.Config = v1.Config{
		Entrypoint: []string{Binary},
		User:       User,
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + caBundle},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "kubectl-rebalance",
			"org.opencontainers.image.description": "kubectl rebalance deschedule as a daemon, for Karmada control planes",
			"org.opencontainers.image.source":      "https://" + module,
			"org.opencontainers.image.version":     o.Version,
			"org.opencontainers.image.licenses":    "Apache-2.0",
		},
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: o.Created})
}

// buildBinary compiles the static plugin for osName/arch.
func buildBinary(o Options, osName, arch string) ([]byte, error) {
	out := filepath.Join(os.TempDir(), fmt.Sprintf("kubectl-rebalance-image-%s-%s-%d", osName, arch, os.Getpid()))
	defer os.Remove(out)
	ldflags := fmt.Sprintf("-s -w -X %s/pkg/version.version=%s", module, o.Version)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/kubectl-rebalance")
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+osName, "GOARCH="+arch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building kubectl-rebalance for %s/%s: %w\n%s", osName, arch, err, msg)
	}
	return os.ReadFile(out)
}

// rootfs is the image's only layer: the binary, the CA certificates, and
// the passwd and group entries of the non-root user.
func rootfs(bin, ca []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, Uid: uid, Gid: uid, ModTime: mtime})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	steps := []error{
		dir("etc/", 0), dir("etc/ssl/", 0), dir("etc/ssl/certs/", 0),
		file("etc/ssl/certs/ca-certificates.crt", 0o644, ca),
		file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")),
		file("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")),
		dir("home/", 0), dir("home/nonroot/", 65532),
		dir("tmp/", 0),
		dir("usr/", 0), dir("usr/local/", 0), dir("usr/local/bin/", 0),
		file(strings.TrimPrefix(Binary, "/"), 0o755, bin),
		tw.Close(),
	}
	for _, err := range steps {
		if err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// writeTar writes index as an OCI image layout whose index.json names it
// tag, and tars the layout into path.
func writeTar(path string, index v1.ImageIndex, tag string) error {
	dir, err := os.MkdirTemp("", "kubectl-rebalance-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
		// containerd and Docker read this one to name what they load.
		"io.containerd.image.name": tag,
	})); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// commitTime is the time of the checked-out commit, or the Unix epoch
// outside a git work tree.
func commitTime(root string) time.Time {
	cmd := exec.Command("git", "log", "-1", "--format=%ct")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return time.Unix(0, 0).UTC()
	}
	var sec int64
	if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &sec); err != nil {
		return time.Unix(0, 0).UTC()
	}
	return time.Unix(sec, 0).UTC()
}
