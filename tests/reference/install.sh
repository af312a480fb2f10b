#!/usr/bin/env bash
# Install the pinned dsh reference packages (and the Node 22 they need) for the
# differential test. Idempotent: runs `npm ci` only when node_modules is missing
# or was installed from a different package-lock.json. Safe to call from CI.
set -euo pipefail
cd "$(dirname "$0")"

stamp=node_modules/.dsh-audit-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)

if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" || ! -x node_modules/.bin/node ]]; then
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi

version=$(node_modules/.bin/node --version)
if [[ "${version#v}" != 22.* ]]; then
  echo "install.sh: node_modules/.bin/node is $version, expected the pinned Node 22" >&2
  exit 1
fi
echo "dsh reference harness ready (node $version)"
