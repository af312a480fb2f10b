#!/usr/bin/env bash
# Install the pinned dsh format-migration packages (and the Node 22 they run on) for the
# official-code differential oracle (migrate.mjs). Idempotent: runs `npm ci` only when
# node_modules is missing or was installed from a different package-lock.json. The lock's
# integrity hashes make npm verify every package against its registry tarball. Safe in CI.
set -euo pipefail
cd "$(dirname "$0")"

stamp=node_modules/.dsh-audit-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)

if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" || ! -x node_modules/.bin/node ]]; then
  npm ci --legacy-peer-deps --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi

version=$(node_modules/.bin/node --version)
if [[ "${version#v}" != 22.* ]]; then
  echo "install.sh: node_modules/.bin/node is $version, expected the pinned Node 22" >&2
  exit 1
fi
echo "dsh format-migration oracle ready (node $version)"
