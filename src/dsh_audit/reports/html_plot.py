"""One session's plot for `audit report`, drawn as inline SVG markup in Python (docs/html-report.md, "Why
hand-written SVG").

Pure: a log's cache-report rows and header snapshots in, SVG text and counts out. x is the request's place in the
log, labelled `turn.step#attempt`; one stacked bar per request (cache read below, miss above), a × per collapse
coloured by its cause, header changes and compactions in a lane above with guide lines, the cumulative cost on a
right axis. Every mark is one SVG element in a group named by its role (`data-role`), so a browser test counts
what was drawn; the hover text of each request travels as JSON for the page's few lines of script.
"""

from __future__ import annotations

import html
import math
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ..text import clip, printable
from .cache_report import UNEXPLAINED
from .cache_view import call_name
from .verdict import verdict
from .views import count, percent, usd

# A header snapshot is a change when one of its rows is neither of these (header-diff's `change` column):
# `unverifiable` is a scrubbed field, for which the fold saw no change either.
NO_HEADER_CHANGE = frozenset({"initial", "unchanged", "unverifiable"})
COMPACTION_REPLACE = "compaction-replace"
LINES_DRAWN = 600          # vertical guide lines per plot (header changes, compactions); marks are all drawn
TEXT_LIMIT = 300           # characters of one log-derived text in a hover label

CAUSE_COLOURS = {"unexplained": "#d62728", "header-change": "#ff7f0e", "compaction-replace": "#9467bd",
                 "model-change": "#8c564b", "system-prompt-change": "#e377c2", "resume": "#17becf",
                 "resume-or-fork": "#17becf", "first-request": "#7f7f7f"}
OTHER_COLOURS = ("#bcbd22", "#1f77b4", "#2ca02c", "#7f7f7f", "#393b79", "#637939")
READ_COLOUR, MISS_COLOUR, COST_COLOUR, NO_USAGE_COLOUR = "#2ca02c", "#aec7e8", "#1f1f1f", "#9e9e9e"
HEADER_COLOUR, COMPACTION_COLOUR = "#ff7f0e", "#9467bd"

# Geometry, in CSS pixels: the SVG is drawn at its own size (no scaling), so text stays legible; a log with more
# requests than fit at MIN_STEP each is wider than the page and scrolls sideways in its box.
FIT_WIDTH = 1240
MIN_STEP = 2.0
LEFT, RIGHT, TOP, BOTTOM = 78, 88, 10, 58
HEIGHT = 400
LANE = 40                  # the header/compaction lane above the bars
TICK_SPACING = 76          # at least this many pixels between two x labels

Scale = Callable[[float], float]   # a data value to its pixel on one axis


@dataclass(slots=True)
class SessionPlot:
    """One log's plot and what it shows, counted (the page states the counts; tests read them). `tips`: the hover
    text of each request in x order; `legend`: (role, label, colour) of each kind of mark drawn."""

    svg: str
    tips: list[str]
    legend: list[tuple[str, str, str]]
    requests: int = 0
    collapses: int = 0
    header_changes: int = 0
    compactions: int = 0
    cost_points: int = 0
    collapse_rows: list[dict[str, Any]] = field(default_factory=list)


def attr(value: Any) -> str:
    """Log-derived text as an HTML/SVG attribute value or text (always valid UTF-8)."""
    return html.escape(printable(str(value)), quote=True)


def tip_text(value: Any, limit: int = TEXT_LIMIT) -> str:
    """Log-derived text for a hover label, cut to `limit` characters on a whole character (the page sets it as
    text, never as markup)."""
    return clip(printable(str(value)), limit)


def header_changes(headers: pl.DataFrame) -> list[tuple[int, str]]:
    """(seq, what changed) per header snapshot of one log with a verifiable change, in seq order."""
    changed = headers.filter(~pl.col("change").is_in(list(NO_HEADER_CHANGE)) & pl.col("seq").is_not_null())
    snapshots: dict[int, list[str]] = {}
    reasons: dict[int, str] = {}
    for row in changed.iter_rows(named=True):
        what = " ".join(str(part) for part in (row["field"], row["change"], row["path"]) if part)
        snapshots.setdefault(row["seq"], []).append(what)
        reasons[row["seq"]] = str(row["reason"] or "")
    return [(seq, f"request/header seq {seq} ({reasons[seq]}): " + "; ".join(dict.fromkeys(parts)))
            for seq, parts in sorted(snapshots.items())]


