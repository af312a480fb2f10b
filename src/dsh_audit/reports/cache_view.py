"""The terminal view of cache-report. Over more than one log (or with `--rows logs`) it opens with the
answer: the sessions ranked by what their collapses lost (reports.ranking), then the worst requests, each with
its cause and the `audit explain` command that shows why. Then (`--rows requests`) per log a heading, one
compact row per model call (a collapse with the read it collapsed from), its notes once, each collapse's
verdict (reports.verdict, as explain words it), a line that sums it up; then a closing summary naming the
collapses, the worst ones, the unexplained ones (with the `audit explain` command that shows why) and what
they cost."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from .cache_report import UNEXPLAINED, CacheReport
from .ranking import ORDER_WORDS, session_names
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
WORST_REQUESTS = 5   # requests listed under the ranked sessions, unless --top says how many


def call_name(row: dict[str, Any]) -> str:
    if row["kind"] != "request":
        return f"{row['kind']} @{row['seq']}"
    return f"{row['turn']}.{row['step']}#{row['attempt']}"


def explain_command(row: dict[str, Any], targets: Mapping[str, str] | None = None) -> str:
    """The command that explains the call of `row`: its log named as `targets` says (`--session PREFIX`, below
    a folder if need be), else by its path."""
    target = (targets or {}).get(row["log"]) or shlex.quote(shown_path(row["log"]))
    return f"audit explain {target} {call_name(row)}"


@dataclass(frozen=True, slots=True)
class Names:
    """How the view names each log (by label): its session (reports.ranking.session_names), and what `audit
    explain` is given to find it where not its path (`--session PREFIX`, checked by the command line)."""

    sessions: Mapping[str, str]
    targets: Mapping[str, str] = field(default_factory=dict)

    def session(self, row: dict[str, Any]) -> str:
        return self.sessions[row["log"]]

    def command(self, row: dict[str, Any]) -> str:
        return explain_command(row, self.targets)


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


def render(report: CacheReport, term: Terminal, *, wide: bool = False, rows: str = "requests",
           names: Names | None = None, worst: int = WORST_REQUESTS, order: str = "lost") -> str:
    """The view of `rows` (requests: every call; logs: the ranked sessions; totals: the summary alone); `names`
    the session of each log (reports.ranking.session_names of every log read, else of those in the report);
    `order` the key the sessions are in (reports.ranking.SORT_KEYS)."""
    names = names if names is not None else Names(session_names(report.logs))
    lines: list[str] = []
    if rows == "logs" or (rows == "requests" and report.logs.height > 1):
        lines += _ranked(report, names, term, wide, worst, order)
    if rows == "requests":
        lines += _details(report, names, term, wide)
    lines += unreadable_lines(report.unreadable, term)
    lines += skipped_lines(report.skipped, term)
    lines += _closing(report, names, term)
    return "\n".join(lines) + "\n"


def _details(report: CacheReport, names: Names, term: Terminal, wide: bool) -> list[str]:
    """Per log, its heading, a row per call, its notes and collapses' verdicts, and the line summing it up."""
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
                lines += wrap(f"{call_name(row)}: {verdict(row).text}; why: {names.command(row)}", term.width)
        lines += wrap(_log_line(log), term.width)
        lines.append("")
    return lines


def _session_columns(names: Names) -> tuple[Column, ...]:
    return (
        Column("session", names.session, squeeze=True, keep_end=True, floor=30),
        Column("model", lambda r: r["model"] or EMPTY, rank=4, squeeze=True),
        Column("requests", lambda r: str(r["requests"]), rank=3, right=True),
        Column("hit", lambda r: percent(r["hitRatio"]), rank=1, right=True),
        Column("cost", lambda r: cost(r["costUsd"]), rank=2, right=True),
        Column("collapses", lambda r: str(r["collapses"]), right=True),
        Column("unexplained", lambda r: str(r["unexplained"]) if r["collapses"] else "", rank=1, right=True),
        Column("lost", lambda r: usd(r["collapseCostUsd"]) if r["collapses"] else "", right=True),
    )


