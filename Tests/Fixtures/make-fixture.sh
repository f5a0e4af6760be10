#!/usr/bin/env bash
# Makes the fixture vault for the schema version the current code writes.
# Fixtures that have landed are history: this refuses to overwrite one.
set -euo pipefail
cd "$(dirname "$0")/../.."
version="${1:-v17}"
out="Tests/Fixtures/vault-${version}.db"
if [ -e "$out" ]; then
  echo "$out exists and has landed; a new schema version gets a new fixture" >&2
  exit 1
fi
tmp="$(mktemp -d)"; chmod 700 "$tmp"
swift build --product FixtureMaker && .build/debug/FixtureMaker "$version" "$tmp/vault.db"
cp "$tmp/vault.db" "$out"
rm -rf "$tmp"
echo "wrote $out"
