"""The terminal view of `audit golden check`: per log its status and path, then what changed, request by
request, and a closing count."""

from __future__ import annotations

import re

from ..golden import LogDiff
from .views import Terminal, status_row, wrap

_DIGEST = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{52}\b")


def diff_lines(diff: LogDiff, term: Terminal) -> list[str]:
    """A log's status and path, then what changed, request by request, digests cut to their first 12 digits
    (the golden file and the JUnit report keep them whole)."""
    status = "ok" if diff.ok else diff.status if diff.status == "skipped" else diff.status.upper()
    lines = status_row(status, diff.key, "", term.width)
    colour = "green" if diff.ok else None if diff.status == "skipped" else "red"
    lines[0] = term.style(status, fg=colour, bold=colour == "red" or None) + lines[0][len(status):]
    for line in diff.lines:
        indent = "    " + " " * (len(line) - len(line.lstrip(" ")))
        lines += wrap(_DIGEST.sub(r"\1…", line.lstrip(" ")), term.width, indent)
    return lines


def render(diffs: list[LogDiff], golden_file: str, term: Terminal) -> str:
    changed = sum(diff.status in ("changed", "added", "removed") for diff in diffs)
    unreadable = sum(diff.status == "unreadable" for diff in diffs)
    skipped = sum(diff.status == "skipped" for diff in diffs)
    older = f", {skipped} older generation(s) skipped" if skipped else ""
    view = [line for diff in diffs for line in diff_lines(diff, term)]
    view += [term.style(line, bold=True, fg="red" if changed or unreadable else None) for line in wrap(
        f"{len(diffs) - skipped} log(s) checked against {golden_file}: {changed} changed, {unreadable} "
        f"unreadable{older}", term.width, "")]
    return "\n".join(view)
