#!/usr/bin/env bash
# Fails when a C++ file under src/, test/ or bench/ is not formatted as .clang-format says.
# `scripts/check-format.sh --fix` formats them in place.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files 'src/*.cc' 'src/*.h' 'test/*.cc' 'test/*.h' 'bench/*.cc' 'bench/*.h')
if [[ ${1:-} == --fix ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/gpuheal-format.$$; then
  grep -m 20 'error:' /tmp/gpuheal-format.$$ >&2 || true
  rm -f /tmp/gpuheal-format.$$
  echo "check-format: files differ from .clang-format (first 20 places above); run scripts/check-format.sh --fix" >&2
  exit 1
fi
rm -f /tmp/gpuheal-format.$$
