#!/usr/bin/env bash
# Installs a pinned goreleaser v2 into _output/tools/bin, built from source
# through the Go module proxy, so that every machine releases with the same
# tool. Prints the path of the binary on stdout.
#
# The pin is the newest v2 release whose go.mod accepts the Go toolchain the
# project builds with (v2.18 needs a newer Go); move it with the toolchain.
#
# Usage: hack/install-goreleaser.sh
# Env:   GORELEASER_VERSION overrides the pinned version (for trying an upgrade).
#        TOOLS_BIN overrides the install directory.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
version=${GORELEASER_VERSION:-v2.16.0}
bin_dir=${TOOLS_BIN:-$root/_output/tools/bin}
bin="$bin_dir/goreleaser"
stamp="$bin_dir/.goreleaser.version"

# A rebuild takes minutes, so skip it when the binary already matches the pin.
if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$bin_dir"
echo "installing goreleaser $version into $bin_dir (builds from source, takes a few minutes)" >&2
# Run outside the repository so that our go.mod neither constrains nor records
# goreleaser's dependencies.
(cd "$bin_dir" && GOBIN="$bin_dir" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
  go install "github.com/goreleaser/goreleaser/v2@$version")
echo "$version" >"$stamp"
echo "$bin"
