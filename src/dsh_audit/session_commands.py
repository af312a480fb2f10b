"""`audit sessions`: the sessions in dsh's session root, newest first. Exit codes: 0 listed (a log that cannot
be read is a row with its error), 2 when the root itself cannot be read."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from .cli import EXIT_CLEAN
from .readers.home import HOME_ENV, SessionInfo, list_sessions, require_root, session_root
from .records import LogSource
from .reports.views import fit
from .text import display, printable

WIDTH = 100
ID_WIDTH = 13        # a uuid's first two groups: enough to tell sessions apart
_UNITS = ("kB", "MB", "GB", "TB")


def _tally(source: LogSource) -> tuple[int, float | None]:
    """The session's own requests and what its own calls cost, as cache-report prices them, in one pass."""
    from .reports.cache_report import CacheOptions, iter_log_rows

    rows = [row for row in iter_log_rows(source, CacheOptions(predict=False)) if not row["inherited"]]
    costs = [row["costUsd"] for row in rows if row["costUsd"] is not None]
    return sum(row["kind"] == "request" for row in rows), (float(sum(costs)) if costs else None)


def humane_size(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    value = float(size)
    for unit in _UNITS:
        value /= 1000
        if value < 999.95 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _cost(cost: float | None) -> str:
    return "-" if cost is None else f"${cost:.4f}"


def _clip_left(text: str, width: int) -> str:
    # A path's end names the project; its start is the same home directory on most rows.
    return text if len(text) <= width else "…" + text[len(text) - width + 1:]


_COLUMNS = (("ID", ID_WIDTH, "<"), ("LAST ACTIVITY (UTC)", 20, "<"), ("GEN", 3, "<"), ("REQS", 5, ">"),
            ("COST", 10, ">"), ("SIZE", 8, ">"))
_FIXED = sum(width + 2 for _, width, _ in _COLUMNS)


def _cells(info: SessionInfo) -> list[str]:
    generation = "-" if info.generation is None else f"v{info.generation}"
    requests = "-" if info.requests is None else str(info.requests)
    # Cut without an ellipsis: the short id is meant to be pasted as a --session prefix.
    return [display(info.short_id)[:ID_WIDTH], _iso(info.last_activity), generation, requests,
            _cost(info.cost_usd), humane_size(info.size)]


def _line(cells: list[str], last: str) -> str:
    fixed = "  ".join(f"{cell:{align}{width}}" for cell, (_, width, align) in zip(cells, _COLUMNS, strict=True))
    return f"{fixed}  {last}".rstrip()


def _error_text(info: SessionInfo, error: str) -> str:
    # The row is the log's own: its path in front of the message would take the room the message needs.
    located = re.match(rf"{re.escape(str(info.path))}(?::(\d+))?: ", error)
    if located is None:
        return error
    return (f"line {located[1]}: " if located[1] else "") + error[located.end():]


def _row(info: SessionInfo) -> str:
    room = WIDTH - _FIXED
    # Escaped before they are cut, so that the width counts what is shown.
    last = (fit(f"error: {_error_text(info, info.error)}", room) if info.error is not None
            else _clip_left(display(info.cwd or "-"), room))
    return _line(_cells(info), last)


def render_table(infos: list[SessionInfo], root: Path) -> str:
    header = _line([name for name, _, _ in _COLUMNS], "CWD")
    rows = [display(_row(info)) for info in infos]
    return "\n".join([header, *rows, f"{len(infos)} session(s) in {root}"])


def session_json(info: SessionInfo) -> dict[str, Any]:
    return {"id": info.session_id, "cwd": info.cwd, "generation": info.generation, "path": str(info.path),
            "directory": str(info.directory), "sizeBytes": info.size, "lastActivity": _iso(info.last_activity),
            "requests": info.requests, "costUsd": info.cost_usd, "children": [str(p) for p in info.children],
            "error": info.error}


@click.command(epilog="""\b
Examples:
  audit sessions                       the sessions under $DSH_HOME/sessions (else ~/.dsh/sessions)
  audit sessions --limit 5 --format json
  audit verify --session 3f2a          then read one of them by the start of its id
Exit codes: 0 listed (an unreadable log is a row with its error), 2 the root cannot be read, 3 internal
error, 130 interrupted.""")
@click.option("--root", type=click.Path(path_type=Path), default=None,
              help=f"Session root to list (default: ${HOME_ENV}/sessions, else ~/.dsh/sessions, as dsh keeps them).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the N most recently active sessions.")
def sessions(root: Path | None, fmt: str, limit: int | None) -> int:
    """List the sessions dsh keeps, newest first: id, last activity, generation, requests, cost, size, cwd.

    Pass an id (or its start) to another command with --session."""
    chosen = root if root is not None else session_root(os.environ)
    require_root(chosen, other=None if root is not None else "use --root")
    infos = list_sessions(chosen, limit=limit, tally=_tally)
    if fmt == "json":
        document = {"root": str(chosen), "sessions": [session_json(info) for info in infos]}
        click.echo(printable(json.dumps(document, indent=2, ensure_ascii=False)))
    else:
        click.echo(render_table(infos, chosen))
    return EXIT_CLEAN
