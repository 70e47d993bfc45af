#!/usr/bin/env bash
# Installs the Debian packages gpuheal needs to build and test. Idempotent: when everything is
# present it only runs dpkg-query (well under a second); `apt-get update` only when something is missing.
set -euo pipefail
# Usage: setup.sh [fuzz]   ("fuzz" adds clang and libFuzzer for `make fuzz`)
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libcli11-dev libfmt-dev nlohmann-json3-dev libyaml-cpp-dev libre2-dev libcivetweb-dev
  libcpp-httplib-dev  # tests only
  libcurl4-openssl-dev libnghttp2-dev libsimdjson-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libbpf-dev bpftool  # the kernel-log doorbell (src/sources/bpf): BPF program and skeleton
  libsystemd-dev  # the previous boot's journal (sd-journal)
  systemd-journal-remote  # writes the journal file of the previous-boot test
  clang-format        # scripts/check-format.sh, run by make test
  openssl curl time   # the test control plane: certificates, readiness probes, build timing
  libslurm-dev        # the Slurm backend's headers (libslurm itself is opened on demand)
  libarchive-dev libssl-dev  # diagnostic bundles' headers: tar.gz and sha256 (opened on demand)
  munge slurmctld slurmd slurm-client  # the Slurm tier's cluster on loopback (scripts/slurm.sh)
  python3-venv        # test setup only: the Redfish BMC emulator's virtualenv (build-bmc-emulator.sh)
  # the real node of the test bed (scripts/real-node.sh) and the image (scripts/build-image.sh)
  containerd runc containernetworking-plugins iptables iproute2 ca-certificates
)
if [[ ${1:-} == fuzz ]]; then
  PACKAGES+=(clang-14 libclang-rt-14-dev)
fi
missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
