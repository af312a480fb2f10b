"""`audit report`: the cache report, header changes, compactions and verify findings as one self-contained HTML
file that works from file:// with no network (docs/html-report.md).

Pure: DataFrames (and verify's findings) in, one HTML string out. The plots are inline SVG drawn here
(reports.html_plot), the page's only script a few lines for hover text and sortable tables; everything a log says
reaches the page escaped — as HTML text where it is markup, as JSON with `<`, `>` and `&` escaped where it is
data — and the page's Content-Security-Policy allows no network request and no script but its own (by hash), so
even a missed escape could neither load nor run anything.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import polars as pl

from ..readers.discover import Unreadable
from .cache_report import UNEXPLAINED, CacheReport
from .cache_view import call_name, explain_command
from .html_plot import SessionPlot, attr, session_plot
from .ranking import session_prefixes
from .render import rows_by, rows_frame
from .views import cost, count, located_error, percent, shown_path, side_calls, usd

if TYPE_CHECKING:
    from ..readers.home import SessionOrigin
    from ..verify import LogReport

FINDINGS_SHOWN = 200       # per session; the rest are counted
COLLAPSES_LISTED = 100     # rows of a session's ranked collapse table; every collapse is still plotted
WORST_LISTED = 10          # rows of the page's costliest collapses over several sessions
# Over many logs the page draws the worst sessions only (the report holds memory per drawn request, and the page
# grows with them); the rest are rows of the sessions table, and past its cap a count.
DETAILED_SESSIONS = 25
SESSIONS_LISTED = 2000
# Worst first: the columns of the sessions table that rank a session, each largest first.
RANKED_BY = ("collapseCostUsd", "unexplained", "verifyErrors", "collapses", "costUsd")

FINDING_COLUMNS: dict[str, Any] = {"log": pl.String, "generation": pl.Int64, "severity": pl.String,
                                   "code": pl.String, "seq": pl.Int64, "line": pl.Int64, "text": pl.String}
TALLY_COLUMNS: dict[str, Any] = {"log": pl.String, "generation": pl.Int64, "severity": pl.String, "code": pl.String,
                                 "count": pl.Int64}
UNLISTED = "unlisted"   # the tally's code for findings verify counted past its cap, without keeping them


# -- escaping ----------------------------------------------------------------------------------------------
esc = attr   # log-derived text as HTML text or attribute value


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


# -- the page ----------------------------------------------------------------------------------------------
STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1320px;
       padding: 0 20px 40px; color: #1a1a1a; background: #fafafa; }
h1 { font-size: 22px; margin: 20px 0 4px; } h2 { font-size: 16px; margin: 0 0 4px; word-break: break-all; }
h3 { font-size: 14px; margin: 14px 0 4px; }
.meta, .note, .path { color: #555; } .note, .path { font-size: 12px; }
section.session, section.board { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 14px 16px;
       margin: 18px 0; overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; width: 100%; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eee; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th button { font: inherit; font-weight: 600; border: 0; background: none; padding: 0; cursor: pointer; }
th[aria-sort="ascending"] button::after { content: " ▲"; } th[aria-sort="descending"] button::after { content: " ▼"; }
td.log { word-break: break-all; min-width: 12em; } td.when { white-space: nowrap; }
td.cmd { word-break: break-all; min-width: 16em; }
.sev-error { color: #b00020; font-weight: 600; } .sev-warning { color: #a05a00; } .sev-info { color: #555; }
.bad { color: #b00020; font-weight: 600; }
.plot { overflow-x: auto; margin: 8px 0 0; }
.plot svg { display: block; font: 11px system-ui, sans-serif; }
.plot svg text { fill: #444; stroke: none; } .plot svg .title { font-size: 12px; fill: #222; }
.plot svg .lane { text-anchor: end; }
.legend { list-style: none; padding: 0; margin: 4px 0 0; display: flex; flex-wrap: wrap; gap: 4px 16px;
          font-size: 12px; color: #333; }
.legend li::before { content: ""; display: inline-block; width: 10px; height: 10px; margin-right: 5px;
                     background: var(--swatch); vertical-align: -1px; }
.rows { max-height: 70vh; overflow-y: auto; border: 1px solid #eee; }
.rows thead th { position: sticky; top: 0; background: #fafafa; }
.ranked { max-height: 40vh; overflow-y: auto; }
#tip { position: fixed; z-index: 10; max-width: 460px; padding: 6px 8px; background: #222; color: #fff;
       font-size: 12px; white-space: pre-line; border-radius: 4px; pointer-events: none; }
code { font-size: 12px; }
"""

