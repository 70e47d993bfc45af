#!/usr/bin/env bash
# Installs the S3-compatible server the integration tests upload bundles to through presigned URLs
# (moto's S3 backend, served by tools/s3-server/s3_server.py, which adds the presigned-URL checks
# moto lacks) into a virtualenv from PyPI, pinned by tools/s3-server/requirements.txt. Cached in
# ~/.cache/gpuheal/s3-server-<hash of the pins>. Test setup only: nothing of it ships. Prints one
# line: S3_SERVER=<launcher>, a script in the venv that runs this checkout's s3_server.py with the
# venv's python (arguments: -H host -p port); rewritten on every run, named after the checkout so
# that two checkouts sharing the cache do not run each other's s3_server.py.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${GPUHEAL_CACHE:-$HOME/.cache/gpuheal}
req=$root/tools/s3-server/requirements.txt
stamp=$(sha256sum < "$req" | cut -c1-16)
venv=$cache_root/s3-server-$stamp
if [[ ! -f $venv/.complete ]]; then
  echo "build-s3-server: installing moto into $venv" >&2
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
  touch "$venv/.complete"
fi
launcher=$venv/bin/gpuheal-s3-server-$(printf %s "$root" | sha256sum | cut -c1-8)
tmp=$(mktemp "$launcher.XXXXXX")  # then renamed: a test starting it meanwhile sees old or new
printf '#!/bin/sh\nexec %q %q "$@"\n' "$venv/bin/python3" "$root/tools/s3-server/s3_server.py" \
  > "$tmp"
chmod 755 "$tmp"
mv -f "$tmp" "$launcher"
echo "S3_SERVER=$launcher"
