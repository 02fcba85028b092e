#!/usr/bin/env bash
# Builds the real control-plane binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, karmada-aggregated-apiserver, karmada-controller-manager,
# karmada-scheduler, karmada-webhook, kwok) from the pinned modules in test/controlplane,
# and copies Karmada's CRDs, its webhook configuration and kwok's stages next to them.
# Does nothing when the output is up to date with the pinned versions.
#
# Output: ${CONTROLPLANE_DIR:-_output/controlplane}/{bin,crds,webhook-configuration.yaml,kwok-stages.yaml}
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
src="$root/test/controlplane"
out=${CONTROLPLANE_DIR:-$root/_output/controlplane}
mkdir -p "$out"
out=$(cd "$out" && pwd)

kube_version=v1.35.3
karmada_version=v1.18.2

binaries=(server kube-apiserver kube-controller-manager kube-scheduler aggregated-apiserver
  controller-manager scheduler webhook kwok)

stamp=$( { go version; cat "$src/go.mod" "$src/go.sum" "$src/kwok/go.mod" "$src/kwok/go.sum" "$0"; } | sha256sum | cut -d' ' -f1)
if [[ -f "$out/stamp" && "$(cat "$out/stamp")" == "$stamp" ]]; then
  missing=0
  for b in "${binaries[@]}"; do [[ -x "$out/bin/$b" ]] || missing=1; done
  if [[ $missing == 0 ]]; then
    echo "control plane binaries in $out are up to date"
    exit 0
  fi
fi

rm -f "$out/stamp"
mkdir -p "$out/bin"
ldflags="-s -w"
for v in gitVersion=$kube_version gitMajor=1 gitMinor=35 gitTreeState=clean; do
  ldflags+=" -X k8s.io/component-base/version.$v"
done
ldflags+=" -X github.com/karmada-io/karmada/pkg/version.gitVersion=$karmada_version"
ldflags+=" -X github.com/karmada-io/karmada/pkg/version.gitTreeState=clean"

start=$SECONDS
echo "building control plane binaries into $out/bin (a cold build takes several minutes)"
(cd "$src" && CGO_ENABLED=0 go build -ldflags "$ldflags" -o "$out/bin/" tool)
(cd "$src/kwok" && CGO_ENABLED=0 go build -ldflags "-s -w" -o "$out/bin/" tool)

karmada_dir=$(cd "$src" && go list -m -f '{{.Dir}}' github.com/karmada-io/karmada)
rm -rf "$out/crds"
mkdir -p "$out/crds"
find "$karmada_dir/charts/karmada/_crds/bases" -name '*.yaml' -exec cp {} "$out/crds/" \;
chmod -R u+w "$out/crds"
cp "$karmada_dir/artifacts/deploy/webhook-configuration.yaml" "$out/webhook-configuration.yaml"
chmod u+w "$out/webhook-configuration.yaml"

# kwok ships no default stages in its binary (kwokctl passes them); take the
# fast node/pod lifecycle and the lease heartbeat from the pinned kwok module.
kwok_dir=$(cd "$src/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
stages="$kwok_dir/kustomize/stage"
{
  for f in "$stages/node/fast/node-initialize.yaml" \
    "$stages/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
    "$stages/pod/fast/pod-ready.yaml" "$stages/pod/fast/pod-complete.yaml" \
    "$stages/pod/fast/pod-delete.yaml"; do
    echo "---"
    cat "$f"
  done
} > "$out/kwok-stages.yaml"

echo "$stamp" > "$out/stamp"
echo "built control plane binaries in $((SECONDS - start))s"
