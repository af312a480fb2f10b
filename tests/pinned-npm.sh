#!/usr/bin/env bash
# Install a pinned npm project of the differential tests (its package-lock.json, and the Node 22 build it
# pins as a devDependency, so it runs the same on any machine). Idempotent: `npm ci` runs only when
# node_modules is missing or was installed from a different lock file; the lock's integrity hashes make npm
# verify every package against its registry tarball. Safe in CI.
#   pinned-npm.sh DIR LABEL [npm ci options...]
# PINNED_NPM_VERB="install --no-save" installs the lock where `npm ci` refuses one whose optional
# dependencies name platform packages that were never published (npm ci then calls the lock out of sync).
set -euo pipefail
dir=$1 label=$2
shift 2
cd "$dir"

stamp=node_modules/.dsh-audit-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)

if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" || ! -x node_modules/.bin/node ]]; then
  read -r -a verb <<< "${PINNED_NPM_VERB:-ci}"
  if ! npm "${verb[@]}" --no-audit --no-fund --loglevel=error "$@"; then
    echo "$dir/install.sh: npm ${verb[*]} failed (above): if it could not fetch, the npm registry" \
         "$(npm config get registry) cannot be reached from here" >&2
    exit 1
  fi
  if [[ "$(sha256sum package-lock.json | cut -d' ' -f1)" != "$want" ]]; then
    echo "$dir/install.sh: npm changed package-lock.json: the lock does not match package.json" >&2
    exit 1
  fi
  # Under --ignore-scripts the `node` package has not put its binary in place yet: run its own script only.
  if [[ ! -x node_modules/.bin/node ]]; then
    npm rebuild node --ignore-scripts=false --no-audit --no-fund --loglevel=error
  fi
  echo "$want" > "$stamp"
fi

version=$(node_modules/.bin/node --version)
if [[ "${version#v}" != 22.* ]]; then
  echo "$dir/install.sh: node_modules/.bin/node is $version, expected the pinned Node 22" >&2
  exit 1
fi
echo "$label ready (node $version)"
