"""Shared fixtures. The corpus of real logs is ../shared/dsh-logs (override with DSH_LOGS)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from conftest_migration import (  # noqa: F401
    official_migration,
    official_migration_descriptor_bump,
    reference_format_node,
)
from conftest_reference import LOGS_ROOT, reference_results, session_log_paths  # noqa: F401

# The suite compiles the fast path's generated code into a cache of its own (dsh_audit.codecache), never into the
# home's ~/.cache; every CLI child the tests start inherits it. Removed when the test process ends.
if "DSH_AUDIT_CACHE_DIR" not in os.environ:
    os.environ["DSH_AUDIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="dsh-audit-cache-")
    atexit.register(shutil.rmtree, os.environ["DSH_AUDIT_CACHE_DIR"], ignore_errors=True)
