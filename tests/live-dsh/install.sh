#!/usr/bin/env bash
# The published dsh CLI (@deepseek-ai/dsh 0.1.0-rc.8) of the end-to-end tests, pinned as
# ../shared/design/live-dsh.md found it installs: its rc.8 peers listed and the cordis family pinned in
# package.json, --legacy-peer-deps --ignore-scripts (also in .npmrc; npm's own resolution does not finish).
# `npm install --no-save` of the lock, not `npm ci`: node-addon-require-builtin 0.1.6 names optional platform
# packages never published for any platform but linux-x64, and npm ci rejects such a lock as out of sync.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PINNED_NPM_VERB="install --no-save" exec bash "$here/../pinned-npm.sh" "$here" "dsh CLI of the end-to-end tests" --legacy-peer-deps --ignore-scripts
