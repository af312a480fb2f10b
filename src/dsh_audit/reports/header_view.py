"""The terminal view of header-diff: per log a heading, then each header snapshot with what changed in it —
config old -> new, tools added, removed or changed (with the changed schema paths), and the system prompt as
a unified diff."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import TYPE_CHECKING, Any

from ..readers.discover import Skipped, Unreadable
from .views import Terminal, shown_path, skipped_lines, unreadable_lines, wrap

if TYPE_CHECKING:   # golden's view borrows change_lines, and `audit golden --help` starts without polars
    import polars as pl

DIFF_LINES = 20   # of a system-prompt diff shown before "… N more" (all of them with --wide)


def render(frame: pl.DataFrame, term: Terminal, *, wide: bool = False, unreadable: Sequence[Unreadable] = (),
           skipped: Sequence[Skipped] = ()) -> str:
    from .ranking import session_prefixes

    lines: list[str] = []
    rows = frame.to_dicts()
    # the logs are named by path (header-diff reads files); a session's short id beside it, as other views name it
    sessions = session_prefixes(frame.select("log", "sessionId").unique("log", maintain_order=True))
    for label, group in groupby(rows, key=lambda row: row["log"]):
        snapshots = list(group)
        named = f"session {sessions[label]}  ·  " if label in sessions else ""   # first: the path may wrap
        heading = f"{named}{shown_path(label)}  ·  v{snapshots[0]['generation']}"
        lines += [term.style(line, bold=True) for line in wrap(heading, term.width, "")]
        for _seq, changes in groupby(snapshots, key=lambda row: (row["seq"], row["reason"])):
            lines += _snapshot(list(changes), term, wide)
        lines.append("")
    if not rows:
        lines.append("no request/header in the log(s)")
    lines += unreadable_lines(unreadable, term)
    lines += skipped_lines(skipped, term)
    return "\n".join(lines) + "\n"


def _snapshot(changes: list[dict[str, Any]], term: Terminal, wide: bool) -> list[str]:
    first = changes[0]
    where = f"seq {first['seq']}"
    if first["turn"] is not None:
        where += f", turn {first['turn']}" + (f" step {first['step']}" if first["step"] is not None else "")
    against = f" (against {first['against']})" if first["against"] else ""
    lines = [term.style(line, fg="cyan") for line in wrap(f"{where}: {first['reason']}{against}", term.width)]
    for change in changes:
        lines += change_lines(change, term, wide)
    return lines


def change_lines(row: dict[str, Any], term: Terminal, wide: bool) -> list[str]:
    kind, field = row["change"], row["field"]
    if field is None:   # "initial" or "unchanged"
        text = kind + (f": {row['detail']}" if row["detail"] else "")
        return wrap(text, term.width, "    ")
    if field == "system" and kind != "unverifiable":
        return _system(row, term, wide)
    if kind == "unverifiable":
        return [term.style(line, fg="yellow") for line in wrap(f"{field}: unverifiable — {row['detail']}",
                                                               term.width, "    ")]
    if field == "tools" and kind in ("added", "removed"):
        sign = "+" if kind == "added" else "-"
        name = row["after"] if kind == "added" else row["before"]
        return [term.style(line, fg="green" if kind == "added" else "red")
                for line in wrap(f"tools {sign} {name} ({kind})", term.width, "    ")]
    label = row["path"] if field == "tools" and row["path"] else field
    text = f"{label}: {row['before'] or 'absent'} -> {row['after'] or 'absent'}"
    if kind not in ("changed", "added", "removed"):
        text += f" ({kind}{', ' + row['detail'] if row['detail'] else ''})"
    return wrap(text, term.width, "    ")


def _system(row: dict[str, Any], term: Terminal, wide: bool) -> list[str]:
    lines = wrap(f"system prompt {row['change']}: {row['before']} -> {row['after']} ({row['path']})",
                 term.width, "    ")
    diff = row["detail"].split("\n") if row["detail"] else []   # the diff's lines (a \r in one is shown escaped)
    shown = diff if wide else diff[:DIFF_LINES]
    for line in shown:
        color = "green" if line.startswith("+") else "red" if line.startswith("-") else "cyan"
        lines += [term.style(part, fg=color) for part in wrap(line, term.width, "      ")]
    if len(shown) < len(diff):
        lines += wrap(f"… {len(diff) - len(shown)} more diff line(s) (--wide shows all)", term.width, "      ")
    return lines
