#!/usr/bin/env bash
# Runs the benchmarks whose output docs/performance.md records.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
"$build/bench/bench_classify"
if [[ $(id -u) -eq 0 ]]; then
  "$build/bench/bench_kmsg"
  "$build/bench/bench_diagnostics"
else
  echo "bench_kmsg and bench_diagnostics skipped: they write to /dev/kmsg and need root" >&2
fi
"$build/bench/bench_footprint"
"$build/bench/bench_kube_decode"
"$build/bench/bench_reconcile"
bash scripts/build-control-plane.sh >/dev/null
"$build/bench/bench_kube_roundtrip"
"$build/bench/bench_nvml"
"$build/bench/bench_controller"
# The same without the sim: nodes nothing keeps alive, so the API server serves only the benchmark.
"$build/bench/bench_controller" --no-sim
# 5,000 nodes + 150,000 pods: about 7 minutes on 2 cores, most of it creating the pods.
if [[ ${BENCH_LONG:-0} == 1 ]]; then
  "$build/bench/bench_controller" --memory
else
  echo "bench_controller --memory skipped (7 min): BENCH_LONG=1 runs it" >&2
fi
"$build/bench/bench_sim"
# The drill, end to end (docs/drill.md): p50/p99 of each step over fresh simulated clusters.
# 50 runs take about 17 minutes on 2 cores; without BENCH_LONG, 10.
"$build/gpuheal" drill --repeat "$([[ ${BENCH_LONG:-0} == 1 ]] && echo 50 || echo 10)"
# The drill on 1,500 simulated nodes in 15 pools (a workload of 1,500 pods): about 17 minutes.
if [[ ${BENCH_LONG:-0} == 1 ]]; then
  "$build/gpuheal" drill --nodes 1500 --pools 15 --repeat 10
else
  echo "gpuheal drill --nodes 1500 skipped (17 min): BENCH_LONG=1 runs it" >&2
fi
