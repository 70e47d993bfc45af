#!/usr/bin/env bash
# Runs the benchmarks whose output docs/performance.md records.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
"$build/bench/bench_classify"
if [[ $(id -u) -eq 0 ]]; then
  "$build/bench/bench_kmsg"
else
  echo "bench_kmsg skipped: it writes to /dev/kmsg and needs root" >&2
fi
"$build/bench/bench_kube_decode"
bash scripts/build-control-plane.sh >/dev/null
"$build/bench/bench_kube_roundtrip"
"$build/bench/bench_nvml"
"$build/bench/bench_controller"
