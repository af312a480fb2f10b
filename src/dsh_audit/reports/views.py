"""What a person reads in a terminal: humane numbers, a heading per log, compact rows that fit the terminal's
width (columns dropped in order of importance when it is narrow; `wide` keeps them all), colour where it is
wanted (`--color auto|always|never`, NO_COLOR, FORCE_COLOR), and a closing summary that answers the question.
Machine formats are in dsh_audit.reports.render; these views are for people only.

Text from a log is data, never terminal control: every cell, `fit` and `wrap` show it through
`dsh_audit.text.display` (control and bidi characters, line breaks and tabs escaped) before measuring it, so
a value can neither forge a row nor move the cursor. Widths are terminal cells (a CJK character takes two), and
they are measured before the tool's own styling is added.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
from rich.cells import cell_len

from ..text import clip, display, first_character, for_terminal, head

COLOR_CHOICES = ("auto", "always", "never")
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


def duration(ms: int) -> str:
    """Milliseconds as a person reads a wait: 850 ms, 15.9 s, 4 min 12 s, 2 h 5 min, 3 d 2 h."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    seconds = ms // 1000
    for unit, size, smaller, small_size in (("d", 86_400, "h", 3_600), ("h", 3_600, "min", 60)):
        if seconds >= size:
            whole, rest = divmod(seconds, size)
            return f"{whole} {unit} {rest // small_size} {smaller}"
    return f"{seconds // 60} min {seconds % 60} s"


NO_USAGE = "no usage logged"


def cost(value: Any) -> str:
    """A summed cost: none where no call logged its usage, which is not a cost of $0."""
    return NO_USAGE if value is None else usd(value)


def side_calls(calls: int, tokens: Any) -> str:
    """The side calls a product logged (cache-report's kind `side`): counted, unpriced, their size estimated."""
    size = f", ~{count(tokens)} tokens" if tokens is not None else ""
    return f"{calls} side call{'s' if calls != 1 else ''}, unpriced{size}"


def shown_path(label: str) -> str:
    """A log's label relative to the working directory when it is below it; a URL as it is."""
    if "://" in label:   # an object in storage (readers.objects), which no folder is the parent of
        return label
    file, hash_, session = label.partition("#")
    try:
        relative = os.path.relpath(file)
    except ValueError:   # another drive (Windows)
        return label
    return (relative if not relative.startswith("..") else file) + hash_ + session


# -- terminal -------------------------------------------------------------------------------------------
class Terminal(msgspec.Struct, frozen=True):
    width: int
    color: bool

    def style(self, text: str, **how: Any) -> str:
        return style(text, **how) if self.color and any(v is not None for v in how.values()) else text

    def show(self, text: str) -> str:
        """A rendered view made safe to print: the tool's own styling kept when colour is on, anything else
        that would act on a terminal escaped (dsh_audit.text.for_terminal)."""
        return for_terminal(text, color=self.color)


def _set(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "") != ""


def wants_color(choice: str | None, stream: Any, environ: Mapping[str, str] = os.environ) -> bool:
    """`always` and `never` decide. `auto` (the default): never with NO_COLOR (no-color.org: set and not empty);
    always with FORCE_COLOR set, unless to 0 or false (as Node's tools read it); else only on a terminal that
    is not TERM=dumb."""
    if choice == "always":
        return True
    if choice == "never" or _set(environ, "NO_COLOR"):
        return False
    if _set(environ, "FORCE_COLOR"):
        return environ["FORCE_COLOR"].strip().lower() not in ("0", "false")
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return tty and environ.get("TERM") != "dumb"


