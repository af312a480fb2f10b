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

* `clip`, `head`, `tail`: text cut short, by every view that cuts it, on whole characters as a reader sees
  them (below), in code points or in terminal cells.

Backslashes are never escaped: `display` is idempotent, so text may pass through it more than once.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from rich.cells import cell_len

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


# -- cutting text short -------------------------------------------------------------------------------------
# Every excerpt a view shows is cut here, on what a reader sees as one character (a grapheme, near enough for a
# cut): never inside a base and its combining marks, a variation selector, an emoji's skin tone or tag
# sequence, a ZWJ sequence (👩‍💻), a flag's pair of regional indicators, CR LF, or a surrogate pair.
_ZWJ = "\u200d"
_FLAG_RUN = 1024   # regional indicators counted back to pair a flag; no real text has a longer run


def _attaches(char: str) -> bool:
    """`char` belongs to the character before it: a combining mark or enclosing keycap (categories M*), a
    variation selector, an emoji modifier, a tag character, the ZWJ itself, or a low surrogate."""
    return (unicodedata.category(char)[0] == "M" or char == _ZWJ or "\U0001f3fb" <= char <= "\U0001f3ff"
            or "\U000e0020" <= char <= "\U000e007f" or "\udc00" <= char <= "\udfff")


def _regional(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"


def is_boundary(text: str, index: int) -> bool:
    """Whether cutting `text` at `index` keeps every character whole (see above)."""
    if index <= 0 or index >= len(text):
        return True
    before, after = text[index - 1], text[index]
    if _attaches(after) or before == _ZWJ or (before, after) == ("\r", "\n"):
        return False
    if _regional(before) and _regional(after):   # flags pair from the start of a run of regional indicators
        run = 0   # counted back at most _FLAG_RUN: a hostile run of them costs no more than that per cut
        while index - run > 0 and run < _FLAG_RUN and _regional(text[index - run - 1]):
            run += 1
        return run % 2 == 0
    return True


def _characters(text: str, *, backwards: bool = False) -> Iterator[tuple[int, int]]:
    """(start, end) of each character as a reader sees it, from the start or from the end of `text`."""
    if backwards:
        end = len(text)
        for start in range(len(text) - 1, -1, -1):
            if is_boundary(text, start):
                yield start, end
                end = start
    else:
        start = 0
        for end in range(1, len(text) + 1):
            if is_boundary(text, end):
                yield start, end
                start = end


def _size(text: str, cells: bool) -> int:
    """Code points, or the terminal cells the views measure (rich's, which may count a whole emoji sequence)."""
    return cell_len(text) if cells else len(text)


def first_character(text: str) -> str:
    """What a reader sees as the first character of `text`: a code point and all that attaches to it."""
    return next((text[start:end] for start, end in _characters(text)), "")


def head(text: str, limit: int, *, cells: bool = False) -> str:
    """The longest start of `text` of whole characters within `limit` code points (terminal cells with `cells`)."""
    used, fits = 0, 0
    for start, end in _characters(text):
        used += _size(text[start:end], cells)
        if used > limit:
            break
        fits = end
    return text[:fits]


def tail(text: str, limit: int, *, cells: bool = False) -> str:
    """The longest end of `text` of whole characters within `limit` code points (terminal cells with `cells`)."""
    used, fits = 0, len(text)
    for start, end in _characters(text, backwards=True):
        used += _size(text[start:end], cells)
        if used > limit:
            break
        fits = start
    return text[fits:]


def clip(text: str, limit: int, *, cells: bool = False, keep_end: bool = False, mark: str = "…") -> str:
    """`text` within `limit` code points (terminal cells with `cells`), `mark` counted in, where it was cut (at
    the start with `keep_end`), on whole characters."""
    if _size(text, cells) <= limit:
        return text
    room = limit - _size(mark, cells)
    if room < 0:
        return head(mark, limit, cells=cells)
    return mark + tail(text, room, cells=cells) if keep_end else head(text, room, cells=cells) + mark
