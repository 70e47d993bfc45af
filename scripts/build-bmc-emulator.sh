#!/usr/bin/env bash
# Installs the Redfish BMC emulator the integration tests power-cycle (OpenStack sushy-tools,
# `sushy-emulator --fake`) into a virtualenv from PyPI, pinned by tools/bmc-emulator/
# requirements.txt. Cached in ~/.cache/gpuheal/bmc-emulator-<hash of the pins>. Test setup only:
# nothing of it ships. Prints one line: SUSHY_EMULATOR=<path>.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${GPUHEAL_CACHE:-$HOME/.cache/gpuheal}
req=$root/tools/bmc-emulator/requirements.txt
stamp=$(sha256sum < "$req" | cut -c1-16)
venv=$cache_root/bmc-emulator-$stamp
if [[ ! -f $venv/.complete ]]; then
  echo "build-bmc-emulator: installing sushy-tools into $venv" >&2
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
  touch "$venv/.complete"
fi
echo "SUSHY_EMULATOR=$venv/bin/sushy-emulator"