_COLOURS = {"black": 30, "red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}


def style(text: str, *, fg: str | None = None, bold: bool | None = None, dim: bool | None = None) -> str:
    """`text` in ANSI colour and weight, the sequences click.style writes for the same arguments (the terminal
    snapshots pin them), so the views need no command-line library."""
    codes = [] if fg is None else [_COLOURS[fg]]
    codes += [] if bold is None else [1 if bold else 22]
    codes += [] if dim is None else [2 if dim else 22]
    return "".join(f"\033[{code}m" for code in codes) + text + "\033[0m"


def terminal(choice: str | None = None, *, stream: Any = None) -> Terminal:
    """This terminal: its width (COLUMNS wins, as it should) and whether it gets colour (`wants_color`, with
    the --color `choice` given, if any)."""
    out = stream if stream is not None else sys.stdout
    return Terminal(shutil.get_terminal_size((100, 24)).columns, wants_color(choice, out))


# -- tables that fit ------------------------------------------------------------------------------------
class Column(msgspec.Struct, frozen=True):
    title: str
    cell: Callable[[dict[str, Any]], str]
    rank: int = 0            # 0 is kept longest; higher ranks are dropped first when the terminal is narrow
    right: bool = False      # numbers align right
    squeeze: bool = False    # free text: may be cut with an ellipsis to fit
    keep_end: bool = False   # cut at the start, not the end (a path: its end names the project)
    floor: int = 0           # free text cut down to this many cells before any column is dropped (0: after)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[Column], *, width: int, wide: bool,
          indent: str = "  ", emphasis: Callable[[dict[str, Any], str], str] | None = None) -> list[str]:
    """Rows as aligned text lines no wider than `width` cells (unless `wide`): columns of the highest rank go
    first, then free text is cut. `emphasis` may colour a formatted line (widths are measured before it)."""
    kept = list(columns)
    cells = [[display(column.cell(row)) for column in kept] for row in rows]
    cell_widths = [[_cells(cell) for cell in line] for line in cells]   # measured once, whatever is dropped

    def widths() -> list[int]:
        sizes = [max([cell_len(column.title), *(line[i] for line in cell_widths)]) for i, column in enumerate(kept)]
        for i, column in enumerate(kept):   # free text with a floor gives way first
            excess = total(sizes) - width
            if column.floor and excess > 0 and not wide:
                sizes[i] -= min(excess, max(0, sizes[i] - max(column.floor, cell_len(column.title))))
        return sizes

    def total(sizes: list[int]) -> int:
        return len(indent) + sum(sizes) + 2 * (len(sizes) - 1)

    sizes = widths()
    while not wide and total(sizes) > width and len(kept) > 1 and max(c.rank for c in kept) > 0:
        drop = max(range(len(kept)), key=lambda i: (kept[i].rank, i))
        kept.pop(drop)
        for values, measured in zip(cells, cell_widths, strict=True):
            del values[drop], measured[drop]
        sizes = widths()
    if not wide and total(sizes) > width:
        squeezable = [i for i, column in enumerate(kept) if column.squeeze]
        if squeezable:
            last = squeezable[-1]
            sizes[last] = max(cell_len(kept[last].title), sizes[last] - (total(sizes) - width))
    lines = [_line([column.title for column in kept], [cell_len(column.title) for column in kept], kept, sizes,
                   indent)]
    for row, line, line_widths in zip(rows, cells, cell_widths, strict=True):
        text = _line(line, line_widths, kept, sizes, indent)
        lines.append(emphasis(row, text) if emphasis else text)
    return lines


def _cells(text: str) -> int:
    """The terminal cells of a displayed field: its length when ASCII (display() has escaped every control
    character), which most cells of a report are."""
    return len(text) if text.isascii() else cell_len(text)


def _cut(text: str, width: int, *, keep_end: bool = False) -> str:
    """`text` in at most `width` cells, an ellipsis where it was cut (at the start with `keep_end`), on whole
    characters (dsh_audit.text.clip)."""
    return clip(text, width, cells=True, keep_end=keep_end)


def _pad(text: str, width: int, right: bool) -> str:
    room = " " * max(0, width - cell_len(text))
    return room + text if right else text + room


