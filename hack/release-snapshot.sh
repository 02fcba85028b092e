#!/usr/bin/env bash
# Builds a release locally, exactly as a tagged release would be built but
# without publishing anything: every archive and checksums.txt into dist/,
# then the krew manifest rendered from them into dist/krew/rebalance.yaml.
#
# Usage: hack/release-snapshot.sh   (or make release-snapshot)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

goreleaser=$(hack/install-goreleaser.sh)
"$goreleaser" check
"$goreleaser" release --snapshot --clean
mkdir -p dist/krew
go run ./hack/krew -dist dist -o dist/krew/rebalance.yaml
