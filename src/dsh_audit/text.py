"""Log text made safe to show or store. The one home of the display rule (docs/display-safety.md).

A log is data written by someone else: its strings may hold lone surrogates (a JS string can), which UTF-8 (a
terminal, a file, Arrow's strings) cannot carry, and characters that act on a terminal instead of showing:
ESC starts a control sequence (erase a line, move the cursor, OSC 52 writes the clipboard), CR returns to
the start of the line, C1 controls are 8-bit control sequences, and the bidi embeddings, overrides and
isolates reorder what follows them. Any of them could forge an "ok" row over a FAIL.

* `printable`: every line the CLI prints. Such characters are shown as JSON spells them (\\r, \\b, \\f,
  \\u001b, \\u009b, \\u202e, \\ud800), newline and tab kept: a multi-line view prints its lines on purpose, and
  a JSON document stays valid JSON with the same data (json.dumps already escapes C0 inside its strings).
* `display`: one field of a human view (a cell, a label, a message): newline and tab escaped too (\\n, \\t),
  so a value never starts a line of its own.
* `printable_row`: machine rows (CSV, JSON, Parquet) keep the real text; only lone surrogates are escaped,
  because Arrow cannot hold them.

* `for_terminal`: a whole human view as it is printed. With colour off it is `printable`. With colour on, the
  tool's own styling (SGR sequences: ESC [ digits and semicolons m, colour and weight only) is kept and
  everything else `printable` escapes is escaped. Log text in a view has been through `display` already, so
  it holds no ESC of its own; a view that forgot that still cannot move the cursor or write the clipboard.

Backslashes are never escaped: `display` is idempotent, so text may pass through it more than once.
"""

from __future__ import annotations

import re
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 but newline and tab, DEL and C1, the line and paragraph separators, bidi embeddings, overrides and
# isolates (U+202A-U+202E, U+2066-U+2069), lone surrogates.
_ACTIVE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_IN_LINES = re.compile(f"[{_ACTIVE}]")
_IN_FIELD = re.compile(f"[\t\n{_ACTIVE}]")
_SHORT = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT.get(char) or f"\\u{ord(char):04x}"


def printable(text: str) -> str:
    """Text to print: what would act on a terminal (C0 but newline and tab, DEL, C1, bidi controls, U+2028/9)
    and lone surrogates as JSON escapes. Valid inside a JSON string, so a JSON document keeps its data."""
    return _IN_LINES.sub(_escaped, text)


_STYLE = "\x1b\\[[0-9;]*m"
_IN_STYLED_LINES = re.compile(f"{_STYLE}|[{_ACTIVE}]")


def _escaped_unless_style(match: re.Match[str]) -> str:
    text = match.group()
    return text if len(text) > 1 else _escaped(match)


def for_terminal(text: str, *, color: bool) -> str:
    """A rendered human view as printed: `printable`, but with colour on its SGR styling kept."""
    return _IN_STYLED_LINES.sub(_escaped_unless_style, text) if color else printable(text)


def display(text: str) -> str:
    """One field of a human view: as `printable`, and newline and tab escaped too, so it stays on its line."""
    return _IN_FIELD.sub(_escaped, text)


def utf8_safe(text: str) -> str:
    """Only lone surrogates as \\uXXXX escapes: the rest of the text exactly as logged."""
    return _LONE_SURROGATE.sub(_escaped, text)


def printable_row(row: dict[str, Any]) -> dict[str, Any]:
    """A machine-format row (CSV, JSON, Parquet) Arrow can hold: lone surrogates escaped, nothing else."""
    return {key: utf8_safe(value) if isinstance(value, str) else value for key, value in row.items()}
