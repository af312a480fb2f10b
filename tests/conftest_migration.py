"""Session fixtures for the official-code migration oracle (official_migration.py, tests/reference-format).

tests/conftest.py imports them. Install policy as conftest_reference: skip only when the npm registry is
unreachable outside CI, fail otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest_reference import LOGS_ROOT, in_ci, install_pinned
from official_migration import FORMAT_DIR, FORMAT_NODE, MigratedLog, migrate_corpus


@pytest.fixture(scope="session")
def reference_format_node() -> Path:
    """The pinned Node 22 of tests/reference-format, after install.sh (idempotent) has run."""
    install_pinned(FORMAT_DIR / "install.sh", "OFFICIAL MIGRATION ORACLE")
    return FORMAT_NODE


def _migrate(tmp_path_factory: pytest.TempPathFactory, *, descriptor_bump: bool) -> dict[str, MigratedLog]:
    if not (LOGS_ROOT / "manifest.json").is_file():
        if in_ci():
            pytest.fail(f"session-log corpus missing at {LOGS_ROOT} (set DSH_LOGS)")
        pytest.skip(f"OFFICIAL MIGRATION ORACLE NOT RUN: no session-log corpus at {LOGS_ROOT} (set DSH_LOGS)")
    out_dir = tmp_path_factory.mktemp("official-migration-bump" if descriptor_bump else "official-migration")
    try:
        return migrate_corpus(LOGS_ROOT, out_dir, descriptor_bump=descriptor_bump)
    except RuntimeError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="session")
def official_migration(reference_format_node: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, MigratedLog]:
    """Per corpus log (path relative to LOGS_ROOT): realized v0 file and official v1/v2/v3 file or refusal."""
    return _migrate(tmp_path_factory, descriptor_bump=False)


@pytest.fixture(scope="session")
def official_migration_descriptor_bump(reference_format_node: Path,
                                       tmp_path_factory: pytest.TempPathFactory) -> dict[str, MigratedLog]:
    """As official_migration, with subagent/descriptor version 2 -> 3 first (coverage only, not genuine)."""
    return _migrate(tmp_path_factory, descriptor_bump=True)
