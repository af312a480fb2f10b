"""The sessions dsh keeps, as `audit sessions` lists them: the readers find them (readers.home, from headers
alone); this service above them counts each session's own requests and prices its calls, and builds the JSON
document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from .errors import DshAuditError
from .readers import open_log
from .readers.home import SessionInfo, SessionScan, scan_sessions
from .records import LogSource

# (own requests, cost) of one opened log, in one pass; the default counts requests and prices nothing.
Tally = Callable[[LogSource], tuple[int, float | None]]


def count_requests(source: LogSource) -> tuple[int, float | None]:
    """The default tally: the session's own requests, no cost. Findings are ignored: a log the reference would
    refuse still has the requests it rebuilds."""
    from .reconstruct import iter_requests

    requests = iter_requests(source, on_finding=lambda _finding: None)
    return sum(1 for request in requests if not request.inherited), None


def priced(source: LogSource) -> tuple[int, float | None]:
    """The session's own requests and what its own calls cost, as cache-report prices them, in one pass."""
    from .reports.cache_report import CacheOptions, iter_log_rows

    rows = [row for row in iter_log_rows(source, CacheOptions(predict=False)) if not row["inherited"]]
    costs = [row["costUsd"] for row in rows if row["costUsd"] is not None]
    return sum(row["kind"] == "request" for row in rows), (float(sum(costs)) if costs else None)


def _tallied(info: SessionInfo, tally: Tally) -> SessionInfo:
    if info.error is not None:
        return info
    try:
        requests, cost = tally(open_log(info.path, found_in=info.root))
    except DshAuditError as error:
        return replace(info, error=str(error))
    except OSError as error:
        return replace(info, error=f"{info.path}: cannot read: {error.strerror}")
    return replace(info, requests=requests, cost_usd=cost)


def list_sessions(root: Path, *, limit: int | None = None, tally: Tally = count_requests) -> SessionScan:
    """The sessions below `root`, newest first (by last activity), at most `limit`, each with its own request
    count and cost as `tally` gives them (from a freshly opened source of the log). A log that cannot be read is
    listed with its error, a folder that cannot be listed in `unlisted` (whatever the limit); only a missing root
    raises (LogReadError)."""
    scan = scan_sessions([root])
    chosen = scan.sessions if limit is None else scan.sessions[:limit]
    return SessionScan([_tallied(info, tally) for info in chosen], scan.unlisted)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def session_json(info: SessionInfo) -> dict[str, Any]:
    return {"id": info.session_id, "cwd": info.cwd, "generation": info.generation, "path": str(info.path),
            "directory": str(info.directory), "sizeBytes": info.size, "lastActivity": iso(info.last_activity),
            "requests": info.requests, "costUsd": info.cost_usd, "children": [str(p) for p in info.children],
            "skipped": [str(p) for p in info.skipped], "error": info.error}


def sessions_document(scan: SessionScan, root: Path) -> dict[str, Any]:
    """`audit sessions --format json`: the root, each session, and each folder that could not be listed."""
    return {"root": str(root), "sessions": [session_json(info) for info in scan.sessions],
            "unlisted": [{"path": folder.label, "error": folder.reason} for folder in scan.unlisted]}