def colour(cause: str) -> str:
    if cause in CAUSE_COLOURS:
        return CAUSE_COLOURS[cause]
    first = cause.split("+")[0]
    if first in CAUSE_COLOURS and first != "first-request":
        return CAUSE_COLOURS[first]
    return OTHER_COLOURS[sum(cause.encode("utf-8", "replace")) % len(OTHER_COLOURS)]


def collapse_text(row: dict[str, Any]) -> str:
    """A collapse as its hover text: the call, its cause and detail, cache-report's verdict, the cost lost."""
    lines = [f"collapse at {call_name(row)} · seq {row['seq']}", f"cause: {tip_text(row['cause'] or UNEXPLAINED, 80)}",
             tip_text(verdict(row).text, 200), f"cost lost: {usd(row['collapseCostUsd'])}"]
    if row["causeDetail"]:
        lines.insert(2, tip_text(row["causeDetail"]))
    return "\n".join(lines)


def _request_tip(row: dict[str, Any]) -> str:
    usage = (f"cache read {count(row['cacheReadTokens'])} · miss {count(row['inputTokens'])} · "
             f"hit {percent(row['hitRatio'])}" if row["inputTokens"] is not None or row["cacheReadTokens"] is not None
             else "no usage logged")
    lines = [f"{call_name(row)} · seq {row['seq']}" + (" · inherited" if row["inherited"] else ""), usage,
             f"cost {usd(row['costUsd'])}"]
    if row["collapse"]:
        lines.append(collapse_text(row))
    return printable("\n".join(lines))


