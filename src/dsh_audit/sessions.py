"""The sessions dsh keeps, as `audit sessions` lists them: the readers find them (readers.home, from headers
alone); this service above them counts each session's own requests and prices its calls, and builds the JSON
document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import DshAuditError
from .readers import open_log
from .readers.home import SessionInfo, SessionScan, scan_sessions
from .records import LogSource

if TYPE_CHECKING:
    from .reports.filters import CallFilter


class Figures(NamedTuple):
    """What a tally counts of one session: its own requests, what its own calls cost, their hit ratio and what
    their cache collapses lost (None: not counted)."""

    requests: int
    cost_usd: float | None
    hit_ratio: float | None = None
    lost_usd: float | None = None


# The figures of one opened log, in one pass; the default counts requests and prices nothing.
Tally = Callable[[LogSource], tuple[int, float | None] | Figures]


def count_requests(source: LogSource) -> Figures:
    """The default tally: the session's own requests, no cost. Findings are ignored: a log the reference would
    refuse still has the requests it rebuilds."""
    from .reconstruct import iter_requests

    requests = iter_requests(source, on_finding=lambda _finding: None)
    return Figures(sum(1 for request in requests if not request.inherited), None)


def priced(source: LogSource) -> Figures:
    """The session's own requests, what its own calls cost, their hit ratio and what their collapses lost, as
    `audit cache-report --no-predict` counts them, in one pass."""
    from .reports.cache_report import CacheOptions, judged_frame, summarize

    summary = summarize(judged_frame(source, CacheOptions(predict=False)))
    return Figures(summary["requests"], summary["costUsd"], summary["hitRatio"],
                   summary["collapseCostUsd"] if summary["costUsd"] is not None else None)


def _tallied(info: SessionInfo, tally: Tally) -> SessionInfo:
    if info.error is not None:
        return info
    try:
        figures = Figures(*tally(open_log(info.path, found_in=info.root)))
    except DshAuditError as error:
        return replace(info, error=str(error))
    except OSError as error:
        return replace(info, error=f"{info.path}: cannot read: {error.strerror}")
    return replace(info, requests=figures.requests, cost_usd=figures.cost_usd, hit_ratio=figures.hit_ratio,
                   lost_usd=figures.lost_usd)


def list_sessions(root: Path, *, limit: int | None = None, tally: Tally = count_requests,
                  sort: str = "recent", kept: Callable[[SessionInfo], bool] | None = None) -> SessionScan:
    """The sessions below `root` in `sort`'s order (newest first by last activity, else by `ranked`), at most
    `limit`, each with its own figures as `tally` gives them (from a freshly opened source of the log). A log that
    cannot be read is listed with its error (last where a figure ranks them), a folder that cannot be listed in
    `unlisted` (whatever the limit); only a missing root raises (LogReadError). Newest first, only the sessions
    kept are tallied; any other order tallies them all. `kept` picks the sessions listed, from their headers
    (`in_filter`), before any is tallied."""
    scan = scan_sessions([root])
    if kept is not None:
        scan = replace(scan, sessions=[info for info in scan.sessions if kept(info)])
    if sort == "recent":
        chosen = scan.sessions if limit is None else scan.sessions[:limit]
        return replace(scan, sessions=[_tallied(info, tally) for info in chosen])
    infos = ranked([_tallied(info, tally) for info in scan.sessions], sort)
    return replace(scan, sessions=infos if limit is None else infos[:limit])


def in_filter(chosen: CallFilter) -> Callable[[SessionInfo], bool]:
    """A session as `--project`, `--since/--until` and `--model` pick it from the listing: its cwd in one of the
    projects, its last activity in [since, until) (the listing reads no call's time), its first request to one
    of the models (as verify and header-diff pick a log: log_filter.first_model, read up to that request). A
    session that does not say (no cwd, no request) is left out: it has no call the filters keep."""
    from .log_filter import first_model, in_project

    def kept(info: SessionInfo) -> bool:
        active = int(info.last_activity.timestamp() * 1000)
        return ((not chosen.projects or any(in_project(info.cwd, project) for project in chosen.projects))
                and (chosen.since_ms is None or active >= chosen.since_ms)
                and (chosen.until_ms is None or active < chosen.until_ms)
                and (not chosen.models or first_model(lambda: _reopened(info)) in chosen.models))
    return kept


def _reopened(info: SessionInfo) -> LogSource:
    """The session's log opened again to read its first request (first_model takes a DshAuditError as none)."""
    try:
        return open_log(info.path, found_in=info.root)
    except OSError as error:
        raise DshAuditError(f"cannot read: {error.strerror}", path=str(info.path)) from None


def ranked(infos: list[SessionInfo], sort: str) -> list[SessionInfo]:
    """Sessions by what their collapses lost (then cost), by cost or requests (most first), by hit ratio (lowest
    first) or by path; ties in the order given (newest first), a session without the figure last."""
    if sort == "path":
        return sorted(infos, key=lambda info: str(info.path))
    if sort == "hit":
        return sorted(infos, key=lambda info: (info.hit_ratio is None, info.hit_ratio or 0.0))
    figures: dict[str, Callable[[SessionInfo], tuple[float, ...]]] = {
        "lost": lambda info: (-(info.lost_usd or 0.0), -(info.cost_usd or 0.0)),
        "cost": lambda info: (-(info.cost_usd or 0.0),),
        "requests": lambda info: (-(info.requests or 0),),
    }
    key = figures[sort]
    return sorted(infos, key=lambda info: (info.error is not None, *key(info)))


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def session_json(info: SessionInfo, short_id: str | None) -> dict[str, Any]:
    return {"id": info.session_id, "shortId": short_id, "cwd": info.cwd, "generation": info.generation,
            "path": str(info.path), "directory": str(info.directory), "sizeBytes": info.size,
            "lastActivity": iso(info.last_activity), "requests": info.requests, "costUsd": info.cost_usd,
            "hitRatio": info.hit_ratio, "lostUsd": info.lost_usd, "children": [str(p) for p in info.children],
            "skipped": [str(p) for p in info.skipped], "error": info.error}


def sessions_document(scan: SessionScan, root: Path) -> dict[str, Any]:
    """`audit sessions --format json`: its tag, the root, each session (with its short id, reports.ranking's
    over every session found), and each folder that could not be listed."""
    from .reports.ranking import short_ids

    prefixes = dict(zip(scan.every_id, short_ids(scan.every_id), strict=True))
    return {"schema": "dsh-audit/sessions", "version": 1, "root": str(root),
            "sessions": [session_json(info, prefixes.get(info.short_id)) for info in scan.sessions],
            "unlisted": [{"path": folder.label, "error": folder.reason} for folder in scan.unlisted]}
