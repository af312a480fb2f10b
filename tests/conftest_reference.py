"""Run the published dsh reference (tests/reference, a pinned npm project) over the session-log corpus.

tests/conftest.py imports `reference_results` from here; test_differential.py compares it with ours.
See docs/differential-testing.md for what is pinned and why.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REFERENCE_DIR = Path(__file__).resolve().parent / "reference"
REPO_ROOT = REFERENCE_DIR.parent.parent
LOGS_ROOT = Path(os.environ.get("DSH_LOGS", REPO_ROOT.parent / "shared" / "dsh-logs")).resolve()
REFERENCE_NODE = REFERENCE_DIR / "node_modules" / ".bin" / "node"
RECONSTRUCT = REFERENCE_DIR / "reconstruct.mjs"

ReferenceResult = dict[str, Any]


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_corpus() -> None:
    """Skip the calling test module when the shared corpus is absent (call at module level)."""
    if not (LOGS_ROOT / "manifest.json").exists():
        pytest.skip(f"shared corpus {LOGS_ROOT} not present", allow_module_level=True)


def session_log_paths() -> list[str]:
    """Corpus logs (manifest kind "session-log"), relative to LOGS_ROOT; empty when the corpus is absent."""
    manifest = LOGS_ROOT / "manifest.json"
    if not manifest.is_file():
        return []
    files = json.loads(manifest.read_text(encoding="utf-8"))["files"]
    return sorted(entry["path"] for entry in files if entry["kind"] == "session-log")


def _registry_reachable() -> bool:
    try:
        probe = subprocess.run(["npm", "ping"], cwd=REFERENCE_DIR, capture_output=True, timeout=30,
                               check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def install_pinned(script: Path, what: str) -> None:
    """Run an idempotent install.sh under an exclusive lock on its folder, so that pytest-xdist workers never
    run two installs into one node_modules at once (the later ones find it done); skip (never in CI) only when
    the npm registry genuinely cannot be reached, fail otherwise."""
    with (script.parent / ".install.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            install = subprocess.run([str(script)], capture_output=True, text=True, timeout=600, check=False)
            failure = None if install.returncode == 0 else install.stdout + install.stderr
        except (OSError, subprocess.TimeoutExpired) as error:
            failure = f"{type(error).__name__}: {error}"
    if failure is None:
        return
    if not in_ci() and not _registry_reachable():
        pytest.skip(f"{what} NOT RUN: the npm registry is unreachable, so the pinned packages cannot be installed "
                    f"({script.relative_to(script.parents[2])} said: {failure.strip()[-400:]})")
    pytest.fail(f"{script} failed:\n{failure}")


def ensure_reference_installed() -> None:
    install_pinned(REFERENCE_DIR / "install.sh", "DIFFERENTIAL TEST")


def run_reference(paths: list[Path], *, bodies: bool = False) -> list[ReferenceResult]:
    """One reference process over `paths`; one result object per path, in order."""
    command = [str(REFERENCE_NODE), str(RECONSTRUCT), *(["--bodies"] if bodies else [])]
    completed = subprocess.run(command, cwd=REFERENCE_DIR, input="".join(f"{p}\n" for p in paths),
                               capture_output=True, text=True, timeout=900, check=False)
    if completed.returncode != 0:
        pytest.fail(f"reconstruct.mjs exited {completed.returncode}:\n{completed.stderr}")
    results = [json.loads(line) for line in completed.stdout.splitlines() if line.strip()]
    if [r["path"] for r in results] != [str(p) for p in paths]:
        pytest.fail("reconstruct.mjs did not answer once per log, in order")
    return results


def reference_bodies(path: Path) -> list[str]:
    """The reference's exact request bodies for one log (for diagnosing a digest mismatch)."""
    (result,) = run_reference([path], bodies=True)
    return [request["body"] for request in result.get("requests", [])]


@pytest.fixture(scope="session")
def reference_results() -> dict[str, ReferenceResult]:
    """Reference outcome per corpus log, keyed by its path relative to LOGS_ROOT."""
    relpaths = session_log_paths()
    if not relpaths:
        if in_ci():
            pytest.fail(f"session-log corpus missing at {LOGS_ROOT} (set DSH_LOGS)")
        pytest.skip(f"DIFFERENTIAL TEST NOT RUN: no session-log corpus at {LOGS_ROOT} (set DSH_LOGS)")
    ensure_reference_installed()
    results = run_reference([LOGS_ROOT / relpath for relpath in relpaths])
    return dict(zip(relpaths, results, strict=True))
