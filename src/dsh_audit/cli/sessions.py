"""`audit sessions`: the sessions in dsh's session root, newest first. Exit codes: 0 listed (a log that cannot
be read is a row with its error, a folder that cannot be listed is named under the table), 2 when the root
itself cannot be read."""

from __future__ import annotations

import json
import os
from datetime import datetime
from operator import itemgetter
from pathlib import Path
from typing import Any

import click

from ..readers.home import HOME_ENV, SessionInfo, SessionScan, list_sessions, require_root, session_root
from ..records import LogSource
from ..reports.views import Column, Terminal, located_error, table, terminal, wrap
from ..text import display, head, printable
from . import COLOR_OPTION, EXIT_CLEAN, print_view

ID_WIDTH = 13        # a uuid's first two groups: enough to tell sessions apart
_UNITS = ("kB", "MB", "GB", "TB")


def _tally(source: LogSource) -> tuple[int, float | None]:
    """The session's own requests and what its own calls cost, as cache-report prices them, in one pass."""
    from ..reports.cache_report import CacheOptions, iter_log_rows

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


def _cells(info: SessionInfo) -> dict[str, str]:
    # Cut without an ellipsis: the short id is meant to be pasted as a --session prefix.
    return {"id": head(display(info.short_id), ID_WIDTH, cells=True), "last": _iso(info.last_activity),
            "generation": "-" if info.generation is None else f"v{info.generation}",
            "requests": "-" if info.requests is None else str(info.requests), "cost": _cost(info.cost_usd),
            "size": humane_size(info.size), "cwd": "(unreadable)" if info.error is not None else info.cwd or "-"}


# Narrow terminals lose the size, then the generation, the request count and the cost; the cwd is cut at its
# start: its end names the project, its start is the same home directory on most rows.
COLUMNS = (
    Column("ID", itemgetter("id")),
    Column("LAST ACTIVITY (UTC)", itemgetter("last")),
    Column("GEN", itemgetter("generation"), rank=3),
    Column("REQS", itemgetter("requests"), rank=2, right=True),
    Column("COST", itemgetter("cost"), rank=1, right=True),
    Column("SIZE", itemgetter("size"), rank=4, right=True),
    Column("CWD", itemgetter("cwd"), squeeze=True, keep_end=True, floor=24),
)


def render_table(scan: SessionScan, root: Path, term: Terminal) -> str:
    """A row per session, columns dropped (then the cwd cut) to fit the terminal; under an unreadable session's
    row, why it cannot be read; under the table, each folder that could not be listed."""
    infos = scan.sessions
    rows = table([_cells(info) for info in infos], COLUMNS, width=term.width, wide=False, indent="")
    lines = [term.style(rows[0], bold=True)]
    for info, row in zip(infos, rows[1:], strict=True):
        if info.error is None:
            lines.append(row)
            continue
        lines.append(term.style(row, fg="red"))
        lines += [term.style(line, fg="red") for line in
                  wrap(f"error: {located_error(str(info.path), info.error)}", term.width, "  ")]
    for folder in scan.unlisted:
        lines += [term.style(line, fg="red") for line in wrap(f"error: {folder.reason}", term.width, "  ")]
    unreadable = sum(info.error is not None for info in infos)
    closing = f"{len(infos)} session(s) in {root}" + (f", {unreadable} unreadable" if unreadable else "")
    closing += f", {len(scan.unlisted)} folder(s) that could not be listed" if scan.unlisted else ""
    older = sum(len(info.skipped) for info in infos)
    closing += f", {older} older generation(s) skipped" if older else ""
    lines += wrap(closing, term.width, "")
    return "\n".join(lines) + "\n"


def session_json(info: SessionInfo) -> dict[str, Any]:
    return {"id": info.session_id, "cwd": info.cwd, "generation": info.generation, "path": str(info.path),
            "directory": str(info.directory), "sizeBytes": info.size, "lastActivity": _iso(info.last_activity),
            "requests": info.requests, "costUsd": info.cost_usd, "children": [str(p) for p in info.children],
            "skipped": [str(p) for p in info.skipped], "error": info.error}


@click.command(epilog="""\b
Examples:
  audit sessions                       the sessions under $DSH_HOME/sessions (else ~/.dsh/sessions)
  audit sessions --limit 5 --format json
  audit verify --session 3f2a          then read one of them by the start of its id
Exit codes: 0 listed (an unreadable log is a row with its error, a folder that cannot be listed a line under
the table), 2 the root cannot be read, 3 internal error, 130 interrupted.""")
@click.option("--root", type=click.Path(path_type=Path), default=None,
              help=f"Session root to list (default: ${HOME_ENV}/sessions, else ~/.dsh/sessions, as dsh keeps them).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the N most recently active sessions.")
@COLOR_OPTION
def sessions(root: Path | None, fmt: str, limit: int | None, color: str | None) -> int:
    """List the sessions dsh keeps, newest first: id, last activity, generation, requests, cost, size, cwd.

    Pass an id (or its start) to another command with --session."""
    chosen = root if root is not None else session_root(os.environ)
    require_root(chosen, other=None if root is not None else "use --root")
    scan = list_sessions(chosen, limit=limit, tally=_tally)
    if fmt == "json":
        document = {"root": str(chosen), "sessions": [session_json(info) for info in scan.sessions],
                    "unlisted": [{"path": folder.label, "error": folder.reason} for folder in scan.unlisted]}
        click.echo(printable(json.dumps(document, indent=2, ensure_ascii=False)))
    else:
        term = terminal()
        print_view(term, render_table(scan, chosen, term))
    return EXIT_CLEAN