def _line(values: Sequence[str], widths: Sequence[int], columns: Sequence[Column], sizes: Sequence[int],
          indent: str) -> str:
    """One row of cells (`widths`: each one's terminal cells) cut and padded to the column sizes."""
    parts = [(" " * (size - width) + value if column.right else value + " " * (size - width)) if width <= size
             else _pad(_cut(value, size, keep_end=column.keep_end), size, column.right)
             for value, width, column, size in zip(values, widths, columns, sizes, strict=True)]
    return (indent + "  ".join(parts)).rstrip()


def unreadable_lines(unreadable: Sequence[Any], term: Terminal) -> list[str]:
    """The logs a report left out (readers.discover.Unreadable), each with why, in red."""
    if not unreadable:
        return []
    lines = [term.style(line, fg="red", bold=True) for line in
             wrap(f"{len(unreadable)} log(s) could not be read and are not in this report:", term.width, "")]
    for log in unreadable:
        lines += [term.style(line, fg="red") for line in
                  wrap(f"{shown_path(log.label)}: {located_error(log.label, log.reason)}", term.width)]
    return lines


def skipped_lines(skipped: Sequence[Any], term: Terminal) -> list[str]:
    """The older generations a report left out (readers.discover.Skipped), each with the log read instead, as
    verify's table shows them."""
    if not skipped:
        return []
    lines = wrap(f"{len(skipped)} older generation(s) skipped (dsh reads the newest):", term.width, "")
    for log in skipped:
        lines += wrap(f"{shown_path(log.label)}: an older generation; read {shown_path(log.read_instead)}",
                      term.width)
    return lines


STATUS_WIDTH = 10


def status_row(status: str, label: str, details: str, width: int) -> list[str]:
    """A log's row in verify and golden check: `status  path  (details)`; where that is too wide, the details go
    under the path, and only a path wider than the terminal itself is cut (at its start: its end names the log)."""
    head, details, path = f"{status:<{STATUS_WIDTH}} ", display(details), display(label)
    if len(head) + cell_len(path) + cell_len(details) <= width:
        return [head + path + details]
    return [head + fit(path, max(12, width - len(head)), keep_end=True),
            *(wrap(details.strip(), width, " " * (len(head) + 2)) if details else [])]


def located_error(label: str, error: str) -> str:
    """A log's error without the log's own path in front (the view shows it beside the log): `line N: why`."""
    located = re.match(rf"{re.escape(label)}(?::(\d+))?: ", error)
    if located is None:
        return error
    return (f"line {located[1]}: " if located[1] else "") + error[located.end():]


def fit(text: str, width: int, *, keep_end: bool = False) -> str:
    """One line cut to `width` cells with an ellipsis (log text shown escaped); `keep_end` cuts its start."""
    return _cut(display(text), width, keep_end=keep_end)


def wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    """Text wrapped to the terminal at spaces (runs of spaces inside a line kept: a diff's indentation); a word
    longer than a line (a path, a command) is split, so no line is wider than the terminal and nothing is lost.
    Log text is shown escaped: a line break or a control character in it is shown, never acted on."""
    width = max(20, width)
    continued = indent + "  "
    lines: list[str] = []
    line, prefix, gap = "", indent, ""
    for token in _WORDS(display(text)):
        if token.startswith(" "):
            gap = token
            continue
        candidate = line + gap + token if line or not lines else token   # a paragraph's own indent is kept
        gap = ""
        if cell_len(prefix + candidate) <= width:
            line = candidate
            continue
        if line:
            lines.append(prefix + line)
            prefix = continued
        while len(token) > 1 and cell_len(prefix + token) > width:   # a word wider than a line: what fits first
            piece = head(token, max(1, width - cell_len(prefix)), cells=True) or first_character(token)
            lines.append(prefix + piece)
            token, prefix = token[len(piece):], continued
        line = token
    lines.append(prefix + line)
    return lines


_WORDS = re.compile(r" +|[^ ]+").findall
