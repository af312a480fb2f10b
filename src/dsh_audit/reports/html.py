"""`audit report`: the cache report, header changes, compactions and verify findings as one self-contained HTML
file that works from file:// with no network (docs/html-report.md).

Pure: DataFrames (and verify's findings) in, one HTML string out. The plots are drawn by plotly.js, inlined
once from the `plotly` package; everything a log says reaches the page escaped — as HTML text where it is
markup, as JSON with `<`, `>` and `&` escaped where it is data — and the page's Content-Security-Policy allows
no network request and no script but its own (by hash), so even a missed escape could neither load nor run
anything.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import polars as pl

from ..readers.discover import Unreadable
from ..text import clip, printable
from .cache_report import UNEXPLAINED, CacheReport
from .cache_view import call_name
from .render import rows_by, rows_frame
from .verdict import verdict
from .views import cost, count, located_error, percent, shown_path, side_calls, usd

if TYPE_CHECKING:
    from ..verify import LogReport

# A header snapshot is a change when one of its rows is neither of these (header-diff's `change` column):
# `unverifiable` is a scrubbed field, for which the fold saw no change either.
NO_HEADER_CHANGE = frozenset({"initial", "unchanged", "unverifiable"})
COMPACTION_REPLACE = "compaction-replace"
FINDINGS_SHOWN = 200       # per session; the rest are counted
COLLAPSES_LISTED = 100     # rows of a session's collapse table; every collapse is still plotted
LINES_DRAWN = 600          # vertical guide lines per plot (header changes, compactions); markers are all drawn
TEXT_LIMIT = 300           # characters of one log-derived text in a hover label
# Over many logs the page draws the worst sessions only (one plot each costs the browser about 50 ms, and the
# report memory per drawn request); the rest are rows of the sessions table, and past its cap a count.
DETAILED_SESSIONS = 25
SESSIONS_LISTED = 2000
# Worst first: the columns of the sessions table that rank a session, each largest first.
RANKED_BY = ("unexplained", "verifyErrors", "collapseCostUsd", "collapses", "costUsd")

CAUSE_COLOURS = {"unexplained": "#d62728", "header-change": "#ff7f0e", "compaction-replace": "#9467bd",
                 "model-change": "#8c564b", "system-prompt-change": "#e377c2", "resume": "#17becf",
                 "resume-or-fork": "#17becf", "first-request": "#7f7f7f"}
OTHER_COLOURS = ("#bcbd22", "#1f77b4", "#2ca02c", "#7f7f7f", "#393b79", "#637939")
READ_COLOUR, MISS_COLOUR, COST_COLOUR = "#2ca02c", "#aec7e8", "#1f1f1f"
HEADER_COLOUR, COMPACTION_COLOUR = "#ff7f0e", "#9467bd"

FINDING_COLUMNS: dict[str, Any] = {"log": pl.String, "generation": pl.Int64, "severity": pl.String,
                                   "code": pl.String, "seq": pl.Int64, "line": pl.Int64, "text": pl.String}
TALLY_COLUMNS: dict[str, Any] = {"log": pl.String, "generation": pl.Int64, "severity": pl.String, "code": pl.String,
                                 "count": pl.Int64}
UNLISTED = "unlisted"   # the tally's code for findings verify counted past its cap, without keeping them


# -- escaping ----------------------------------------------------------------------------------------------
def esc(value: Any) -> str:
    """Log-derived text as HTML text or attribute value."""
    return html.escape(printable(str(value)), quote=True)


def label_text(value: Any, limit: int = TEXT_LIMIT) -> str:
    """Log-derived text for a plotly label: plotly reads a few HTML tags and entities in labels, so the text is
    entity-escaped (plotly decodes &amp; &lt; &gt; back for display), and cut to `limit` characters."""
    return html.escape(clip(printable(str(value)), limit), quote=False)


def script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element: ASCII only (U+2028/9 and lone surrogates escaped), and no
    `<`, `>` or `&`, so neither `</script>` nor `<!--` can occur in it."""
    text = json.dumps(_finite(value), ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _script_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii") + "'"


# -- findings ----------------------------------------------------------------------------------------------
@dataclass(slots=True)
class VerifyFindings:
    """verify's reports as the page uses them, a fixed amount kept per log however many findings it has:
    `shown`, the first FINDINGS_SHOWN findings of each log as rows (an `unreadable` row for a log verify could
    not read); `tally`, every finding counted by log, severity and code (those past verify's own cap, which it
    counts by severity only, under the code `unlisted`); `skipped`, (older generation, the newer one read
    instead) for each log verify skipped in a session directory."""

    shown: pl.DataFrame
    tally: pl.DataFrame
    skipped: list[tuple[str, str]] = field(default_factory=list)


def verify_findings(reports: Iterable[LogReport], *, shown: int = FINDINGS_SHOWN) -> VerifyFindings:
    """VerifyFindings from verify_paths' reports, taken one at a time: each is dropped once counted."""
    rows: list[dict[str, Any]] = []
    tally: list[dict[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    for report in reports:
        if report.superseded_by is not None:
            skipped.append((report.label, report.superseded_by))
            continue
        of_log = {"log": report.label, "generation": report.generation}
        found: list[dict[str, Any]] = []
        counted: dict[tuple[str, str], int] = {}
        if report.read_error is not None:
            found.append({**of_log, "severity": "error", "code": "unreadable", "seq": None, "line": None,
                          "text": report.read_error})
            counted["error", "unreadable"] = 1
        for finding in report.findings:
            counted[finding.severity, finding.code] = counted.get((finding.severity, finding.code), 0) + 1
            if len(found) < shown:
                found.append({**of_log, "severity": finding.severity, "code": finding.code, "seq": finding.seq,
                              "line": finding.line, "text": finding.render()})
        for severity, past_cap in report.unlisted.items():
            counted[severity, UNLISTED] = past_cap
        rows += found[:shown]
        tally += ({**of_log, "severity": severity, "code": code, "count": n} for (severity, code), n in counted.items())
    return VerifyFindings(rows_frame(rows, FINDING_COLUMNS) if rows else pl.DataFrame(schema=FINDING_COLUMNS),
                          rows_frame(tally, TALLY_COLUMNS) if tally else pl.DataFrame(schema=TALLY_COLUMNS),
                          skipped)


# -- one session's plot ------------------------------------------------------------------------------------
@dataclass(slots=True)
class SessionPlot:
    """The plotly figure of one log and what it shows, counted (the page states the counts; tests read them)."""

    figure: dict[str, Any]
    requests: int = 0
    collapses: int = 0
    header_changes: int = 0
    compactions: int = 0
    collapse_rows: list[dict[str, Any]] = field(default_factory=list)


def _header_changes(headers: pl.DataFrame) -> list[tuple[int, str]]:
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


def session_plot(calls: pl.DataFrame, headers: pl.DataFrame) -> SessionPlot:
    """The plot of one log's model calls (`calls`: its rows of CacheReport.requests, in log order) and header
    snapshots (`headers`: its rows of build_header_diff). x is the request's number in the log: one stacked bar
    per request (cache read below, miss above), a marker per collapse coloured by cause at the top of its bar,
    header changes and compactions in a lane above (at the gap between the requests they come between, with a
    guide line through the plot), and the cumulative cost of the log's own calls on a second y axis."""
    rows = calls.to_dicts()
    request_x: list[int] = []
    reads: list[int | None] = []
    misses: list[int | None] = []
    hover: list[str] = []
    request_seqs: list[int] = []
    cost_x: list[float] = []
    cost_y: list[float] = []
    collapse_rows: list[dict[str, Any]] = []
    compactions: list[tuple[float, str]] = []
    spent = 0.0
    position = 0
    summary_since_request = False
    for row in rows:
        if not row["inherited"]:
            spent += row["costUsd"] or 0.0
        if row["kind"] != "request":
            if row["kind"] == "compaction":
                compactions.append((position + 0.5, f"compaction summary call, seq {row['seq']}: "
                                                    f"{count(row['inputTokens'])} in, {count(row['outputTokens'])} "
                                                    f"out, {usd(row['costUsd'])}"))
                summary_since_request = True
            cost_x.append(position + 0.5)
            cost_y.append(spent)
            continue
        position += 1
        request_x.append(position)
        request_seqs.append(row["seq"])
        reads.append(row["cacheReadTokens"])
        misses.append(row["inputTokens"])
        hover.append(f"{call_name(row)} · seq {row['seq']} · hit {percent(row['hitRatio'])}"
                     + (" · inherited" if row["inherited"] else "")
                     + ("" if row["inputTokens"] is not None else " · no usage logged"))
        cost_x.append(position)
        cost_y.append(spent)
        cause = row["cause"] or ""
        if COMPACTION_REPLACE in cause.split("+") and not summary_since_request:
            compactions.append((position - 0.5, f"compaction replace before {call_name(row)}: "
                                                f"{row['causeDetail'] or ''}"))
        summary_since_request = False
        if row["collapse"]:
            collapse_rows.append({**row, "x": position})
    header_marks = [(bisect_left(request_seqs, seq) + 0.5, text) for seq, text in _header_changes(headers)]

    data: list[dict[str, Any]] = [
        {"type": "bar", "meta": "read", "name": "cache read", "x": request_x, "y": reads,
         "marker": {"color": READ_COLOUR}, "customdata": hover,
         "hovertemplate": "%{customdata}<br>cache read %{y:,}<extra></extra>"},
        {"type": "bar", "meta": "miss", "name": "cache miss", "x": request_x, "y": misses,
         "marker": {"color": MISS_COLOUR}, "hovertemplate": "cache miss %{y:,}<extra></extra>"},
    ]
    unlogged = [x for x, fresh, read in zip(request_x, misses, reads, strict=True) if fresh is None and read is None]
    if unlogged:
        data.append({"type": "scatter", "mode": "markers", "meta": "no-usage", "name": "no usage logged",
                     "x": unlogged, "y": [0] * len(unlogged), "marker": {"color": "#9e9e9e", "size": 6},
                     "hovertemplate": "request %{x}: no usage logged<extra></extra>"})
    for cause, members in _by_cause(collapse_rows).items():
        data.append({
            "type": "scatter", "mode": "markers", "meta": "collapse", "name": f"collapse: {label_text(cause, 60)}",
            "x": [r["x"] for r in members],
            "y": [(r["cacheReadTokens"] or 0) + (r["inputTokens"] or 0) for r in members],
            "marker": {"color": _colour(cause), "size": 10, "symbol": "x", "line": {"width": 1}},
            "text": [_collapse_label(r) for r in members], "hoverinfo": "text"})
    for role, name, marks, colour, symbol, band in (
            ("header", "header change", header_marks, HEADER_COLOUR, "triangle-down", "header"),
            ("compaction", "compaction", compactions, COMPACTION_COLOUR, "diamond", "compaction")):
        if marks:
            data.append({"type": "scatter", "mode": "markers", "meta": role, "name": name, "yaxis": "y3",
                         "x": [x for x, _ in marks], "y": [band] * len(marks),
                         "marker": {"color": colour, "size": 9, "symbol": symbol},
                         "text": [label_text(text) for _, text in marks], "hoverinfo": "text"})
    data.append({"type": "scatter", "mode": "lines", "meta": "cost", "name": "cumulative cost", "yaxis": "y2",
                 "x": cost_x, "y": cost_y, "line": {"color": COST_COLOUR, "width": 1.5},
                 "hovertemplate": "cumulative %{y:$,.4f}<extra></extra>"})

    has_lane = bool(header_marks or compactions)
    main_top = 0.84 if has_lane else 1.0
    guides = [_guide(x, HEADER_COLOUR, "dot", main_top) for x, _ in header_marks]
    guides += [_guide(x, COMPACTION_COLOUR, "dash", main_top) for x, _ in compactions]
    layout = {
        "barmode": "stack", "bargap": 0 if len(request_x) > 200 else 0.15,
        "height": 460, "margin": {"l": 84, "r": 96, "t": 28, "b": 40},
        "hovermode": "closest", "showlegend": True,
        "legend": {"orientation": "h", "x": 0, "y": -0.17, "yanchor": "top"},
        "xaxis": {"title": {"text": "request (log order)"}, "zeroline": False, "tickformat": ",d",
                  **({"dtick": 1} if len(request_x) <= 20 else {})},
        "yaxis": {"title": {"text": "prompt tokens"}, "domain": [0, main_top], "rangemode": "tozero"},
        "yaxis2": {"title": {"text": "cumulative cost (USD)", "standoff": 8}, "overlaying": "y", "side": "right",
                   "rangemode": "tozero", "showgrid": False, "tickformat": _money_format(spent)},
        "shapes": guides[:LINES_DRAWN],
        "plot_bgcolor": "#ffffff", "paper_bgcolor": "#ffffff",
    }
    if has_lane:
        layout["yaxis3"] = {"domain": [0.88, 1], "type": "category", "categoryorder": "array",
                            "categoryarray": ["compaction", "header"], "range": [-0.6, 1.6], "fixedrange": True,
                            "automargin": True}
    figure = {"data": data, "layout": layout, "config": {"displaylogo": False, "responsive": True}}
    return SessionPlot(figure, requests=len(request_x), collapses=len(collapse_rows),
                       header_changes=len(header_marks), compactions=len(compactions), collapse_rows=collapse_rows)


def _by_cause(collapses: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in collapses:
        grouped.setdefault(row["cause"] or UNEXPLAINED, []).append(row)
    return grouped


def _colour(cause: str) -> str:
    if cause in CAUSE_COLOURS:
        return CAUSE_COLOURS[cause]
    first = cause.split("+")[0]
    if first in CAUSE_COLOURS and first != "first-request":
        return CAUSE_COLOURS[first]
    return OTHER_COLOURS[sum(cause.encode("utf-8", "replace")) % len(OTHER_COLOURS)]


def _collapse_label(row: dict[str, Any]) -> str:
    lines = [f"collapse at {call_name(row)} · seq {row['seq']}",
             f"cause: {label_text(row['cause'] or UNEXPLAINED, 80)}",
             label_text(verdict(row).text, 200),
             f"cost lost: {usd(row['collapseCostUsd'])}"]
    if row["causeDetail"]:
        lines.insert(2, label_text(row["causeDetail"]))
    return "<br>".join(lines)


def _money_format(most: float) -> str:
    """Dollar ticks with the digits the largest amount needs: $12.50, $0.018, $0.00012."""
    digits = 2
    while most and most < 10 ** -digits * 5 and digits < 8:
        digits += 1
    return f"$,.{digits}f"


def _guide(x: float, colour: str, dash: str, top: float) -> dict[str, Any]:
    return {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": top,
            "line": {"color": colour, "width": 1, "dash": dash}, "layer": "below", "opacity": 0.6}


# -- the page ----------------------------------------------------------------------------------------------
STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1280px;
       padding: 0 20px 40px; color: #1a1a1a; background: #fafafa; }
h1 { font-size: 22px; margin: 20px 0 4px; } h2 { font-size: 16px; margin: 0 0 4px; word-break: break-all; }
h3 { font-size: 14px; margin: 14px 0 4px; }
.meta, .note { color: #555; } .note { font-size: 12px; }
section.session { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 14px 16px; margin: 18px 0; }
table { border-collapse: collapse; font-size: 13px; width: 100%; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eee; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th button { font: inherit; font-weight: 600; border: 0; background: none; padding: 0; cursor: pointer; }
th[aria-sort="ascending"] button::after { content: " ▲"; } th[aria-sort="descending"] button::after { content: " ▼"; }
td.log { word-break: break-all; }
.sev-error { color: #b00020; font-weight: 600; } .sev-warning { color: #a05a00; } .sev-info { color: #555; }
.bad { color: #b00020; font-weight: 600; }
.plot { width: 100%; min-height: 460px; }
.rows { max-height: 70vh; overflow-y: auto; border: 1px solid #eee; }
.rows thead th { position: sticky; top: 0; background: #fafafa; }
code { font-size: 12px; }
"""

RENDER_SCRIPT = """
(function () {
  "use strict";
  var holders = document.querySelectorAll('script[type="application/json"][data-plot]');
  var drawn = [];
  for (var i = 0; i < holders.length; i++) {
    var figure = JSON.parse(holders[i].textContent);
    var target = document.getElementById(holders[i].getAttribute("data-plot"));
    drawn.push(Plotly.newPlot(target, figure.data, figure.layout, figure.config).then(function (gd) {
      gd.setAttribute("data-rendered", "true");
    }));
  }
  window.dshReportReady = Promise.all(drawn).then(function () {
    document.body.setAttribute("data-ready", "true");
  });
  var tables = document.querySelectorAll("table.sortable");
  for (var t = 0; t < tables.length; t++) { sortable(tables[t]); }
  function sortable(table) {
    var heads = table.tHead.rows[0].cells;
    for (var c = 0; c < heads.length; c++) { listen(table, heads, c); }
  }
  function listen(table, heads, column) {
    var head = heads[column];
    head.querySelector("button").addEventListener("click", function () {
      var numeric = head.classList.contains("n");
      var ascending = head.getAttribute("aria-sort") === "descending" ||
                      (!head.hasAttribute("aria-sort") && !numeric);
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a.cells[column], numeric), y = key(b.cells[column], numeric);
        var order = x < y ? -1 : x > y ? 1 : 0;
        return ascending ? order : -order;
      });
      for (var r = 0; r < rows.length; r++) { body.appendChild(rows[r]); }
      for (var h = 0; h < heads.length; h++) { heads[h].removeAttribute("aria-sort"); }
      head.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    });
  }
  function key(cell, numeric) {
    var raw = cell.getAttribute("data-sort");
    if (!numeric) { return (raw === null ? cell.textContent : raw).toLowerCase(); }
    var value = raw === null || raw === "" ? NaN : Number(raw);
    return isNaN(value) ? -Infinity : value;
  }
})();
"""


def _num(value: Any, shown: str) -> str:
    sort = "" if value is None else repr(float(value)) if isinstance(value, float) else str(value)
    return f'<td class="n" data-sort="{esc(sort)}">{esc(shown)}</td>'


def display_names(labels: Sequence[str]) -> list[str]:
    """Each log's label as a person wants it: relative to the working directory, and with several logs, without
    the folder they all share (`cordis-tool-round/session.jsonl`, not the whole path each time)."""
    shown = [shown_path(label) for label in labels]
    if len(shown) < 2:
        return shown
    folders = [PurePosixPath(name.partition("#")[0]).parent.parts for name in shown]
    shared = 0
    while all(len(parts) > shared for parts in folders) and len({parts[shared] for parts in folders}) == 1:
        shared += 1
    if shared == 0:
        return shown
    return [str(PurePosixPath(*PurePosixPath(name.partition("#")[0]).parts[shared:]))
            + name.partition("#")[1] + name.partition("#")[2] for name in shown]


def _anchor(index: int) -> str:
    return f"session-{index}"


def _overview(logs: list[dict[str, Any]], names: list[str], drawn: int, more: int) -> str:
    """The sessions table: every listed session a row, linked to its section when it is drawn; when not all are
    drawn, or not all listed, a line says which are and where the rest are."""
    titles = [("session / log", False), ("gen", True), ("model", False), ("requests", True), ("hit ratio", True),
              ("cost", True), ("collapses", True), ("unexplained", True), ("cost lost", True),
              ("verify errors", True)]
    head = "".join(f'<th scope="col"{" class=n" if numeric else ""}><button type="button">{esc(title)}</button></th>'
                   for title, numeric in titles)
    body = []
    for index, (log, name) in enumerate(zip(logs, names, strict=True)):
        shown = (f'<a href="#{_anchor(index)}" title="{esc(log["log"])}">{esc(name)}</a>' if index < drawn
                 else f'<span title="{esc(log["log"])}">{esc(name)}</span>')
        body.append(
            f'<tr><td class="log" data-sort="{esc(name)}">{shown}</td>'
            + _num(log["generation"], f"v{log['generation']}") + f"<td>{esc(log['model'] or '–')}</td>"
            + _num(log["requests"], str(log["requests"])) + _num(log["hitRatio"], percent(log["hitRatio"]))
            + _num(log["costUsd"], cost(log["costUsd"])) + _num(log["collapses"], str(log["collapses"]))
            + _num(log["unexplained"], str(log["unexplained"])) + _num(log["collapseCostUsd"],
                                                                       usd(log["collapseCostUsd"]))
            + _num(log["verifyErrors"], str(log["verifyErrors"])) + "</tr>")
    notes = ['<p class="note">Click a column title to sort.</p>']
    if drawn < len(logs) + more:
        notes.append(f'<p class="note" id="drawn-note">Sessions are ranked worst first: most unexplained collapses, '
                     f"then verify errors, cost lost to collapses, collapses, cost. The {drawn} worst are drawn "
                     f"below; the other {len(logs) - drawn} are rows of this table only: "
                     "<code>audit report LOG -o FILE</code> draws any one of them.</p>")
    tail = (f'<p class="note" id="more-sessions">{more} more session(s), the lowest ranked, are not listed: see '
            "<code>audit cache-report --rows logs</code> over the same logs.</p>") if more else ""
    return (f'<section id="overview"><h2>Sessions</h2>{"".join(notes)}'
            f'<div class="rows"><table class="sortable" id="sessions"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>{tail}</section>')


def ranked_logs(logs: pl.DataFrame, tally: pl.DataFrame, *, rank: bool) -> pl.DataFrame:
    """The per-log rows of the report with their verify error count (`verifyErrors`, from VerifyFindings.tally);
    worst first (RANKED_BY) when `rank`, else in the report's order."""
    errors = (tally.filter(pl.col("severity") == "error").group_by("log", "generation")
              .agg(verifyErrors=pl.col("count").sum().cast(pl.Int64)))
    joined = (logs.with_row_index("_order").join(errors, on=["log", "generation"], how="left")
              .with_columns(pl.col("verifyErrors").fill_null(0)))
    order = [*RANKED_BY, "_order"] if rank else ["_order"]
    return joined.sort(order, descending=[*(True for _ in order[:-1]), False], nulls_last=True).drop("_order")


def _collapse_table(plot: SessionPlot) -> str:
    if not plot.collapse_rows:
        return ""
    rows = []
    for row in plot.collapse_rows[:COLLAPSES_LISTED]:
        cause = row["cause"] or UNEXPLAINED
        rows.append(f'<tr><td>{esc(call_name(row))}</td><td class="n">{esc(row["seq"])}</td>'
                    f'<td class="{"bad" if cause == UNEXPLAINED else ""}">{esc(cause)}</td>'
                    f'<td>{esc(row["causeDetail"] or "")}</td><td class="n">{esc(count(row["cacheReadTokens"]))}</td>'
                    f'<td class="n">{esc(count(row["previousCacheReadTokens"]))}</td>'
                    f'<td class="n">{esc(count(row["expectedCacheReadTokens"]))}</td>'
                    f'<td class="n">{esc(usd(row["collapseCostUsd"]))}</td></tr>')
    more = len(plot.collapse_rows) - COLLAPSES_LISTED
    tail = f'<p class="note">and {more} more (all are plotted)</p>' if more > 0 else ""
    return (f'<details><summary>{plot.collapses} collapse(s)</summary><table><thead><tr><th>call</th>'
            '<th class="n">seq</th><th>cause</th><th>detail</th><th class="n">read</th><th class="n">was</th>'
            '<th class="n">expected</th>'
            f'<th class="n">cost lost</th></tr></thead><tbody>{"".join(rows)}</tbody></table>{tail}</details>')


def _findings_block(shown: pl.DataFrame, tally: pl.DataFrame) -> str:
    """One log's findings: counted by severity and code, then the first FINDINGS_SHOWN as verify prints them."""
    if tally.height == 0:
        return '<h3>verify</h3><p class="meta">no findings: every request rebuilt, every invariant holds.</p>'
    counted = ", ".join(f"{row['count']} {row['severity']} [{row['code']}]" if row["code"] != UNLISTED else
                        f"{row['count']} more {row['severity']}(s), counted by verify past the findings it keeps"
                        for row in tally.sort("severity", "code").iter_rows(named=True))
    rows = "".join(f'<tr><td class="sev-{esc(row["severity"])}">{esc(row["severity"])}</td><td>{esc(row["code"])}</td>'
                   f'<td class="n">{esc("" if row["seq"] is None else row["seq"])}</td>'
                   f'<td><code>{esc(row["text"])}</code></td></tr>'
                   for row in shown.iter_rows(named=True))
    more = int(tally["count"].sum()) - shown.height
    tail = f'<p class="note">and {more} more (audit verify lists them all)</p>' if more > 0 else ""
    return (f'<h3>verify</h3><p class="meta">{esc(counted)}</p><table class="findings"><thead><tr><th>severity</th>'
            f'<th>code</th><th class="n">seq</th><th>finding</th></tr></thead><tbody>{rows}</tbody></table>{tail}')


def _session(index: int, log: dict[str, Any], name: str, plot: SessionPlot, findings: pl.DataFrame,
             tally: pl.DataFrame) -> str:
    anchor = _anchor(index)
    facts = [f"v{log['generation']}", f"model {log['model'] or '–'}", f"session {log['sessionId']}",
             f"{log['requests']} request(s)", f"{log['compactionCalls']} compaction call(s)",
             *([side_calls(log["sideCalls"], log["sideCallTokens"])] if log["sideCalls"] else []),
             f"hit {percent(log['hitRatio'])}", f"cost {cost(log['costUsd'])}",
             f"{log['collapses']} collapse(s), {log['unexplained']} unexplained, lost {usd(log['collapseCostUsd'])}",
             f"{plot.header_changes} header change(s)", f"{plot.compactions} compaction(s)"]
    notes = f'<p class="note">{esc(log["notes"])}</p>' if log["notes"] else ""
    if plot.requests or plot.figure["data"][-1]["x"]:
        drawing = (f'<div class="plot" id="{anchor}-plot" data-requests="{plot.requests}" '
                   f'data-collapses="{plot.collapses}" data-header-changes="{plot.header_changes}" '
                   f'data-compactions="{plot.compactions}"></div>'
                   f'<script type="application/json" data-plot="{anchor}-plot">{script_json(plot.figure)}</script>')
    else:
        drawing = '<p class="meta">no model calls logged</p>'
    return (f'<section class="session" id="{anchor}" data-log="{esc(log["log"])}"><h2 title="{esc(log["log"])}">'
            f'{esc(name)}</h2><p class="meta">{esc(" · ".join(facts))}</p>{notes}{drawing}{_collapse_table(plot)}'
            f"{_findings_block(findings, tally)}</section>")


def plotly_bundle() -> tuple[str, str]:
    """plotly.js as the `plotly` package ships it (minified), and its version."""
    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    return str(get_plotlyjs()), str(get_plotlyjs_version())


def render_report(report: CacheReport, headers: pl.DataFrame, findings: VerifyFindings, *,
                  inputs: Sequence[str] = (), unreadable: Sequence[Unreadable] = (), overview: bool | None = None,
                  generator: str = "dsh-audit", plotly_js: tuple[str, str] | None = None,
                  detailed: int = DETAILED_SESSIONS, listed: int = SESSIONS_LISTED) -> str:
    """The whole page. `report`: build_cache_report's; `headers`: build_header_diff's over the same logs;
    `findings`: verify_findings(verify_paths(...)). `overview` (default: more than one log) adds the sortable
    table of sessions. Over more than `detailed` logs only the worst `detailed` are drawn (RANKED_BY) and the
    table lists the worst `listed`, ranked; the page says so. `plotly_js`: (source, version), default the
    `plotly` package's bundle."""
    script, plotly_version = plotly_js if plotly_js is not None else plotly_bundle()
    script = script.replace("</script", "<\\/script")   # not in the shipped bundle; never let it close the element
    ranked = ranked_logs(report.logs, findings.tally, rank=report.logs.height > detailed)
    logs = ranked.head(listed).to_dicts()
    more = ranked.height - len(logs)
    names = display_names([log["log"] for log in logs])
    drawn = logs[:detailed]
    chosen = pl.col("log").is_in([log["log"] for log in drawn])   # only the drawn logs' rows are split out
    calls_of = rows_by(report.requests.filter(chosen), "log", "generation")
    headers_of = rows_by(headers.filter(chosen), "log", "generation")
    findings_of = rows_by(findings.shown.filter(chosen), "log", "generation")
    tally_of = rows_by(findings.tally.filter(chosen), "log", "generation")
    sections = []
    for index, (log, name) in enumerate(zip(drawn, names, strict=False)):
        key = (log["log"], log["generation"])
        plot = session_plot(calls_of(key), headers_of(key))
        sections.append(_session(index, log, name, plot, findings_of(key), tally_of(key)))
    totals = report.totals.to_dicts()[0] if report.totals.height else {}
    by_severity = dict(findings.tally.group_by("severity").agg(pl.col("count").sum()).iter_rows())
    errors, warnings = by_severity.get("error", 0), by_severity.get("warning", 0)
    summary = (f"{ranked.height} session log(s), {totals.get('requests', 0)} request(s), "
               f"{totals.get('compactionCalls', 0)} compaction call(s)"
               + (f", {side_calls(totals['sideCalls'], totals['sideCallTokens'])}" if totals.get("sideCalls") else "")
               + f"; hit {percent(totals.get('hitRatio'))}, "
               f"cost {cost(totals.get('costUsd'))}; {totals.get('collapses', 0)} collapse(s), "
               f"{totals.get('unexplained', 0)} unexplained, lost {usd(totals.get('collapseCostUsd'))}; "
               f"verify: {errors} error(s), {warnings} warning(s)")
    skipped_note = "".join(f'<li>{esc(shown_path(old))} — an older generation; read {esc(shown_path(new))}</li>'
                           for old, new in findings.skipped)
    skipped_block = (f'<details><summary>{len(findings.skipped)} older generation(s) skipped</summary>'
                     f"<ul>{skipped_note}</ul></details>") if findings.skipped else ""
    unreadable_note = "".join(f"<li>{esc(shown_path(log.label))} — {esc(located_error(log.label, log.reason))}</li>"
                              for log in unreadable)
    unreadable_block = (f'<details open id="unreadable"><summary>{len(unreadable)} log(s) could not be read and are '
                        f"not in this report</summary><ul>{unreadable_note}</ul></details>") if unreadable else ""
    show_overview = ranked.height > 1 if overview is None else overview
    policy = ("default-src 'none'; base-uri 'none'; form-action 'none'; img-src data: blob:; "
              "style-src 'unsafe-inline'; script-src " + _script_hash(script) + " " + _script_hash(RENDER_SCRIPT))
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(policy)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="generator" content="{esc(generator)}; plotly.js {esc(plotly_version)}">',
        "<title>dsh-audit report</title>", f"<style>{STYLE}</style></head><body>",
        "<header><h1>dsh-audit report</h1>",
        f'<p class="meta">{esc(", ".join(shown_path(p) for p in inputs))}</p>' if inputs else "",
        f'<p id="summary">{esc(summary)}</p>',
        '<p class="note">Per request: prompt tokens (input + cache read) split into cache read and miss; × a '
        "collapse, coloured by its logged cause; ▼ a header change and ◆ a compaction in the lane above, with a "
        "guide line; the line is the cumulative cost (right axis). Hover for detail; drag to zoom, double-click "
        "to reset.</p>",
        unreadable_block, skipped_block, "</header>",
        _overview(logs, names, len(drawn), more) if show_overview else "",
        *sections,
        f"<script>{script}</script><script>{RENDER_SCRIPT}</script></body></html>\n",
    ])
