// Command krew renders the krew plugin manifest of kubectl-rebalance from the
// archives of a goreleaser release, and checks manifests against the rules
// krew and krew-index apply.
//
// Usage:
//
//	go run ./hack/krew [-dist dist] [-version vX.Y.Z] [-o plugins/rebalance.yaml]
//	go run ./hack/krew -check plugins/rebalance.yaml
//
// Rendering reads dist/metadata.json and dist/checksums.txt, checks that every
// archive is there with the listed checksum and the expected files, and writes
// the manifest (to stdout without -o). The version defaults to the release's,
// with the leading "v" that krew requires.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("krew", flag.ContinueOnError)
	dist := fs.String("dist", "dist", "goreleaser's output directory of the release to render")
	version := fs.String("version", "", "plugin version expected, e.g. v0.1.0; it must be the version of the archives in <dist> (default: the release's version from <dist>/metadata.json)")
	out := fs.String("o", "", "file to write the manifest to (default: stdout)")
	check := fs.String("check", "", "only check this manifest file against krew's rules")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: pass options as flags, see -h", fs.Args())
	}

	if *check != "" {
		return validateFile(*check)
	}

	rel, err := loadRelease(*dist, *version)
	if err != nil {
		return err
	}
	data, err := render(rel)
	if err != nil {
		return err
	}
	if err := validate(pluginName, data); err != nil {
		return fmt.Errorf("rendered manifest is invalid, fix hack/krew/rebalance.yaml.tmpl: %w", err)
	}
	if *out == "" {
		_, err = os.Stdout.Write(data)
		return err
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		return fmt.Errorf("writing the manifest: %w", err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s for %s\n", *out, rel.Version)
	return nil
}
