#!/usr/bin/env bash
# Builds the real control-plane binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, karmada-aggregated-apiserver, karmada-controller-manager, karmada-scheduler-estimator,
# karmada-scheduler, karmada-webhook, kwok) from the pinned modules in test/controlplane,
# and copies Karmada's CRDs, its webhook configuration and kwok's stages next to them.
# Does nothing when the output is up to date with the pinned versions.
#
# KARMADA_VERSION picks the Karmada version (default v1.18.2, the module test/controlplane);
# another version is built from its own module test/controlplane/karmada-$KARMADA_VERSION,
# which pins the Kubernetes release that Karmada version was released with.
#
# Output: ${CONTROLPLANE_DIR:-_output/controlplane} for the default version,
# ${CONTROLPLANE_DIR:-_output/controlplane-$KARMADA_VERSION} for another one:
# {bin,crds,manifests,webhook-configuration.yaml,kwok-stages.yaml,versions}
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
default_version=v1.18.2
karmada_version=${KARMADA_VERSION:-$default_version}
if [[ $karmada_version == "$default_version" ]]; then
  src="$root/test/controlplane"
  out=${CONTROLPLANE_DIR:-$root/_output/controlplane}
else
  src="$root/test/controlplane/karmada-$karmada_version"
  out=${CONTROLPLANE_DIR:-$root/_output/controlplane-$karmada_version}
  if [[ ! -f "$src/go.mod" ]]; then
    echo "no pinned module for Karmada $karmada_version (test/controlplane/karmada-$karmada_version/go.mod);" \
      "versions available: $default_version $(cd "$root/test/controlplane" && ls -d karmada-v* 2>/dev/null | sed 's/^karmada-//' | tr '\n' ' ')" >&2
    exit 1
  fi
fi
kwok_src="$root/test/controlplane/kwok"
mkdir -p "$out"
out=$(cd "$out" && pwd)

binaries=(server kube-apiserver kube-controller-manager kube-scheduler aggregated-apiserver scheduler-estimator
  controller-manager scheduler webhook agent descheduler kwok)

stamp=$( { go version; echo "$karmada_version"; cat "$src/go.mod" "$src/go.sum" "$kwok_src/go.mod" "$kwok_src/go.sum" "$0"; } | sha256sum | cut -d' ' -f1)
if [[ -f "$out/stamp" && "$(cat "$out/stamp")" == "$stamp" ]]; then
  missing=0
  for b in "${binaries[@]}"; do [[ -x "$out/bin/$b" ]] || missing=1; done
  if [[ $missing == 0 ]]; then
    echo "control plane binaries (Karmada $karmada_version) in $out are up to date"
    exit 0
  fi
fi

# The module pins both; the version stamped into the binaries is what they pin.
pinned=$(cd "$src" && go list -m -f '{{.Version}}' github.com/karmada-io/karmada)
if [[ $pinned != "$karmada_version" ]]; then
  echo "$src pins Karmada $pinned, not $karmada_version" >&2
  exit 1
fi
kube_version=$(cd "$src" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
kube_minor=$(echo "$kube_version" | cut -d. -f2)

rm -f "$out/stamp"
mkdir -p "$out/bin"
ldflags="-s -w"
for v in gitVersion=$kube_version gitMajor=1 gitMinor=$kube_minor gitTreeState=clean; do
  ldflags+=" -X k8s.io/component-base/version.$v"
done
ldflags+=" -X github.com/karmada-io/karmada/pkg/version.gitVersion=$karmada_version"
ldflags+=" -X github.com/karmada-io/karmada/pkg/version.gitTreeState=clean"

# go list -m reports no Dir for a module not yet in the module cache (a fresh
# machine, CI): download it first, or the tags below and the CRDs are missed.
(cd "$src" && go mod download github.com/karmada-io/karmada)
karmada_dir=$(cd "$src" && go list -m -f '{{.Dir}}' github.com/karmada-io/karmada)
if [[ -z $karmada_dir || ! -f $karmada_dir/hack/build.sh ]]; then
  echo "cannot find the source of github.com/karmada-io/karmada $karmada_version in the module cache (got '$karmada_dir'); check GOPROXY and GOMODCACHE" >&2
  exit 1
fi
kube_tools=(go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver
  k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
karmada_tools=()
for c in aggregated-apiserver controller-manager scheduler scheduler-estimator webhook agent descheduler; do
  karmada_tools+=("github.com/karmada-io/karmada/cmd/$c")
done
# Karmada's components are built with the tags of that release's own
# hack/build.sh. v1.18 needs kubernetes_protomessage_one_more_release:
# k8s.io/api v0.35 keeps ProtoMessage() behind it, and the scheduler-estimator's
# gRPC messages embed core/v1 types, so without it karmada-scheduler panics on
# its first call to an estimator. Older releases use no tag.
karmada_tags=$(grep -oE -- '-tags[ =][A-Za-z0-9_,]+' "$karmada_dir/hack/build.sh" 2>/dev/null | head -1 | sed -E 's/^-tags[ =]//' || true)

start=$SECONDS
echo "building control plane binaries (Karmada $karmada_version, Kubernetes $kube_version) into $out/bin (a cold build takes several minutes)"
(cd "$src" && CGO_ENABLED=0 go build -ldflags "$ldflags" -o "$out/bin/" "${kube_tools[@]}")
(cd "$src" && CGO_ENABLED=0 go build -tags "$karmada_tags" -ldflags "$ldflags" -o "$out/bin/" "${karmada_tools[@]}")
(cd "$kwok_src" && CGO_ENABLED=0 go build -ldflags "-s -w" -o "$out/bin/" tool)

rm -rf "$out/crds"
mkdir -p "$out/crds"
find "$karmada_dir/charts/karmada/_crds/bases" -name '*.yaml' -exec cp {} "$out/crds/" \;
chmod -R u+w "$out/crds"
cp "$karmada_dir/artifacts/deploy/webhook-configuration.yaml" "$out/webhook-configuration.yaml"
chmod u+w "$out/webhook-configuration.yaml"
# The release's own deploy manifests: the flags and feature gates local-up-karmada runs each
# component with (test/harness/manifests.go reads the container commands).
rm -rf "$out/manifests"
mkdir -p "$out/manifests"
for f in deploy/karmada-scheduler.yaml deploy/karmada-controller-manager.yaml deploy/karmada-scheduler-estimator.yaml \
  deploy/karmada-descheduler.yaml agent/karmada-agent.yaml; do
  cp "$karmada_dir/artifacts/$f" "$out/manifests/"
done
chmod -R u+w "$out/manifests"

# kwok ships no default stages in its binary (kwokctl passes them); take the
# fast node/pod lifecycle and the lease heartbeat from the pinned kwok module.
(cd "$kwok_src" && go mod download sigs.k8s.io/kwok)
kwok_dir=$(cd "$kwok_src" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
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

# The harness reads which versions it starts (their flags differ).
printf 'karmada=%s\nkubernetes=%s\n' "$karmada_version" "$kube_version" > "$out/versions"
echo "$stamp" > "$out/stamp"
echo "built control plane binaries in $((SECONDS - start))s"
