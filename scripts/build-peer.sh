#!/usr/bin/env bash
# Builds an upstream peer that gpuheal's tests run beside it, from the module pinned in
# tools/peers/<peer>/go.mod (and go.sum), through the Go module proxy:
#
#   build-peer.sh prometheus   prometheus and promtool (only Kubernetes service discovery compiled
#                              in: tags remove_all_sd,enable_kubernetes_sd)
#   build-peer.sh karpenter    Karpenter's controller with its kwok cloud provider
#                              (sigs.k8s.io/karpenter/kwok), and its CRDs: NodePool, NodeClaim,
#                              NodeOverlay and KWOKNodeClass
#   build-peer.sh capi         Cluster API's core manager (sigs.k8s.io/cluster-api) and the docker
#                              infrastructure provider of its test module, whose inMemory backend
#                              needs no cloud; their CRDs (crds/core, crds/capd) and webhook
#                              configurations (webhooks/core.yaml, webhooks/capd.yaml)
#
# Everything (binaries, module cache, build cache) lives in ~/.cache/gpuheal/<peer>-<hash of
# go.mod and go.sum>/, so only the first run on a machine pays the build. Prints one line,
# <PEER>_DIR=<that directory> (binaries in bin/, CRDs in crds/), and the version on stderr.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
peer=${1:-}
case $peer in
  prometheus | karpenter | capi) ;;
  *) echo "usage: build-peer.sh prometheus|karpenter|capi" >&2; exit 2 ;;
esac
mod=$root/tools/peers/$peer
stamp=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
out=${GPUHEAL_CACHE:-$HOME/.cache/gpuheal}/$peer-$stamp
var=$(echo "$peer" | tr '[:lower:]' '[:upper:]')_DIR
if [[ -f $out/.complete ]]; then
  echo "$var=$out"
  exit 0
fi
command -v go >/dev/null || { echo "build-peer: go is not installed" >&2; exit 1; }
rm -rf "$out/bin" "$out/crds" "$out/webhooks"
mkdir -p "$out/bin" "$out/crds"
export GOPATH=$out/gopath GOCACHE=$out/gocache GOMODCACHE=$out/gopath/pkg/mod
export GOFLAGS=-mod=readonly GOTOOLCHAIN=local CGO_ENABLED=0
cd "$mod"
start=$(date +%s)
echo "build-peer: building $peer into $out/bin (first run: minutes)" >&2
build() {  # OUT PACKAGE [go build flags...]
  local o=$1 p=$2
  shift 2
  /usr/bin/time -f "build-peer: $o: %e s, peak RSS %M KiB" \
    go build -trimpath -ldflags "-s -w" "$@" -o "$out/bin/$o.tmp" "$p" >&2
  mv "$out/bin/$o.tmp" "$out/bin/$o"
}
moddir() { go list -m -f '{{.Dir}}' "$1"; }
case $peer in
  prometheus)
    build prometheus github.com/prometheus/prometheus/cmd/prometheus -tags remove_all_sd,enable_kubernetes_sd
    build promtool github.com/prometheus/prometheus/cmd/promtool -tags remove_all_sd,enable_kubernetes_sd
    ;;
  karpenter)
    build karpenter sigs.k8s.io/karpenter/kwok
    src=$(moddir sigs.k8s.io/karpenter)
    cp "$src"/pkg/apis/crds/karpenter.sh_*.yaml "$src"/kwok/apis/crds/*.yaml "$out/crds/"
    ;;
  capi)
    build capi-manager sigs.k8s.io/cluster-api
    build capd-manager sigs.k8s.io/cluster-api/test/infrastructure/docker
    core=$(moddir sigs.k8s.io/cluster-api)
    capd=$(moddir sigs.k8s.io/cluster-api/test)/infrastructure/docker
    mkdir -p "$out/crds/core" "$out/crds/capd" "$out/webhooks"
    cp "$core"/config/crd/bases/*.yaml "$out/crds/core/"
    cp "$capd"/config/crd/bases/*.yaml "$out/crds/capd/"
    cp "$core"/config/webhook/manifests.yaml "$out/webhooks/core.yaml"
    cp "$capd"/config/webhook/manifests.yaml "$out/webhooks/capd.yaml"
    chmod -R u+w "$out/crds" "$out/webhooks"
    ;;
esac
case $peer in
  prometheus) main_module=github.com/prometheus/prometheus ;;
  karpenter) main_module=sigs.k8s.io/karpenter ;;
  capi) main_module="sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/test" ;;
esac
# shellcheck disable=SC2086 # capi: two modules, one line each
go list -m -f '{{.Path}} {{.Version}}' $main_module | tee "$out/version" >&2
# The caches are only needed to build (a changed go.mod builds into a new directory).
chmod -R u+w "$out/gopath" && rm -rf "$out/gopath" "$out/gocache"
touch "$out/.complete"
echo "build-peer: done in $(( $(date +%s) - start )) s" >&2
echo "$var=$out"
