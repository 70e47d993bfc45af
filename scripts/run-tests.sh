#!/usr/bin/env bash
# Runs every test tier of one build directory with ctest. Kernel tests write to the real
# /dev/kmsg and need root; they skip themselves (reported as skipped, not passed) otherwise.
# Integration tests need the control plane built from Go modules: it is built here first (cached
# in ~/.cache/gpuheal, so only a machine's first run pays it), and so is what a real node needs
# (the real-node tier, label realnode, and `drill --real-node`): the kubelet and helm
# (scripts/build-node-tools.sh, cached the same way) and the images of this build
# (scripts/build-image.sh; GPUHEAL_IMAGE_DIR tells the real node where they are), and the Redfish
# BMC emulator (scripts/build-bmc-emulator.sh, a virtualenv), the S3 server presigned uploads go
# to (scripts/build-s3-server.sh, moto in a virtualenv), Karpenter's and Cluster API's
# CRDs (scripts/build-peer-crds.sh), and the upstream peers the tests run beside gpuheal
# (scripts/build-peer.sh: Prometheus, Karpenter, Cluster API). LABELS (a
# ctest -L regex) or GPUHEAL_SKIP_INTEGRATION=1 (no control plane at all) narrow the run.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
args=()
if [[ ${GPUHEAL_SKIP_INTEGRATION:-0} == 1 ]]; then
  args+=(-LE 'integration|realnode')
else
  bash scripts/build-control-plane.sh >/dev/null
  bash scripts/build-node-tools.sh >/dev/null
  # The Redfish BMC emulator (sushy-tools, a virtualenv from PyPI) the BMC tests power-cycle.
  GPUHEAL_SUSHY_EMULATOR=$(bash scripts/build-bmc-emulator.sh | sed -n 's/^SUSHY_EMULATOR=//p')
  export GPUHEAL_SUSHY_EMULATOR
  export GPUHEAL_S3_SERVER=$(bash scripts/build-s3-server.sh | sed -n 's/^S3_SERVER=//p')
  # Karpenter's and Cluster API's own CRDs (pinned modules through the Go module proxy).
  GPUHEAL_PEER_CRDS=$(bash scripts/build-peer-crds.sh | sed -n 's/^PEER_CRDS=//p')
  export GPUHEAL_PEER_CRDS
  # Karpenter's controller with its kwok provider (the drill tier's control plane runs it).
  bash scripts/build-peer.sh karpenter >/dev/null
  # Cluster API's core manager and its docker provider (in-memory backend), same tier.
  bash scripts/build-peer.sh capi >/dev/null
  # The real Prometheus and promtool (alert unit tests; the real-node tier's scrape).
  GPUHEAL_PROMETHEUS=$(bash scripts/build-peer.sh prometheus | sed -n 's/^PROMETHEUS_DIR=//p')
  export GPUHEAL_PROMETHEUS
  bash scripts/build-image.sh "$build"
  export GPUHEAL_IMAGE_DIR=$(cd "$build" && pwd)/image
fi
[[ -n ${LABELS:-} ]] && args+=(-L "$LABELS")
# Sanitizer builds: a report in any process a test starts (agent, controller, sim) ends that
# process with an error, so the test sees it; otherwise it would only be text on a child's stderr.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1 exitcode=66}
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900 "${args[@]}"
# Nothing a test started may outlive it: every control plane is stopped by its test binary.
if pgrep -f '/tmp/gpuheal-it-[A-Za-z0-9]+/|tools/s3-server/s3_server[.]py' >/dev/null; then
  echo "run-tests: processes left running by the integration tests:" >&2
  pgrep -af '/tmp/gpuheal-it-|tools/s3-server/s3_server[.]py' >&2
  exit 1
fi
