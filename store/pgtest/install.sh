#!/usr/bin/env bash
# Installs Debian's PostgreSQL server when it is missing, for the tests
# that start their own (store/pgtest). Needs root to install.
set -euo pipefail
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  echo "== installing Debian postgresql"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends postgresql
fi
