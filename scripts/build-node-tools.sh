#!/usr/bin/env bash
# Builds what the real-node test bed needs beyond the control plane, from Go modules through the
# Go module proxy: the kubelet (tools/control-plane/go.mod: the control plane's own Kubernetes
# version, so no version skew) and helm (tools/helm/go.mod). Cached like the control plane, in
# ~/.cache/gpuheal/k8s-<version>/bin and ~/.cache/gpuheal/helm-<version>/bin, keyed by go.mod and
# go.sum. Prints two lines: KUBELET=<path> and HELM=<path>.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${GPUHEAL_CACHE:-$HOME/.cache/gpuheal}
command -v go >/dev/null || { echo "build-node-tools: go is not installed" >&2; exit 1; }
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

# build MODULE_DIR CACHE PACKAGE OUTPUT LDFLAGS: go build PACKAGE in MODULE_DIR unless OUTPUT is
# stamped with the module's current go.mod and go.sum.
build() {
  local mod=$1 cache=$2 pkg=$3 out=$4 ldflags=$5
  local stamp
  stamp=$(cat "$mod/go.mod" "$mod/go.sum" 2>/dev/null | sha256sum | cut -c1-16)
  if [[ -x $out && -f $out.stamp && $(cat "$out.stamp") == "$stamp" ]]; then
    return
  fi
  mkdir -p "$(dirname "$out")"
  echo "build-node-tools: building $pkg into $out" >&2
  (
    export GOPATH=$cache/gopath GOCACHE=$cache/gocache GOMODCACHE=$cache/gopath/pkg/mod
    cd "$mod"
    /usr/bin/time -f "build-node-tools: $(basename "$out"): %e s, peak RSS %M KiB" \
      go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg" >&2
  )
  mv "$out.tmp" "$out"
  cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16 > "$out.stamp"
}

cp_mod=$root/tools/control-plane
k8s_version=$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$cp_mod/go.mod")
minor=$(echo "$k8s_version" | cut -d. -f2)
k8s_cache=$cache_root/k8s-$k8s_version
build "$cp_mod" "$k8s_cache" k8s.io/kubernetes/cmd/kubelet "$k8s_cache/bin/kubelet" \
  "-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"

helm_mod=$root/tools/helm
helm_version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" {print $3}' "$helm_mod/go.mod")
helm_cache=$cache_root/helm-$helm_version
build "$helm_mod" "$helm_cache" helm.sh/helm/v3/cmd/helm "$helm_cache/bin/helm" \
  "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"

echo "KUBELET=$k8s_cache/bin/kubelet"
echo "HELM=$helm_cache/bin/helm"
