#!/usr/bin/env bash
# Regenerates the public-contract golden files and the generated docs from the binary.
set -euo pipefail
bin=${1:-build/gpuheal}
cd "$(dirname "$0")/.."
"$bin" explain contracts > test/golden/contracts.txt
"$bin" explain flags > test/golden/flags.txt
{
  cat docs/templates/xid.head.md
  "$bin" explain xid --all --markdown
} > docs/xid.md
{
  cat docs/templates/reasons.head.md
  "$bin" explain reasons
  cat docs/templates/reasons.tail.md
} > docs/reasons.md
git --no-pager diff --stat -- test/golden docs/xid.md docs/reasons.md || true