@dataclass(slots=True)
class _Walk:
    """One pass over a log's calls: what the plot draws, in request positions (request k is at k, 1-based)."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    cost: list[tuple[float, float]] = field(default_factory=list)
    compactions: list[tuple[float, str]] = field(default_factory=list)
    collapses: list[dict[str, Any]] = field(default_factory=list)
    spent: float = 0.0


def _walk(rows: list[dict[str, Any]]) -> _Walk:
    walk = _Walk()
    summary_since_request = False
    for row in rows:
        if not row["inherited"]:
            walk.spent += row["costUsd"] or 0.0
        position = len(walk.requests)
        if row["kind"] != "request":
            if row["kind"] == "compaction":
                walk.compactions.append((position + 0.5, f"compaction summary call, seq {row['seq']}: "
                                         f"{count(row['inputTokens'])} in, {count(row['outputTokens'])} out, "
                                         f"{usd(row['costUsd'])}"))
                summary_since_request = True
            walk.cost.append((position + 0.5, walk.spent))
            continue
        walk.requests.append(row)
        position += 1
        walk.cost.append((position, walk.spent))
        cause = row["cause"] or ""
        if COMPACTION_REPLACE in cause.split("+") and not summary_since_request:
            walk.compactions.append((position - 0.5, f"compaction replace before {call_name(row)}: "
                                                     f"{row['causeDetail'] or ''}"))
        summary_since_request = False
        if row["collapse"]:
            walk.collapses.append({**row, "x": position})
    return walk


def nice_ticks(most: float, wanted: int = 5) -> list[float]:
    """0 and round steps (1, 2 or 5 times a power of ten) up to the first at or above `most`."""
    if most <= 0 or not math.isfinite(most):
        return [0.0, 1.0]
    rough = most / wanted
    power = 10 ** math.floor(math.log10(rough))
    step = next(power * k for k in (1, 2, 5, 10) if power * k >= rough)
    return [step * k for k in range(math.ceil(most / step - 1e-9) + 1)]


def short_count(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.0f}"


def money(value: float, top: float) -> str:
    """Dollars with the digits the largest tick needs: $12.50, $0.018, $0.00012."""
    digits = 2
    while top and top < 10 ** -digits * 5 and digits < 8:
        digits += 1
    return f"${value:,.{digits}f}"


def _n(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def session_plot(calls: pl.DataFrame, headers: pl.DataFrame) -> SessionPlot:
    """The plot of one log's model calls (`calls`: its rows of CacheReport.requests, in log order) and header
    snapshots (`headers`: its rows of build_header_diff). Header changes and compactions sit at the gap between
    the requests they come between; the cumulative cost counts the log's own calls (not a child's inherited)."""
    walk = _walk(calls.to_dicts())
    seqs = [row["seq"] for row in walk.requests]
    header_marks = [(bisect_left(seqs, seq) + 0.5, text) for seq, text in header_changes(headers)]
    n = len(walk.requests)
    step = max(MIN_STEP, (FIT_WIDTH - LEFT - RIGHT) / max(n, 1))
    width = LEFT + step * max(n, 1) + RIGHT
    lane = bool(header_marks or walk.compactions)
    top = TOP + (LANE if lane else 0)
    bottom = HEIGHT - BOTTOM

    def x_of(position: float) -> float:   # the centre of request `position` (1-based); k + 0.5 is a gap
        return LEFT + (position - 0.5) * step

    prompt = [(row["cacheReadTokens"] or 0) + (row["inputTokens"] or 0) for row in walk.requests]
    token_ticks = nice_ticks(max(prompt, default=0))
    cost_ticks = nice_ticks(walk.spent)

    def y_tokens(value: float) -> float:
        return bottom - (bottom - top) * value / token_ticks[-1]

    def y_cost(value: float) -> float:
        return bottom - (bottom - top) * value / cost_ticks[-1]

    parts = [f'<svg width="{_n(width)}" height="{HEIGHT}" '
             f'viewBox="0 0 {_n(width)} {HEIGHT}" data-left="{LEFT}" data-step="{step!r}" data-top="{top}" '
             f'data-bottom="{bottom}" role="img" aria-label="prompt tokens per request">']
    parts += _axes(walk.requests, token_ticks, cost_ticks, y_tokens, y_cost, x_of, step, width, top, bottom)
    bar = min(step * 0.8, 60.0) if step >= 4 else step
    reads, misses, unlogged = [], [], []
    for k, row in enumerate(walk.requests, start=1):
        read, miss = row["cacheReadTokens"] or 0, row["inputTokens"] or 0
        left = _n(x_of(k) - bar / 2)
        reads.append(f'<rect x="{left}" y="{_n(y_tokens(read))}" width="{_n(bar)}" '
                     f'height="{_n(bottom - y_tokens(read))}"/>')
        misses.append(f'<rect x="{left}" y="{_n(y_tokens(read + miss))}" width="{_n(bar)}" '
                      f'height="{_n(y_tokens(read) - y_tokens(read + miss))}"/>')
        if row["inputTokens"] is None and row["cacheReadTokens"] is None:
            unlogged.append(f'<circle cx="{_n(x_of(k))}" cy="{_n(bottom)}" r="3"/>')
    parts.append(f'<g data-role="read" fill="{READ_COLOUR}">{"".join(reads)}</g>')
    parts.append(f'<g data-role="miss" fill="{MISS_COLOUR}">{"".join(misses)}</g>')
    legend = [("read", "cache read", READ_COLOUR), ("miss", "cache miss", MISS_COLOUR)]
    if unlogged:
        parts.append(f'<g data-role="no-usage" fill="{NO_USAGE_COLOUR}">{"".join(unlogged)}</g>')
        legend.append(("no-usage", "no usage logged", NO_USAGE_COLOUR))
    cost_points = " ".join(f"{_n(x_of(x))},{_n(y_cost(spent))}" for x, spent in walk.cost)
    if walk.cost:
        parts.append(f'<polyline data-role="cost" points="{cost_points}" fill="none" stroke="{COST_COLOUR}" '
                     'stroke-width="1.5"/>')
    legend.append(("cost", "cumulative cost (right axis)", COST_COLOUR))
    by_cause: dict[str, list[dict[str, Any]]] = {}
    for row in walk.collapses:
        by_cause.setdefault(row["cause"] or UNEXPLAINED, []).append(row)
    for cause, members in by_cause.items():
        crosses = "".join(_cross(x_of(row["x"]), max(y_tokens((row["cacheReadTokens"] or 0)
                                                               + (row["inputTokens"] or 0)), top + 5))
                          for row in members)
        parts.append(f'<g data-role="collapse" data-cause="{attr(cause)}" stroke="{colour(cause)}" '
                     f'stroke-width="2.4" stroke-linecap="round">{crosses}</g>')
        legend.append(("collapse", f"collapse: {tip_text(cause, 60)} ({len(members)})", colour(cause)))
    if lane:
        parts += _lane(header_marks, walk.compactions, x_of, top, bottom)
        legend += [(role, label, shade) for role, label, shade, marks in (
            ("header", "header change", HEADER_COLOUR, header_marks),
            ("compaction", "compaction", COMPACTION_COLOUR, walk.compactions)) if marks]
    parts.append("</svg>")
    return SessionPlot("".join(parts), [_request_tip(row) for row in walk.requests], legend, requests=n,
                       collapses=len(walk.collapses), header_changes=len(header_marks),
                       compactions=len(walk.compactions), cost_points=len(walk.cost), collapse_rows=walk.collapses)


def _cross(x: float, y: float) -> str:
    return f'<path d="M{_n(x - 4)} {_n(y - 4)}l8 8m0-8l-8 8"/>'


def _axes(requests: list[dict[str, Any]], token_ticks: list[float], cost_ticks: list[float], y_tokens: Scale,
          y_cost: Scale, x_of: Scale, step: float, width: float, top: float, bottom: float) -> list[str]:
    """Grid lines and tick labels of both y axes, the x labels (`turn.step#attempt`, spaced to stay apart), the
    axis titles."""
    right = width - RIGHT
    grid = "".join(f'<line x1="{LEFT}" x2="{_n(right)}" y1="{_n(y_tokens(t))}" y2="{_n(y_tokens(t))}"/>'
                   for t in token_ticks)
    left_labels = "".join(f'<text x="{LEFT - 6}" y="{_n(y_tokens(t) + 4)}">{short_count(t)}</text>'
                          for t in token_ticks)
    right_labels = "".join(f'<text x="{_n(right + 6)}" y="{_n(y_cost(t) + 4)}">{money(t, cost_ticks[-1])}</text>'
                           for t in cost_ticks)
    every = max(1, math.ceil(TICK_SPACING / step))
    shown = range(1, len(requests) + 1, every)
    x_labels = "".join(f'<text x="{_n(x_of(k))}" y="{bottom + 16}">{attr(call_name(requests[k - 1]))}</text>'
                       for k in shown)
    x_ticks = "".join(f'<line x1="{_n(x_of(k))}" x2="{_n(x_of(k))}" y1="{bottom}" y2="{bottom + 4}"/>' for k in shown)
    middle = (top + bottom) / 2
    return [f'<g class="grid" stroke="#e6e6e6">{grid}</g>',
            f'<g class="axis" stroke="#555">{x_ticks}<line x1="{LEFT}" x2="{_n(right)}" y1="{bottom}" '
            f'y2="{bottom}"/></g>',
            f'<g class="ticks" text-anchor="end">{left_labels}</g>',
            f'<g class="ticks" text-anchor="start">{right_labels}</g>',
            f'<g class="ticks" text-anchor="middle">{x_labels}</g>',
            f'<text class="title" transform="translate(16 {_n(middle)}) rotate(-90)">prompt tokens</text>',
            f'<text class="title" transform="translate({_n(width - 12)} {_n(middle)}) rotate(90)">cumulative cost '
            "(USD)</text>",
            f'<text class="title" x="{LEFT}" y="{HEIGHT - 12}" text-anchor="start">request (turn.step#attempt, '
            "log order)</text>"]


def _lane(header_marks: list[tuple[float, str]], compactions: list[tuple[float, str]], x_of: Scale, top: float,
          bottom: float) -> list[str]:
    """Header changes (▼) and compactions (◆) in the lane above the bars, each with a guide line down through
    them; the hover text rides on the mark (`data-tip`)."""
    parts = [f'<text class="lane" x="{LEFT - 6}" y="{TOP + 13}">header</text>',
             f'<text class="lane" x="{LEFT - 6}" y="{TOP + 31}">compaction</text>']
    guides = [(x, HEADER_COLOUR, "2 3") for x, _ in header_marks] + [(x, COMPACTION_COLOUR, "6 4")
                                                                      for x, _ in compactions]
    parts.append('<g class="guides" stroke-width="1" opacity="0.6">' + "".join(
        f'<line x1="{_n(x_of(x))}" x2="{_n(x_of(x))}" y1="{top}" y2="{bottom}" stroke="{shade}" '
        f'stroke-dasharray="{dash}"/>' for x, shade, dash in guides[:LINES_DRAWN]) + "</g>")
    triangles = "".join(f'<path d="M{_n(x_of(x) - 5)} {TOP + 5}h10l-5 9z" data-tip="{attr(tip_text(text))}"/>'
                        for x, text in header_marks)
    diamonds = "".join(f'<path d="M{_n(x_of(x))} {TOP + 21}l5 5-5 5-5-5z" data-tip="{attr(tip_text(text))}"/>'
                       for x, text in compactions)
    if triangles:
        parts.append(f'<g data-role="header" fill="{HEADER_COLOUR}">{triangles}</g>')
    if diamonds:
        parts.append(f'<g data-role="compaction" fill="{COMPACTION_COLOUR}">{diamonds}</g>')
    return parts
