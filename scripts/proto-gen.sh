#!/usr/bin/env bash
# Regenerates packages/proto/src/gen from proto/. With --check, fails when the checked-in code is stale.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/packages/proto"
export PATH="$root/node_modules/.bin:$PATH"
# The buf CLI (130 MB) is not in `npm install`: installed on first use at its pinned version.
buf="$(node --import tsx "$root/scripts/tools/on-demand.ts" --bin @bufbuild/buf buf)"
if [ "${1:-}" = "--check" ]; then
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  cp -r src/gen "$tmp/before"
  rm -rf src/gen && "$buf" generate
  if ! diff -r "$tmp/before" src/gen >/dev/null; then
    echo "packages/proto/src/gen is stale: run npm run proto:gen and commit the result" >&2
    diff -r "$tmp/before" src/gen | head -40 >&2
    exit 1
  fi
  echo "generated protobuf code is current"
else
  rm -rf src/gen && "$buf" generate
  (cd "$root/proto" && "$buf" lint)
fi
