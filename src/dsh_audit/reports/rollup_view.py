"""The terminal view of `cache-report --by`: a heading saying what was counted, a row per group
(reports.rollup), and the totals they add up to."""

from __future__ import annotations

from typing import Any

import polars as pl

from .views import Column, Terminal, cost, count, percent, table, usd, wrap

# What a group without a value holds: calls logged without a time, a log without a cwd, a call without a model.
_NONE = {"day": "(no time)", "week": "(no time)", "month": "(no time)", "model": "(no model)",
         "project": "(no cwd)"}
_TITLES = {"day": "day", "week": "week of", "month": "month", "model": "model", "project": "project"}


def _columns(by: str) -> tuple[Column, ...]:
    return (
        Column(_TITLES[by], lambda r: r["group"] or _NONE[by], squeeze=True, keep_end=by == "project", floor=24),
        Column("sessions", lambda r: str(r["sessions"]), rank=3, right=True),
        Column("requests", lambda r: str(r["requests"]), rank=2, right=True),
        Column("input", lambda r: count(r["inputTokens"] + r["cacheReadTokens"]), rank=4, right=True),
        Column("hit", lambda r: percent(r["hitRatio"]), rank=1, right=True),
        Column("cost", lambda r: cost(r["costUsd"]), right=True),
        Column("collapses", lambda r: str(r["collapses"]), rank=1, right=True),
        Column("lost", lambda r: usd(r["collapseCostUsd"]) if r["collapses"] else "", right=True),
    )


def render(groups: pl.DataFrame, by: str, zone: str, totals: dict[str, Any], term: Terminal, *,
           wide: bool = False) -> str:
    """`groups` (reports.rollup.rollup by `by`, days in `zone`) under a heading, then the line of `totals` (the
    report's totals row)."""
    period = f" ({zone})" if by in ("day", "week", "month") else ""
    lines = [term.style(line, bold=True) for line in wrap(
        f"{groups.height} {by}(s){period} of {totals['logs']} session(s), by {_order(by)}:", term.width, "")]
    rows = groups.to_dicts()
    lines += table(rows, _columns(by), width=term.width, wide=wide,
                   emphasis=lambda row, text: term.style(text, fg="red") if row["collapses"] else text)
    lines.append("")
    lines += wrap(f"total: {totals['requests']} request(s), hit {percent(totals['hitRatio'])}, cost "
                  f"{cost(totals['costUsd'])}; {totals['collapses']} collapse(s) lost "
                  f"{usd(totals['collapseCostUsd'])}", term.width, "")
    return "\n".join(lines) + "\n"


def _order(by: str) -> str:
    return "time" if by in ("day", "week", "month") else "what collapses lost, most first"
