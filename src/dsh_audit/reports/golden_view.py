"""The terminal view of `audit golden check`: per log its status and path, then what changed, request by
request; requests changed alike (the same system-prompt edit in every request of a run) name one change, shown
once below with its text as header-diff shows it; then a closing count."""

from __future__ import annotations

import re
from typing import Any

from ..golden import LogDiff, RequestChange
from .header_view import change_lines
from .views import Terminal, status_row, wrap

_DIGEST = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{52}\b")
_NAMES = 12   # requests named in a log's line of one change before "… N more"


def _status_lines(diff: LogDiff, term: Terminal) -> list[str]:
    status = "ok" if diff.ok else diff.status if diff.status == "skipped" else diff.status.upper()
    lines = status_row(status, diff.key, "", term.width)
    colour = "green" if diff.ok else None if diff.status == "skipped" else "red"
    lines[0] = term.style(status, fg=colour, bold=colour == "red" or None) + lines[0][len(status):]
    return lines


def _indented(line: str, term: Terminal) -> list[str]:
    """A diff line under its log, digests cut to their first 12 digits (the JUnit report keeps them whole)."""
    indent = "    " + " " * (len(line) - len(line.lstrip(" ")))
    return wrap(_DIGEST.sub(r"\1…", line.lstrip(" ")), term.width, indent)


def _names(changes: list[RequestChange]) -> str:
    names = [change.name for change in changes]
    more = len(names) - _NAMES
    return ", ".join(names[:_NAMES]) + (f", … {more} more" if more > 0 else "")


def diff_lines(diff: LogDiff, numbers: dict[str, int], term: Terminal) -> list[str]:
    """A log's status and path, then its requests added or removed, then its changed requests: in one line those
    whose body is not pinned (the digests are in the JUnit report), in one line those changed alike, naming their
    numbered changes."""
    lines = _status_lines(diff, term)
    for line in diff.lines:
        lines += _indented(line, term)
    alike: dict[tuple[int, ...], list[RequestChange]] = {}
    unknown = []   # other bytes, no body pinned to say which
    for change in diff.changes:
        items = change.items()
        if items:
            alike.setdefault(tuple(numbers[key] for key, _, _ in items), []).append(change)
        elif change.digests[0] != change.digests[1]:
            unknown.append(change)
        else:
            lines += _indented(change.summary, term)   # the same bytes, dispatched at another seq
    if unknown:
        lines += _indented(f"~ {_names(unknown)} changed: other bytes (sha256)", term)
    for changed, changes in alike.items():
        which = f"change {changed[0]}" if len(changed) == 1 else f"changes {', '.join(map(str, changed))}"
        lines += _indented(f"~ {_names(changes)} changed: {which}", term)
    return lines


def change_text(number: int, item: tuple[dict[str, Any] | None, tuple[str, ...]], requests: int, logs: int,
                term: Terminal) -> list[str]:
    """A change once: how many requests (of how many logs) have it, then its text as header-diff shows it."""
    count = f"the same change in {requests} requests" if requests > 1 else "in 1 request"
    heading = f"change {number}: {count}" + (f" of {logs} logs" if logs > 1 else "")
    lines = [term.style(line, fg="cyan", bold=True) for line in wrap(heading, term.width, "")]
    part, notes = item
    if part is not None:
        lines += change_lines(part, term, wide=False)
    for note in notes:   # a message text's diff lines come indented by two, as header-diff colours them
        mark = note[2:3] if note.startswith("  ") else ""
        colour = "green" if mark == "+" else "red" if mark == "-" else "cyan" if mark == "@" else None
        lines += [term.style(line, fg=colour) for line in wrap(note, term.width, "    ")]
    return lines


def render(diffs: list[LogDiff], golden_file: str, term: Terminal) -> str:
    found: dict[str, tuple[dict[str, Any] | None, tuple[str, ...]]] = {}
    having: dict[str, list[str]] = {}   # each change's requests, by the log they are in
    for diff in diffs:
        for change in diff.changes:
            for key, part, notes in change.items():
                found.setdefault(key, (part, notes))
                having.setdefault(key, []).append(diff.key)
    numbers = {key: number for number, key in enumerate(found, 1)}
    view = [line for diff in diffs for line in diff_lines(diff, numbers, term)]
    for key, item in found.items():
        view += change_text(numbers[key], item, len(having[key]), len(set(having[key])), term)
    if any(not change.items() and change.digests[0] != change.digests[1] for diff in diffs
           for change in diff.changes):
        view += wrap("the golden file pins digests only: `audit golden update --full` pins the bodies too, so a "
                     "check shows the text of each change", term.width, "")
    changed = sum(diff.status in ("changed", "added", "removed") for diff in diffs)
    unreadable = sum(diff.status == "unreadable" for diff in diffs)
    skipped = sum(diff.status == "skipped" for diff in diffs)
    older = f", {skipped} older generation(s) skipped" if skipped else ""
    view += [term.style(line, bold=True, fg="red" if changed or unreadable else None) for line in wrap(
        f"{len(diffs) - skipped} log(s) checked against {golden_file}: {changed} changed, {unreadable} "
        f"unreadable{older}", term.width, "")]
    return "\n".join(view)
