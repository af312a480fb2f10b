"""What a person reads in a terminal: humane numbers, a heading per log, compact rows that fit the terminal's
width (columns dropped in order of importance when it is narrow; `wide` keeps them all), colour only where the
terminal takes it (never with NO_COLOR or into a pipe), and a closing summary that answers the question.
Machine formats are in dsh_audit.reports.render; these views are for people only.

Text from a log is data, never terminal control: every cell, `fit` and `wrap` show it through
`dsh_audit.text.display` (control and bidi characters, line breaks and tabs escaped) before measuring it, so
a value can neither forge a row nor move the cursor, and widths count what is shown.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from ..text import display

EMPTY = "–"


# -- numbers and text as a person reads them ------------------------------------------------------------
def count(value: Any) -> str:
    """1234 -> 1.2K, 15_600_000 -> 15.6M."""
    if value is None:
        return EMPTY
    number = int(value)
    for limit, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "K")):
        if abs(number) >= limit:
            return f"{number / limit:.1f}{suffix}"
    return str(number)


def percent(value: Any) -> str:
    return EMPTY if value is None else f"{100 * float(value):.1f} %"


def usd(value: Any) -> str:
    """Dollars with the digits that matter: $15.62, $0.018, $0.0012, $0."""
    if value is None:
        return EMPTY
    amount = float(value)
    if amount == 0:
        return "$0"
    if abs(amount) >= 1:
        return f"${amount:,.2f}"
    digits = 2
    while abs(amount) < 10 ** -digits and digits < 8:
        digits += 1
    return f"${amount:.{digits + 1}f}"


def shown_path(label: str) -> str:
    """A log's label relative to the working directory when it is below it."""
    file, hash_, session = label.partition("#")
    try:
        relative = os.path.relpath(file)
    except ValueError:   # another drive (Windows)
        return label
    return (relative if not relative.startswith("..") else file) + hash_ + session


# -- terminal -------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Terminal:
    width: int
    color: bool

    def style(self, text: str, **how: Any) -> str:
        return click.style(text, **how) if self.color else text


def terminal(*, stream: Any = None) -> Terminal:
    """This terminal: its width (COLUMNS wins, as it should), colour only on a TTY and without NO_COLOR."""
    out = stream if stream is not None else sys.stdout
    tty = bool(getattr(out, "isatty", lambda: False)())
    return Terminal(shutil.get_terminal_size((100, 24)).columns, tty and "NO_COLOR" not in os.environ)


# -- tables that fit ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Column:
    title: str
    cell: Callable[[dict[str, Any]], str]
    rank: int = 0            # 0 is kept longest; higher ranks are dropped first when the terminal is narrow
    right: bool = False      # numbers align right
    squeeze: bool = False    # free text: may be cut with an ellipsis to fit


def table(rows: Sequence[dict[str, Any]], columns: Sequence[Column], *, width: int, wide: bool,
          indent: str = "  ", emphasis: Callable[[dict[str, Any], str], str] | None = None) -> list[str]:
    """Rows as aligned text lines no wider than `width` (unless `wide`): columns of the highest rank go first,
    then free text is cut. `emphasis` may colour a formatted line (widths are measured before it)."""
    kept = list(columns)
    cells = [[display(column.cell(row)) for column in kept] for row in rows]

    def widths() -> list[int]:
        return [max([len(column.title), *(len(line[i]) for line in cells)]) for i, column in enumerate(kept)]

    def total(sizes: list[int]) -> int:
        return len(indent) + sum(sizes) + 2 * (len(sizes) - 1)

    sizes = widths()
    while not wide and total(sizes) > width and len(kept) > 1 and max(c.rank for c in kept) > 0:
        drop = max(range(len(kept)), key=lambda i: (kept[i].rank, i))
        kept.pop(drop)
        cells = [line[:drop] + line[drop + 1:] for line in cells]
        sizes = widths()
    if not wide and total(sizes) > width:
        squeezable = [i for i, column in enumerate(kept) if column.squeeze]
        if squeezable:
            last = squeezable[-1]
            sizes[last] = max(len(kept[last].title), sizes[last] - (total(sizes) - width))
    lines = [_line([column.title for column in kept], kept, sizes, indent)]
    for row, line in zip(rows, cells, strict=True):
        text = _line(line, kept, sizes, indent)
        lines.append(emphasis(row, text) if emphasis else text)
    return lines


def _line(values: Sequence[str], columns: Sequence[Column], sizes: Sequence[int], indent: str) -> str:
    parts = []
    for value, column, size in zip(values, columns, sizes, strict=True):
        if len(value) > size:
            value = value[: max(0, size - 1)] + "…"
        parts.append(value.rjust(size) if column.right else value.ljust(size))
    return (indent + "  ".join(parts)).rstrip()


def fit(text: str, width: int) -> str:
    """One line cut to `width` with an ellipsis (log text shown escaped)."""
    text = display(text)
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    """Text wrapped to the terminal at spaces; a word longer than a line (a path, a command) is split, so no
    line is wider than the terminal and nothing is lost. Log text is shown escaped: a line break or a
    control character in it is shown, never acted on."""
    return textwrap.wrap(display(text), width=max(20, width), initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False, break_long_words=True) or [indent]
