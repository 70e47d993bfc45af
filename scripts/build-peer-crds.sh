#!/usr/bin/env bash
# Fetches the upstream CRDs the controller tests install — Karpenter's NodeClaim and Cluster API's
# Machine and MachineHealthCheck — from the modules pinned in tools/peer-crds/go.mod (and go.sum),
# through the Go module proxy. Cached in ~/.cache/gpuheal/peer-crds-<hash of go.mod and go.sum>.
# Prints one line: PEER_CRDS=<directory of the CRD files>.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${GPUHEAL_CACHE:-$HOME/.cache/gpuheal}
mod=$root/tools/peer-crds
stamp=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
out=$cache_root/peer-crds-$stamp
if [[ ! -f $out/.complete ]]; then
  command -v go >/dev/null || { echo "build-peer-crds: go is not installed" >&2; exit 1; }
  echo "build-peer-crds: fetching the Karpenter and Cluster API modules into $out" >&2
  rm -rf "$out"
  mkdir -p "$out/crds"
  export GOMODCACHE=$out/gomodcache GOFLAGS=-mod=readonly GOTOOLCHAIN=local
  dir() { (cd "$mod" && go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'); }
  karpenter=$(dir sigs.k8s.io/karpenter)
  capi=$(dir sigs.k8s.io/cluster-api)
  cp "$karpenter/pkg/apis/crds/karpenter.sh_nodeclaims.yaml" "$out/crds/"
  cp "$capi/core/config/crd/bases/cluster.x-k8s.io_machines.yaml" \
    "$capi/core/config/crd/bases/cluster.x-k8s.io_machinehealthchecks.yaml" "$out/crds/"
  chmod -R u+w "$out/gomodcache" && rm -rf "$out/gomodcache"
  touch "$out/.complete"
fi
echo "PEER_CRDS=$out/crds"
