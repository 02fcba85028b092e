#!/usr/bin/env bash
# Publishes the release of the tag checked out (vX.Y.Z) and renders what must
# follow it from the very files it published:
#   1. goreleaser builds the archives and uploads them with checksums.txt;
#   2. hack/image pushes the multi-platform image, tagged like the release;
#   3. hack/krew renders plugins/rebalance.yaml from the archives in dist/
#      (the uploaded bytes, checked against checksums.txt), and the tag is
#      pinned in deploy/host/kustomization.yaml.
# Commit those two files to main afterwards: the custom krew index reads
# plugins/ from main. Nothing else ever writes plugins/rebalance.yaml.
#
# Usage: GITHUB_TOKEN=... hack/release.sh   (registry credentials as for docker push)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tag=$(git describe --tags --exact-match 2>/dev/null) || { echo "release: check out a vX.Y.Z tag first" >&2; exit 1; }
[[ -z "$(git status --porcelain)" ]] || { echo "release: the work tree is not clean" >&2; exit 1; }

goreleaser=$(hack/install-goreleaser.sh)
"$goreleaser" release --clean
(cd hack/image && go run . -root "$root" -version "$tag" -o "$root/dist/kubectl-rebalance-image.tar" \
  -push "ghcr.io/kubectl-rebalance/kubectl-rebalance:$tag")
go run ./hack/krew -dist dist -version "$tag" -o plugins/rebalance.yaml
sed -i "s/^    newTag: .*/    newTag: $tag/" deploy/host/kustomization.yaml deploy/failback/kustomization.yaml
sed -i "s#image: ghcr.io/kubectl-rebalance/kubectl-rebalance:.*#image: ghcr.io/kubectl-rebalance/kubectl-rebalance:$tag#" deploy/host/deployment.yaml deploy/failback/deployment.yaml
echo "now commit to main: git add plugins/rebalance.yaml deploy/host deploy/failback && git commit -m \"release $tag: krew manifest and image tag\""
