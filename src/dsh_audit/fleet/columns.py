"""The dataset's tables and their columns, declared once: what `audit export` writes and what a test checks every
written file against. DATASET_VERSION counts incompatible changes of the layout or of these columns; a dataset
written with a higher one is refused (docs/fleet.md says what each column holds).

Every table is partitioned by `generation` (the log format version; null for a log unreadable before its
header) and `date` (the session's start, UTC): those two are the folder names of the hive layout, not columns of
the files. `key` names the log file a row came from in every table (dataset.log_key)."""

from __future__ import annotations

from typing import Any

import polars as pl

from ..reports.cache_report import LOG_COLUMNS, REQUEST_COLUMNS
from ..reports.header_diff import COLUMNS as HEADER_COLUMNS

DATASET_VERSION = 2
PARTITIONS: dict[str, Any] = {"generation": pl.Int64, "date": pl.Date}

# cache-report's per-log row, but for its notes, which are not verify's count of notes
CACHE_RENAMED = {"notes": "cacheNotes"}
_CACHE_SUMMARY = {name: kind for name, kind in LOG_COLUMNS.items() if name not in ("log", "generation", "sessionId")}

TABLES: dict[str, dict[str, Any]] = {
    # One row per session log (a store holds several), or per input that could not be read at all.
    "logs": {
        "key": pl.String, "file": pl.String, "log": pl.String, "sessionId": pl.String, "createdMs": pl.Int64,
        "cwd": pl.String, "sizeBytes": pl.Int64, "sha256": pl.String,
        "status": pl.String, "readError": pl.String, "cacheError": pl.String,
        "events": pl.Int64, "rebuiltRequests": pl.Int64, "errors": pl.Int64, "warnings": pl.Int64,
        "notes": pl.Int64, "failing": pl.Int64, "rejected": pl.Boolean, "cacheBlock": pl.Int64,
        **{CACHE_RENAMED.get(name, name): kind for name, kind in _CACHE_SUMMARY.items()},
    },
    # One row per rebuilt request, as verify digests it (rebuild --format digest).
    "requests": {
        "key": pl.String, "log": pl.String, "turn": pl.Int64, "step": pl.Int64, "attempt": pl.Int64,
        "seq": pl.Int64, "sha256": pl.String, "inherited": pl.Boolean, "extendsPrevious": pl.Boolean,
        "causes": pl.String,
    },
    # One row per logged model call, as cache-report judges it (its requests rows).
    "calls": {"key": pl.String, **{name: kind for name, kind in REQUEST_COLUMNS.items() if name != "generation"}},
    # One row per finding verify reports.
    "findings": {
        "key": pl.String, "log": pl.String, "code": pl.String, "severity": pl.String, "message": pl.String,
        "seq": pl.Int64, "line": pl.Int64, "eventType": pl.String, "rejects": pl.Boolean,
    },
    # One row per header change, as header-diff reports it.
    "header_changes": {"key": pl.String, **{name: kind for name, kind in HEADER_COLUMNS.items()
                                            if name != "generation"}},
}


def scanned_columns(table: str) -> dict[str, Any]:
    """The columns a hive scan of `table` gives: its own and the partitions."""
    return {**TABLES[table], **PARTITIONS}