def _ranked(report: CacheReport, names: Names, term: Terminal, wide: bool, worst: int, order: str) -> list[str]:
    """The sessions in the report's order (ranked by what they lost unless --sort says otherwise), then the
    requests whose collapses cost most, each with the command that explains it."""
    sessions, read = report.logs.to_dicts(), report.totals["logs"][0]
    shown = f"{len(sessions)} of {read}" if len(sessions) < read else f"{read}"
    lines = [term.style(line, bold=True) for line in wrap(
        f"{shown} session(s) by {ORDER_WORDS[order]}:", term.width, "")]
    if sessions:
        lines += table(sessions, _session_columns(names), width=term.width, wide=wide,
                       emphasis=lambda row, text: _session_emphasis(row, text, term))
    collapsed = report.requests.filter(pl.col("collapse") & ~pl.col("inherited"))
    if collapsed.height:
        top = collapsed.sort("collapseCostUsd", descending=True, nulls_last=True, maintain_order=True).head(worst)
        lines.append("")
        lines += [term.style(line, bold=True) for line in wrap(
            f"{top.height} worst request(s) of {collapsed.height} collapse(s):", term.width, "")]
        for row in top.to_dicts():
            lines += [_emphasis(row, line, term) for line in wrap(
                f"{names.session(row)} {call_name(row)}: {row['cause']}, {usd(row['collapseCostUsd'])} lost",
                term.width)]
            lines += wrap(f"  why: {names.command(row)}", term.width)
    lines.append("")
    return lines


def _session_emphasis(row: dict[str, Any], text: str, term: Terminal) -> str:
    if not row["collapses"]:
        return text
    return term.style(text, fg="red", bold=row["unexplained"] > 0 or None)


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


def _closing(report: CacheReport, names: Names, term: Terminal) -> list[str]:
    """The totals of every log read; the worst and the unexplained collapses among the calls shown."""
    totals = report.totals.to_dicts()[0]
    collapsed = report.requests.filter(pl.col("collapse") & ~pl.col("inherited"))
    head = (f"{totals['logs']} log(s), {totals['requests']} request(s)"
            + (f" and {totals['compactionCalls']} compaction call(s)" if totals["compactionCalls"] else "")
            + (f" ({side_calls(totals['sideCalls'], totals['sideCallTokens'])})" if totals["sideCalls"] else "")
            + f": hit {percent(totals['hitRatio'])}, cost {cost(totals['costUsd'])}; ")
    if not totals["collapses"]:
        return [term.style(line, bold=True) for line in wrap(head + "no cache collapse", term.width, "")
                ] + _block_line(report, totals, term)
    head += (f"{totals['collapses']} collapse(s), {totals['unexplained']} unexplained, "
             f"{usd(totals['collapseCostUsd'])} lost")
    lines = [term.style(line, bold=True, fg="red" if totals["unexplained"] else None)
             for line in wrap(head, term.width, "")]
    worst = collapsed.sort("collapseCostUsd", descending=True, nulls_last=True).head(WORST).to_dicts()
    lines += [] if not worst else wrap("worst: " + ", ".join(f"{names.session(row)} {call_name(row)} ({row['cause']}, "
                                        f"{usd(row['collapseCostUsd'])})" for row in worst), term.width, "")
    for row in collapsed.filter(pl.col("cause") == UNEXPLAINED).to_dicts():
        lines += [term.style(line, fg="red") for line in wrap(
            f"unexplained: {names.session(row)} {call_name(row)} lost {usd(row['collapseCostUsd'])}; "
            f"see {names.command(row)}",
            term.width, "")]
    return lines + _block_line(report, totals, term)


def _block_line(report: CacheReport, totals: dict[str, Any], term: Terminal) -> list[str]:
    """How the expected reads were rounded, and how often they matched what the provider read."""
    agreement = (f"; {totals['predictionsWithinBlock']} of {totals['predictionsCompared']} expected reads within "
                 "one block of the logged read") if totals["predictionsCompared"] else ""
    return wrap(f"cache block {report.block} tokens ({report.block_basis}){agreement}", term.width, "")
