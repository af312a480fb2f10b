#!/usr/bin/env bash
# Install a pinned npm project of the differential tests (its package-lock.json, and the Node 22 build it
# pins as a devDependency, so it runs the same on any machine). Idempotent: `npm ci` runs only when
# node_modules is missing or was installed from a different lock file; the lock's integrity hashes make npm
# verify every package against its registry tarball. Safe in CI.
#   pinned-npm.sh DIR LABEL [npm ci options...]
set -euo pipefail
dir=$1 label=$2
shift 2
cd "$dir"

stamp=node_modules/.dsh-audit-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)

if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" || ! -x node_modules/.bin/node ]]; then
  npm ci --no-audit --no-fund --loglevel=error "$@"
  echo "$want" > "$stamp"
fi

version=$(node_modules/.bin/node --version)
if [[ "${version#v}" != 22.* ]]; then
  echo "$dir/install.sh: node_modules/.bin/node is $version, expected the pinned Node 22" >&2
  exit 1
fi
echo "$label ready (node $version)"
