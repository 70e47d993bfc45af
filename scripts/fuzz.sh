#!/usr/bin/env bash
# Runs each libFuzzer target for N seconds on its corpus (new inputs are written to the corpus).
set -euo pipefail
build=${1:-build-fuzz}
seconds=${2:-60}
cd "$(dirname "$0")/.."
for t in line_parser config npd_rules recovery_request; do
  echo "== fuzz_$t for ${seconds}s"
  "$build/test/fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -max_len=16384 "test/fuzz/corpus/$t"
done