# Hover text for the plots (a request's from the JSON beside its plot, a lane mark's from its data-tip; set as
# text, never as markup) and sortable tables. `dshReportReady` resolves once every plot is wired.
RENDER_SCRIPT = """
(function () {
  "use strict";
  var tip = document.getElementById("tip");
  var plots = document.querySelectorAll(".plot[data-tips]");
  for (var i = 0; i < plots.length; i++) { wire(plots[i]); }
  function wire(plot) {
    var holder = document.getElementById(plot.getAttribute("data-tips"));
    var tips = JSON.parse(holder.textContent);
    var svg = plot.querySelector("svg");
    var left = Number(svg.getAttribute("data-left")), step = Number(svg.getAttribute("data-step"));
    svg.addEventListener("mousemove", function (event) {
      var mark = event.target.closest("[data-tip]");
      var index = Math.floor((event.clientX - svg.getBoundingClientRect().left - left) / step);
      var text = mark ? mark.getAttribute("data-tip") : index >= 0 && index < tips.length ? tips[index] : null;
      if (text === null) { tip.hidden = true; return; }
      tip.textContent = text;
      tip.hidden = false;
      var x = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
      tip.style.left = Math.max(x, 4) + "px";
      tip.style.top = Math.max(event.clientY - tip.offsetHeight - 12, 4) + "px";
    });
    svg.addEventListener("mouseleave", function () { tip.hidden = true; });
    plot.setAttribute("data-rendered", "true");
  }
  window.dshReportReady = Promise.resolve().then(function () {
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


def started(origin: SessionOrigin | None) -> str:
    """A session's start as the overview shows it: its header's createdAt, UTC, to the minute."""
    if origin is None or origin.created_ms is None:
        return "–"
    try:
        return datetime.fromtimestamp(origin.created_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):   # a createdAt no calendar holds
        return "–"


@dataclass(frozen=True, slots=True)
class PageNames:
    """How the page names each log (by label): `sessions`, its session's short id (reports.ranking, over the
    sessions of the page), else its path; `paths`, its path as display_names shows it; `targets`, what `audit
    explain` is given to find it where not its path (`--session PREFIX`, checked by the command line)."""

    sessions: Mapping[str, str]
    paths: Mapping[str, str]
    targets: Mapping[str, str] = field(default_factory=dict)

    def command(self, row: dict[str, Any]) -> str:
        return explain_command(row, self.targets)


def page_names(logs: pl.DataFrame, targets: Mapping[str, str] | None = None) -> PageNames:
    """Each log of `logs` (a report's per-log rows: every log read, so that a name a filter leaves alone still
    tells its session from those left out) named by its session's short id (reports.ranking), else by its path
    (display_names); `targets` as PageNames says."""
    labels = logs["log"].to_list()
    paths = dict(zip(labels, display_names(labels), strict=True))
    prefixes = session_prefixes(logs)
    return PageNames({label: prefixes.get(label) or paths[label] for label in labels}, paths, targets or {})


def _overview(logs: list[dict[str, Any]], names: PageNames, origins: Mapping[str, SessionOrigin], drawn: int,
              more: int) -> str:
    """The sessions table, ranked by the cost lost to collapses: every listed session a row, named by its short
    id (linked to its section when it is drawn) over its log's path; when not all are drawn, or not all
    listed, a line says which are and where the rest are."""
    titles = [("session", False), ("started (UTC)", False), ("project (cwd)", False), ("gen", True),
              ("model", False), ("requests", True), ("hit ratio", True), ("cost", True), ("collapses", True),
              ("unexplained", True), ("cost lost", True), ("verify errors", True)]
    head = "".join(f'<th scope="col"{" class=n" if numeric else ""}><button type="button">{esc(title)}</button></th>'
                   for title, numeric in titles)
    body = []
    for index, log in enumerate(logs):
        name, path = names.sessions[log["log"]], names.paths[log["log"]]
        shown = (f'<a href="#{_anchor(index)}" title="{esc(log["log"])}">{esc(name)}</a>' if index < drawn
                 else f'<span title="{esc(log["log"])}">{esc(name)}</span>')
        if name != path:   # named by its id: the path under it, to find the file
            shown += f'<br><span class="path">{esc(path)}</span>'
        origin = origins.get(log["log"])
        when = started(origin)
        body.append(
            f'<tr><td class="log" data-sort="{esc(name)}">{shown}</td>'
            f'<td class="when" data-sort="{esc(when)}">{esc(when)}</td>'
            f'<td class="log">{esc(origin.cwd if origin is not None and origin.cwd else "–")}</td>'
            + _num(log["generation"], f"v{log['generation']}") + f"<td>{esc(log['model'] or '–')}</td>"
            + _num(log["requests"], str(log["requests"])) + _num(log["hitRatio"], percent(log["hitRatio"]))
            + _num(log["costUsd"], cost(log["costUsd"])) + _num(log["collapses"], str(log["collapses"]))
            + _num(log["unexplained"], str(log["unexplained"])) + _num(log["collapseCostUsd"],
                                                                       usd(log["collapseCostUsd"]))
            + _num(log["verifyErrors"], str(log["verifyErrors"])) + "</tr>")
    notes = ['<p class="note">Ranked by the cost lost to collapses, then unexplained collapses, verify errors, '
             "collapses, cost. Click a column title to sort.</p>"]
    if drawn < len(logs) + more:
        notes.append(f'<p class="note" id="drawn-note">The {drawn} worst are drawn below; the other '
                     f"{len(logs) - drawn} are rows of this table only: <code>audit report LOG -o FILE</code> draws "
                     "any one of them.</p>")
    tail = (f'<p class="note" id="more-sessions">{more} more session(s), the lowest ranked, are not listed: see '
            "<code>audit cache-report --rows logs</code> over the same logs.</p>") if more else ""
    return (f'<section id="overview"><h2>Sessions, worst first</h2>{"".join(notes)}'
            f'<div class="rows"><table class="sortable" id="sessions"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>{tail}</section>')


def ranked_logs(logs: pl.DataFrame, tally: pl.DataFrame) -> pl.DataFrame:
    """The per-log rows of the report with their verify error count (`verifyErrors`, from VerifyFindings.tally),
    worst first (RANKED_BY; ties in the report's order)."""
    errors = (tally.filter(pl.col("severity") == "error").group_by("log", "generation")
              .agg(verifyErrors=pl.col("count").sum().cast(pl.Int64)))
    joined = (logs.with_row_index("_order").join(errors, on=["log", "generation"], how="left")
              .with_columns(pl.col("verifyErrors").fill_null(0)))
    order = [*RANKED_BY, "_order"]
    return joined.sort(order, descending=[*(True for _ in RANKED_BY), False], nulls_last=True).drop("_order")


def costliest(collapses: pl.DataFrame) -> pl.DataFrame:
    """Collapse rows, costliest first (an unpriced one last), ties in log order."""
    return collapses.sort("collapseCostUsd", descending=True, nulls_last=True, maintain_order=True)


def _collapse_cells(row: dict[str, Any], names: PageNames) -> str:
    cause = row["cause"] or UNEXPLAINED
    return (f'<td>{esc(call_name(row))}</td><td class="n">{esc(row["seq"])}</td>'
            f'<td class="{"bad" if cause == UNEXPLAINED else ""}">{esc(cause)}</td>'
            f'<td class="n">{esc(usd(row["collapseCostUsd"]))}</td>'
            f'<td class="cmd"><code>{esc(names.command(row))}</code></td>')


def _worst_collapses(requests: pl.DataFrame, names: PageNames, anchors: Mapping[str, str]) -> str:
    """Over several sessions: the costliest collapses of all, each with its session and `audit explain`."""
    collapses = requests.filter(pl.col("collapse"))
    if collapses.height == 0:
        return ""
    rows = []
    for row in costliest(collapses).head(WORST_LISTED).iter_rows(named=True):
        name = names.sessions.get(row["log"]) or shown_path(row["log"])
        where = (f'<a href="#{anchors[row["log"]]}" title="{esc(row["log"])}">{esc(name)}</a>'
                 if row["log"] in anchors else f'<span title="{esc(row["log"])}">{esc(name)}</span>')
        rows.append(f'<tr><td class="log">{where}</td>{_collapse_cells(row, names)}</tr>')
    return (f'<section class="board" id="worst"><h2>Costliest collapses</h2><p class="note">{len(rows)} of '
            f"{collapses.height}, costliest first; <code>audit explain</code> shows why each one happened.</p>"
            '<table id="worst-collapses"><thead><tr><th>session</th><th>call</th><th class="n">seq</th><th>cause</th>'
            f'<th class="n">cost lost</th><th>why</th></tr></thead><tbody>{"".join(rows)}</tbody></table></section>')


def _collapse_table(plot: SessionPlot, anchor: str, names: PageNames) -> str:
    """A session's collapses ranked costliest first, open above its plot."""
    if not plot.collapse_rows:
        return ""
    ranked = sorted(plot.collapse_rows, key=lambda row: (row["collapseCostUsd"] is None,
                                                         -(row["collapseCostUsd"] or 0.0)))[:COLLAPSES_LISTED]
    rows = [f'<tr><td class="n">{rank}</td>{_collapse_cells(row, names)}<td>{esc(row["causeDetail"] or "")}</td>'
            f'<td class="n">{esc(count(row["cacheReadTokens"]))}</td>'
            f'<td class="n">{esc(count(row["previousCacheReadTokens"]))}</td>'
            f'<td class="n">{esc(count(row["expectedCacheReadTokens"]))}</td></tr>'
            for rank, row in enumerate(ranked, start=1)]
    more = len(plot.collapse_rows) - COLLAPSES_LISTED
    tail = f'<p class="note">and {more} more, cheaper (all are plotted)</p>' if more > 0 else ""
    return (f'<h3>{plot.collapses} collapse(s), costliest first</h3><div class="ranked"><table class="collapses" '
            f'id="{anchor}-collapses"><thead><tr><th class="n">#</th><th>call</th><th class="n">seq</th>'
            '<th>cause</th><th class="n">cost lost</th><th>why</th><th>detail</th><th class="n">read</th>'
            f'<th class="n">was</th><th class="n">expected</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
            f"</div>{tail}")


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


def _drawing(anchor: str, plot: SessionPlot) -> str:
    if not plot.requests and not plot.cost_points:
        return '<p class="meta">no model calls logged</p>'
    legend = "".join(f'<li data-role="{role}" style="--swatch: {shade}">{esc(label)}</li>'
                     for role, label, shade in plot.legend)
    return (f'<div class="plot" id="{anchor}-plot" data-tips="{anchor}-tips" data-requests="{plot.requests}" '
            f'data-collapses="{plot.collapses}" data-header-changes="{plot.header_changes}" '
            f'data-compactions="{plot.compactions}" data-cost-points="{plot.cost_points}">{plot.svg}</div>'
            f'<ul class="legend">{legend}</ul>'
            f'<script type="application/json" id="{anchor}-tips">{script_json(plot.tips)}</script>')


def _session(index: int, log: dict[str, Any], names: PageNames, origin: SessionOrigin | None, plot: SessionPlot,
             findings: pl.DataFrame, tally: pl.DataFrame) -> str:
    anchor = _anchor(index)
    name, path = names.sessions[log["log"]], names.paths[log["log"]]
    facts = [*([f"log {path}"] if name != path else []), f"v{log['generation']}", f"model {log['model'] or '–'}",
             f"session {log['sessionId']}",
             *([f"started {started(origin)} UTC"] if origin is not None and origin.created_ms is not None else []),
             *([f"cwd {origin.cwd}"] if origin is not None and origin.cwd else []),
             f"{log['requests']} request(s)", f"{log['compactionCalls']} compaction call(s)",
             *([side_calls(log["sideCalls"], log["sideCallTokens"])] if log["sideCalls"] else []),
             f"hit {percent(log['hitRatio'])}", f"cost {cost(log['costUsd'])}",
             f"{log['collapses']} collapse(s), {log['unexplained']} unexplained, lost {usd(log['collapseCostUsd'])}",
             f"{plot.header_changes} header change(s)", f"{plot.compactions} compaction(s)"]
    notes = f'<p class="note">{esc(log["notes"])}</p>' if log["notes"] else ""
    return (f'<section class="session" id="{anchor}" data-log="{esc(log["log"])}"><h2 title="{esc(log["log"])}">'
            f'{esc(name)}</h2><p class="meta">{esc(" · ".join(facts))}</p>{notes}'
            f"{_collapse_table(plot, anchor, names)}"
            f"{_drawing(anchor, plot)}{_findings_block(findings, tally)}</section>")


def _summary(report: CacheReport, logs: int, findings: VerifyFindings) -> str:
    totals = report.totals.to_dicts()[0] if report.totals.height else {}
    by_severity = dict(findings.tally.group_by("severity").agg(pl.col("count").sum()).iter_rows())
    return (f"{logs} session log(s), {totals.get('requests', 0)} request(s), "
            f"{totals.get('compactionCalls', 0)} compaction call(s)"
            + (f", {side_calls(totals['sideCalls'], totals['sideCallTokens'])}" if totals.get("sideCalls") else "")
            + f"; hit {percent(totals.get('hitRatio'))}, "
            f"cost {cost(totals.get('costUsd'))}; {totals.get('collapses', 0)} collapse(s), "
            f"{totals.get('unexplained', 0)} unexplained, lost {usd(totals.get('collapseCostUsd'))}; "
            f"verify: {by_severity.get('error', 0)} error(s), {by_severity.get('warning', 0)} warning(s)")


def render_report(report: CacheReport, headers: pl.DataFrame, findings: VerifyFindings, *,
                  inputs: Sequence[str] = (), unreadable: Sequence[Unreadable] = (), overview: bool | None = None,
                  origins: Mapping[str, SessionOrigin] | None = None, generator: str = "dsh-audit",
                  detailed: int = DETAILED_SESSIONS, listed: int = SESSIONS_LISTED, filtered: str = "",
                  names: PageNames | None = None) -> str:
    """The whole page. `report`: build_cache_report's; `headers`: build_header_diff's over the same logs;
    `findings`: verify_findings(verify_paths(...)); `origins`: each log's start and cwd (from its header, on the
    same walk: reports.one_walk). `overview` (default: more than one log) adds the costliest collapses of all and
    the sortable table of sessions. Sessions are ranked worst first (RANKED_BY): the `detailed` worst are
    drawn, the `listed` worst are rows of the table; the page says so. `filtered`: what narrowed `report` (the
    filter options as given, and how many logs they left out), said under the inputs. `names`: how the page names each
    session and what its explain commands give (page_names; by default over the sessions of the page, with each
    log's path in the commands)."""
    origins = origins or {}
    ranked = ranked_logs(report.logs, findings.tally)
    logs = ranked.head(listed).to_dicts()
    more = ranked.height - len(logs)
    names = names or page_names(ranked)
    drawn = logs[:detailed]
    chosen = pl.col("log").is_in([log["log"] for log in drawn])   # only the drawn logs' rows are split out
    calls_of = rows_by(report.requests.filter(chosen), "log", "generation")
    headers_of = rows_by(headers.filter(chosen), "log", "generation")
    findings_of = rows_by(findings.shown.filter(chosen), "log", "generation")
    tally_of = rows_by(findings.tally.filter(chosen), "log", "generation")
    sections = []
    for index, log in enumerate(drawn):
        key = (log["log"], log["generation"])
        plot = session_plot(calls_of(key), headers_of(key))
        sections.append(_session(index, log, names, origins.get(log["log"]), plot, findings_of(key), tally_of(key)))
    skipped_note = "".join(f'<li>{esc(shown_path(old))} — an older generation; read {esc(shown_path(new))}</li>'
                           for old, new in findings.skipped)
    skipped_block = (f'<details><summary>{len(findings.skipped)} older generation(s) skipped</summary>'
                     f"<ul>{skipped_note}</ul></details>") if findings.skipped else ""
    unreadable_note = "".join(f"<li>{esc(shown_path(log.label))} — {esc(located_error(log.label, log.reason))}</li>"
                              for log in unreadable)
    unreadable_block = (f'<details open id="unreadable"><summary>{len(unreadable)} log(s) could not be read and are '
                        f"not in this report</summary><ul>{unreadable_note}</ul></details>") if unreadable else ""
    show_overview = ranked.height > 1 if overview is None else overview
    anchors = {log["log"]: _anchor(index) for index, log in enumerate(drawn)}
    policy = "default-src 'none'; base-uri 'none'; form-action 'none'; style-src 'unsafe-inline'; script-src " \
             + _script_hash(RENDER_SCRIPT)
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(policy)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="generator" content="{esc(generator)}">',
        "<title>dsh-audit report</title>", f"<style>{STYLE}</style></head><body>",
        "<header><h1>dsh-audit report</h1>",
        f'<p class="meta">{esc(", ".join(shown_path(p) for p in inputs))}</p>' if inputs else "",
        f'<p class="meta" id="filtered">{esc(filtered)}</p>' if filtered else "",
        f'<p id="summary">{esc(_summary(report, ranked.height, findings))}</p>',
        '<p class="note">Per request (x: turn.step#attempt, in log order): prompt tokens (input + cache read) split '
        "into cache read and miss; × a collapse, coloured by its logged cause; ▼ a header change and ◆ a compaction "
        "in the lane above, with a guide line; the line is the cumulative cost (right axis). Hover for detail; a "
        "long session scrolls sideways.</p>",
        unreadable_block, skipped_block, "</header>",
        _worst_collapses(report.requests, names, anchors) if show_overview else "",
        _overview(logs, names, origins, len(drawn), more) if show_overview else "",
        *sections,
        f'<div id="tip" role="tooltip" hidden></div><script>{RENDER_SCRIPT}</script></body></html>\n',
    ])
