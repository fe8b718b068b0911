#!/usr/bin/env bash
# End-to-end tests of the gateway in a real browser and with client SDKs.
#
#   bash gateway/e2e/run.sh
#
# 1. installs Debian's chromium when /usr/bin/chromium is missing (needs root);
# 2. runs the playground's unit tests and checks that the committed bundle
#    (gateway/playground/dist) is exactly what `npm run build` makes from the
#    locked sources;
# 3. builds the docstream binary and runs `node --test` here with
#    DOCSTREAM_BIN pointing at it.
# Exits non-zero on any failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
web="$root/gateway/playground/web"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

if [ ! -x /usr/bin/chromium ]; then
  echo "== installing Debian chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y chromium
fi

echo "== playground bundle: npm ci, unit tests and a reproducible rebuild"
(cd "$web" && npm ci)
(cd "$web" && node --test --test-reporter=dot test/)
(cd "$web" && node build.mjs --outdir "$tmp/dist")
if ! diff -r "$root/gateway/playground/dist" "$tmp/dist"; then
  echo "gateway/playground/dist is not what the sources build: run 'npm run build' in gateway/playground/web and commit dist" >&2
  exit 1
fi
echo "dist is up to date"

echo "== e2e dependencies"
(cd "$here" && npm ci)

echo "== building docstream"
(cd "$root" && go build -o "$tmp/docstream" ./cmd/docstream)

echo "== node --test"
cd "$here"
DOCSTREAM_BIN="$tmp/docstream" node --test --test-reporter=spec
