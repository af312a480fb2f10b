"""The terminal view of `audit sessions`: a row per session, fitted to the terminal by the views' one table
renderer (dsh_audit.reports.views.table). Sessions are named as cache-report names them (reports.ranking: the
shortest start of the id, of at least 8 characters, that no other session below the root shares) and money and
ratios read as in every view (views.usd, views.percent)."""

from __future__ import annotations

from operator import itemgetter
from pathlib import Path

from ..readers.home import SessionInfo, SessionScan
from ..sessions import iso
from ..text import display, head
from .ranking import short_ids
from .views import EMPTY, Column, Terminal, located_error, percent, table, usd, wrap

ID_WIDTH = 36        # cells: a uuid's length; a longer name (a folder's, where no id is logged) is cut
_UNITS = ("kB", "MB", "GB", "TB")


def humane_size(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    value = float(size)
    for unit in _UNITS:
        value /= 1000
        if value < 999.95 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def names(scan: SessionScan) -> list[str]:
    """Each listed session's name: the shortest start of its id that tells it from every session found, else
    (an id another session shares) the whole id."""
    prefixes = dict(zip(scan.every_id, short_ids(scan.every_id), strict=True))
    return [prefixes.get(info.short_id) or info.short_id for info in scan.sessions]


def cells(info: SessionInfo, name: str | None = None) -> dict[str, str]:
    # Cut without an ellipsis: the name is meant to be pasted as a --session prefix.
    return {"id": head(display(name or info.short_id), ID_WIDTH, cells=True), "last": iso(info.last_activity),
            "generation": EMPTY if info.generation is None else f"v{info.generation}",
            "requests": EMPTY if info.requests is None else str(info.requests), "hit": percent(info.hit_ratio),
            "cost": usd(info.cost_usd), "lost": usd(info.lost_usd) if info.lost_usd else "",
            "size": humane_size(info.size), "cwd": "(unreadable)" if info.error is not None else info.cwd or EMPTY}


# Narrow terminals lose the size, then the generation, the request count, the hit ratio and the cost, and keep
# what was lost; the cwd is cut at its start: its end names the project, its start is the same home directory on
# most rows.
COLUMNS = (
    Column("ID", itemgetter("id")),
    Column("LAST ACTIVITY (UTC)", itemgetter("last")),
    Column("GEN", itemgetter("generation"), rank=4),
    Column("REQS", itemgetter("requests"), rank=3, right=True),
    Column("HIT", itemgetter("hit"), rank=2, right=True),
    Column("COST", itemgetter("cost"), rank=1, right=True),
    Column("LOST", itemgetter("lost"), right=True),
    Column("SIZE", itemgetter("size"), rank=5, right=True),
    Column("CWD", itemgetter("cwd"), squeeze=True, keep_end=True, floor=24),
)


def render(scan: SessionScan, root: Path, term: Terminal) -> str:
    """A row per session, columns dropped (then the cwd cut) to fit the terminal; under an unreadable session's
    row, why it cannot be read; under the table, each folder that could not be listed."""
    infos = scan.sessions
    rows = table([cells(info, name) for info, name in zip(infos, names(scan), strict=True)], COLUMNS,
                 width=term.width, wide=False, indent="")
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
