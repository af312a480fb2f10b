"""The terminal view of cache-report: per log a heading, one compact row per model call (a collapse with the
read it collapsed from), its notes once, each collapse's verdict (reports.verdict, as explain words it), a line
that sums it up; then a closing summary naming the collapses, the worst ones, the unexplained ones (with
the `audit explain` command that shows why) and what they cost."""

from __future__ import annotations

import shlex
from typing import Any

import polars as pl

from .cache_report import UNEXPLAINED, CacheReport
from .render import rows_by
from .verdict import verdict
from .views import (
    EMPTY,
    Column,
    Terminal,
    cost,
    count,
    percent,
    shown_path,
    side_calls,
    skipped_lines,
    table,
    unreadable_lines,
    usd,
    wrap,
)

WORST = 3   # collapses named in a summary


def call_name(row: dict[str, Any]) -> str:
    if row["kind"] != "request":
        return f"{row['kind']} @{row['seq']}"
    return f"{row['turn']}.{row['step']}#{row['attempt']}"


def explain_command(row: dict[str, Any]) -> str:
    return f"audit explain {shlex.quote(shown_path(row['log']))} {call_name(row)}"


COLUMNS = (
    Column("call", call_name),
    Column("seq", lambda r: str(r["seq"]), rank=5, right=True),
    Column("input", lambda r: count(r["inputTokens"]), rank=1, right=True),
    Column("cache read", lambda r: count(r["cacheReadTokens"]), right=True),
    # What a collapse collapsed from: its predecessor's read (a read above the expected one can still be one);
    # shown for a log with a collapse.
    Column("was", lambda r: count(r["previousCacheReadTokens"]) if r["collapse"] else "", rank=2, right=True),
    Column("hit", lambda r: percent(r["hitRatio"]), right=True),
    Column("expected", lambda r: count(r["expectedCacheReadTokens"]), rank=2, right=True),
    Column("output", lambda r: count(r["outputTokens"]), rank=4, right=True),
    Column("collapse", lambda r: (r["cause"] or "?") if r["collapse"] else "", squeeze=True),
    Column("lost", lambda r: usd(r["collapseCostUsd"]) if r["collapse"] else "", rank=3, right=True),
    Column("cost", lambda r: "unpriced" if r["kind"] == "side" else usd(r["costUsd"]), rank=1, right=True),
    Column("price", lambda r: f"{r['priceModel']}, {r['priceTier']}" if r["costUsd"] is not None else EMPTY,
           rank=6),
    Column("why", lambda r: r["causeDetail"] or (f"~{count(r['estimatedTokens'])} tokens of text"
                                                  if r["estimatedTokens"] is not None else ""), rank=7, squeeze=True),
)


def render(report: CacheReport, term: Terminal, *, wide: bool = False) -> str:
    lines: list[str] = []
    calls_of = rows_by(report.requests, "log")
    for log in report.logs.to_dicts():
        calls = calls_of((log["log"],)).to_dicts()
        lines += _heading(log, term)
        shown = COLUMNS if any(row["collapse"] for row in calls) else [c for c in COLUMNS if c.title != "was"]
        lines += table(calls, shown, width=term.width, wide=wide, emphasis=lambda row, text: _emphasis(
            row, text, term))
        for note in (log["notes"] or "").split("; "):
            if note:
                lines += wrap(f"note: {note}", term.width)
        for row in calls:
            if row["collapse"]:
                lines += wrap(f"{call_name(row)}: {verdict(row).text}; why: {explain_command(row)}", term.width)
        lines += wrap(_log_line(log), term.width)
        lines.append("")
    lines += unreadable_lines(report.unreadable, term)
    lines += skipped_lines(report.skipped, term)
    lines += _closing(report, term, wide)
    return "\n".join(lines) + "\n"


def _heading(log: dict[str, Any], term: Terminal) -> list[str]:
    parts = [shown_path(log["log"]), f"v{log['generation']}", log["model"] or "no model",
             f"{log['requests']} request(s)"]
    if log["compactionCalls"]:
        parts.append(f"{log['compactionCalls']} compaction call(s)")
    if log["sideCalls"]:
        parts.append(side_calls(log["sideCalls"], log["sideCallTokens"]))
    return [term.style(line, bold=True) for line in wrap("  ·  ".join(parts), term.width, indent="")]


def _emphasis(row: dict[str, Any], text: str, term: Terminal) -> str:
    if not row["collapse"]:
        return text
    return term.style(text, fg="red", bold=row["cause"] == UNEXPLAINED or None)


def _log_line(log: dict[str, Any]) -> str:
    collapses = log["collapses"]
    parts = [f"hit {percent(log['hitRatio'])}", f"cost {cost(log['costUsd'])}"]
    if collapses:
        parts.append(f"{collapses} collapse(s), {log['unexplained']} unexplained, "
                     f"{usd(log['collapseCostUsd'])} lost")
    else:
        parts.append("no collapse")
    return "; ".join(parts)


def _closing(report: CacheReport, term: Terminal, wide: bool) -> list[str]:
    totals = report.totals.to_dicts()[0]
    collapsed = report.requests.filter(pl.col("collapse") & ~pl.col("inherited"))
    head = (f"{totals['logs']} log(s), {totals['requests']} request(s)"
            + (f" and {totals['compactionCalls']} compaction call(s)" if totals["compactionCalls"] else "")
            + (f" ({side_calls(totals['sideCalls'], totals['sideCallTokens'])})" if totals["sideCalls"] else "")
            + f": hit {percent(totals['hitRatio'])}, cost {cost(totals['costUsd'])}; ")
    if not collapsed.height:
        return [term.style(line, bold=True) for line in wrap(head + "no cache collapse", term.width, "")
                ] + _block_line(report, totals, term)
    head += (f"{collapsed.height} collapse(s), {totals['unexplained']} unexplained, "
             f"{usd(totals['collapseCostUsd'])} lost")
    lines = [term.style(line, bold=True, fg="red" if totals["unexplained"] else None)
             for line in wrap(head, term.width, "")]
    worst = collapsed.sort("collapseCostUsd", descending=True, nulls_last=True).head(WORST).to_dicts()
    lines += wrap("worst: " + ", ".join(f"{shown_path(row['log'])} {call_name(row)} ({row['cause']}, "
                                        f"{usd(row['collapseCostUsd'])})" for row in worst), term.width, "")
    for row in collapsed.filter(pl.col("cause") == UNEXPLAINED).to_dicts():
        lines += [term.style(line, fg="red") for line in wrap(
            f"unexplained: {call_name(row)} lost {usd(row['collapseCostUsd'])}; see {explain_command(row)}",
            term.width, "")]
    return lines + _block_line(report, totals, term)


def _block_line(report: CacheReport, totals: dict[str, Any], term: Terminal) -> list[str]:
    """How the expected reads were rounded, and how often they matched what the provider read."""
    agreement = (f"; {totals['predictionsWithinBlock']} of {totals['predictionsCompared']} expected reads within "
                 "one block of the logged read") if totals["predictionsCompared"] else ""
    return wrap(f"cache block {report.block} tokens ({report.block_basis}){agreement}", term.width, "")
