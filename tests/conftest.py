"""Shared fixtures. The corpus of real logs is ../shared/dsh-logs (override with DSH_LOGS)."""

from __future__ import annotations

from conftest_migration import (  # noqa: F401
    official_migration,
    official_migration_descriptor_bump,
    reference_format_node,
)
from conftest_reference import LOGS_ROOT, reference_results, session_log_paths  # noqa: F401
