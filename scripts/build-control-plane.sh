#!/usr/bin/env bash
# Builds the test control plane from Go modules: etcd, kube-apiserver, kube-controller-manager
# and kube-scheduler, at the versions tools/control-plane/go.mod pins, through the Go module
# proxy. Everything (binaries, GOPATH, GOCACHE) lives in ~/.cache/gpuheal/k8s-<version>/, so
# only the first run on a machine pays the build. Prints the directory holding the binaries.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mod=$root/tools/control-plane
k8s_version=$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$mod/go.mod")
minor=$(echo "$k8s_version" | cut -d. -f2)
cache=${GPUHEAL_CACHE:-$HOME/.cache/gpuheal}/k8s-$k8s_version
bin=$cache/bin
stamp=$(cat "$mod/go.mod" "$mod/go.sum" 2>/dev/null | sha256sum | cut -c1-16)
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler)

have_all=1
for b in "${binaries[@]}"; do [[ -x $bin/$b ]] || have_all=0; done
if [[ $have_all == 1 && -f $bin/.stamp && $(cat "$bin/.stamp") == "$stamp" ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "build-control-plane: go is not installed" >&2; exit 1; }
mkdir -p "$bin"
export GOPATH=$cache/gopath GOCACHE=$cache/gocache GOMODCACHE=$cache/gopath/pkg/mod
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean"
cd "$mod"
start=$(date +%s)
echo "build-control-plane: building Kubernetes $k8s_version and etcd into $bin (first run: tens of minutes)" >&2
for b in kube-apiserver kube-controller-manager kube-scheduler; do
  /usr/bin/time -f "build-control-plane: $b: %e s, peak RSS %M KiB" \
    go build -trimpath -ldflags "$ldflags" -o "$bin/$b.tmp" "k8s.io/kubernetes/cmd/$b" >&2
  mv "$bin/$b.tmp" "$bin/$b"
done
/usr/bin/time -f "build-control-plane: etcd: %e s, peak RSS %M KiB" \
  go build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3 >&2
mv "$bin/etcd.tmp" "$bin/etcd"
# go build may have completed go.sum; stamp what the binaries were built from.
cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16 > "$bin/.stamp"
echo "build-control-plane: done in $(( $(date +%s) - start )) s" >&2
echo "$bin"
