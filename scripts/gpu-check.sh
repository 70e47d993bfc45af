#!/usr/bin/env bash
# On a machine with NVIDIA GPUs: builds gpuheal and runs its NVML backend once against the real
# GPUs (read-only: the drain state is queried, never changed), then writes docs/gpu-check.md.
# Under 5 minutes on a warm machine. Usage: bash scripts/gpu-check.sh [OUT.md]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/gpu-check.md}
bash scripts/setup.sh >/dev/null
cmake --preset default -DGPUHEAL_BENCH=OFF >/dev/null
cmake --build --preset default --target gpuheal -j "$(nproc)" >/dev/null
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
status=0
timeout 120 build/gpuheal nvml-check --wait 20s >"$tmp" 2>&1 || status=$?
{
  echo "# gpuheal NVML check on a real GPU"
  echo
  echo "Produced by \`bash scripts/gpu-check.sh\` on $(date -u +%Y-%m-%d) (exit status $status)."
  echo
  echo "Host: $(uname -sr); nvidia-smi: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || echo 'not found')"
  echo
  echo '```'
  cat "$tmp"
  echo '```'
} >"$out"
cat "$out"
exit "$status"
