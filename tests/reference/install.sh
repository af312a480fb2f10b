#!/usr/bin/env bash
# The pinned dsh reference packages of the v0 differential test (see tests/pinned-npm.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/../pinned-npm.sh" "$here" "dsh reference harness"
