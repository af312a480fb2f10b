#!/usr/bin/env bash
# The pinned dsh format-migration packages of the official-code oracle, migrate.mjs (see tests/pinned-npm.sh).
# Their peers are not imported at run time and one was never published: --legacy-peer-deps (also in .npmrc).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/../pinned-npm.sh" "$here" "dsh format-migration oracle" --legacy-peer-deps
