"""`audit report` on a large log, or over many small logs, checked in headless Chromium.

    python benchmarks/html_report.py [--size 100] [--log PATH] [--json]
    python benchmarks/html_report.py --many DIR [--json]
    python benchmarks/html_report.py --corpus [DIR] [--json]

Writes benchmarks/data/html/<log>.html with `audit report` (wall time and peak RSS of that child), opens it from
file:// in headless Chromium (tests/browser.py: Debian's chromium + chromedriver via selenium; `make browser`
installs them) and asserts what tests/test_html_report.py asserts on its small and 10 MB logs: one bar per
request (cache read and miss each), one marker per collapse, the compaction and header-change marks, no console
error, no request but the file itself. Saves a PNG screenshot beside the HTML. With --json the last line is one
JSON object, which run.py turns into the RESULTS.md lines (`results_lines`, `many_results_lines`). Exit 1 when an
assertion fails.

--many DIR (make bench: the 1,000 small logs of small_logs.py): `audit report DIR`, its wall time and peak RSS,
then the page's load time in Chromium, and that it drew the worst sessions only (DETAILED_SESSIONS), listed
every one in the sessions table and shows the summary at the top, with no console error and no request.

--corpus [DIR] (default $DSH_LOGS; make bench when it is there): `audit report DIR` over a tree of real logs, then
the page opened OPENS times, each in a fresh browser, and the median time until it is ready set against the
target, OPEN_TARGET seconds; every drawn plot marks each of its collapses, the sessions table lists every log.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))   # the browser driver the tests use

from run import AUDIT, DATA, ensure_log, measure  # noqa: E402

OPEN_TARGET = 1.0   # seconds until the corpus directory's page is ready (issue 21, item 4)
OPENS = 5
CORPUS = Path(os.environ.get("DSH_LOGS", ROOT.parent / "shared" / "dsh-logs"))


def check(log: Path) -> dict[str, Any]:
    import polars as pl

    from browser import open_report
    from dsh_audit.reports.cache_report import CacheOptions, build_cache_report

    out_dir = DATA / "html"
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / f"{log.name.split('.')[0]}.html"
    written = measure(f"audit report {log.name}", [AUDIT, "report", str(log), "-o", str(report)])
    result: dict[str, Any] = {"log": str(log.relative_to(ROOT)) if log.is_relative_to(ROOT) else str(log),
                              "logBytes": log.stat().st_size, "reportSeconds": round(written.seconds, 2),
                              "reportRssMiB": round(written.rss_mib), "rc": written.rc, "failures": []}
    failures: list[str] = result["failures"]
    if written.rc != 0:
        failures.append(f"audit report exited {written.rc}: {written.stdout.strip()[-300:]}")
        return result
    result["htmlBytes"] = report.stat().st_size
    expected = build_cache_report([log], CacheOptions()).requests
    requests = expected.filter(pl.col("kind") == "request").height
    collapses = expected.filter(pl.col("collapse")).height
    page = open_report(report, report.with_suffix(".png"))
    [plot] = page.plots
    drawn = plot["drawn"]
    result.update(requests=requests, collapses=collapses, drawn=drawn, browserSeconds=round(page.seconds_to_ready, 2),
                  consoleErrors=len(page.console_errors()), network=page.network(),
                  screenshot=str(page.screenshot.relative_to(ROOT)))
    for role, want in (("read", requests), ("miss", requests), ("collapse", collapses),
                       ("compaction", plot["expected"]["compaction"]), ("header", plot["expected"]["header"])):
        if drawn.get(role, 0) != want:
            failures.append(f"{role}: drew {drawn.get(role, 0)}, expected {want}")
    failures += _page_failures(page, report)
    return result


def _page_failures(page: Any, report: Path) -> list[str]:
    """What a loaded page must never show: a console error, or a request for anything but its own file."""
    failures = [f"console errors: {page.console_errors()[:3]}"] if page.console_errors() else []
    if page.network() or report.resolve().as_uri() not in page.requested:
        failures.append(f"requests other than the file: {page.requested[:5]}")
    return failures


def check_many(folder: Path) -> dict[str, Any]:
    from browser import open_report
    from dsh_audit.reports.html import DETAILED_SESSIONS, SESSIONS_LISTED

    logs = sorted(folder.glob("*.jsonl"))
    out_dir = DATA / "html"
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / f"many-{folder.name}.html"
    written = measure(f"audit report {folder.name}/ ({len(logs)} logs)",
                      [AUDIT, "report", str(folder), "-o", str(report)])
    result: dict[str, Any] = {"folder": str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder),
                              "logs": len(logs), "logsBytes": sum(log.stat().st_size for log in logs),
                              "reportSeconds": round(written.seconds, 2), "reportRssMiB": round(written.rss_mib),
                              "rc": written.rc, "failures": []}
    failures: list[str] = result["failures"]
    if written.rc != 0:
        failures.append(f"audit report exited {written.rc}: {written.stdout.strip()[-300:]}")
        return result
    page = open_report(report, report.with_suffix(".png"))
    result.update(htmlBytes=report.stat().st_size, browserSeconds=round(page.seconds_to_ready, 2),
                  plots=len(page.plots), sessionRows=page.extra["sessionRows"],
                  consoleErrors=len(page.console_errors()), network=page.network(),
                  screenshot=str(page.screenshot.relative_to(ROOT)))
    if len(page.plots) != min(DETAILED_SESSIONS, len(logs)) or not all(plot["rendered"] for plot in page.plots):
        failures.append(f"drew {len(page.plots)} plots, expected {min(DETAILED_SESSIONS, len(logs))}")
    if page.extra["sessionRows"] != min(SESSIONS_LISTED, len(logs)):
        failures.append(f"the sessions table has {page.extra['sessionRows']} rows for {len(logs)} logs")
    if not (page.extra["summary"] or "").startswith(f"{len(logs)} session log(s)") or page.extra["summaryTop"] > 300:
        failures.append(f"summary not at the top: {page.extra['summary']!r} at {page.extra['summaryTop']}px")
    failures += _page_failures(page, report)
    return result


def check_corpus(folder: Path) -> dict[str, Any]:
    from browser import open_report

    out_dir = DATA / "html"
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "corpus.html"
    written = measure(f"audit report {folder}", [AUDIT, "report", str(folder), "-o", str(report)])
    result: dict[str, Any] = {"folder": str(folder), "reportSeconds": round(written.seconds, 2),
                              "reportRssMiB": round(written.rss_mib), "rc": written.rc, "failures": []}
    failures: list[str] = result["failures"]
    if written.rc != 0:
        failures.append(f"audit report exited {written.rc}: {written.stdout.strip()[-300:]}")
        return result
    pages = [open_report(report, report.with_suffix(".png")) for _ in range(OPENS)]
    page = pages[-1]
    seconds = statistics.median(p.seconds_to_ready for p in pages)
    logs = int(written.stdout.split(" session log(s)", 1)[0].rsplit(" ", 1)[-1])
    result.update(htmlBytes=report.stat().st_size, logs=logs, openSeconds=round(seconds, 3),
                  openEach=[round(p.seconds_to_ready, 3) for p in pages], plots=len(page.plots),
                  sessionRows=page.extra["sessionRows"], rankedRows=page.extra["rankedRows"],
                  consoleErrors=len(page.console_errors()), network=page.network(),
                  screenshot=str(page.screenshot.relative_to(ROOT)))
    if seconds >= OPEN_TARGET:
        failures.append(f"ready in {seconds:.2f}s (median of {OPENS}), target {OPEN_TARGET:.1f}s")
    if any(plot["drawn"].get("collapse", 0) != plot["expected"]["collapses"] or not plot["rendered"]
           for plot in page.plots):
        failures.append("a plot's collapse markers differ from its collapses")
    if page.extra["sessionRows"] != logs:
        failures.append(f"the sessions table has {page.extra['sessionRows']} rows for {logs} logs")
    failures += _page_failures(page, report)
    return result


def corpus_results_lines(result: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for one --corpus run (its --json object)."""
    title = "## HTML report over the corpus directory"
    if "openSeconds" not in result:
        return [title, "", f"- **FAIL**: {'; '.join(result['failures'])}", ""]
    verdict = "PASS" if not result["failures"] else "FAIL: " + "; ".join(result["failures"])
    return [title, "",
            f"`audit report {result['folder']} -o …` ({result['logs']} logs): {result['reportSeconds']:.2f}s, peak "
            f"RSS {result['reportRssMiB']} MiB, {result['htmlBytes'] / 1e3:,.0f} KB of HTML. Opened from file:// in "
            f"headless Chromium {len(result['openEach'])} times, each in a fresh browser: ready in "
            f"{result['openSeconds']:.2f}s (median; target under {OPEN_TARGET:.0f}s; each: "
            f"{', '.join(f'{s:.2f}' for s in result['openEach'])}), {result['plots']} plots, "
            f"{result['sessionRows']} rows in the sessions table, {result['rankedRows']} ranked collapse rows; "
            f"{result['consoleErrors']} console errors, {len(result['network'])} network requests. **{verdict}**. "
            f"Screenshot: `{result['screenshot']}`.", ""]


def many_results_lines(result: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for one --many run (its --json object)."""
    title = f"## HTML report over {result['logs']:,} small logs"
    if "plots" not in result:
        return [title, "", f"- **FAIL**: {'; '.join(result['failures'])}", ""]
    verdict = "PASS" if not result["failures"] else "FAIL: " + "; ".join(result["failures"])
    return [title, "",
            f"`audit report {result['folder']} -o …` ({result['logs']:,} logs, {result['logsBytes'] / 1e6:.0f} MB): "
            f"{result['reportSeconds']:.2f}s, peak RSS {result['reportRssMiB']} MiB, "
            f"{result['htmlBytes'] / 1e6:.1f} MB of HTML. Opened from file:// in headless Chromium, drawn in "
            f"{result['browserSeconds']:.2f}s: "
            f"{result['plots']} plots (the worst sessions), {result['sessionRows']:,} rows in the sessions table, "
            f"the summary at the top; {result['consoleErrors']} console errors, {len(result['network'])} network "
            f"requests. **{verdict}**. Screenshot: `{result['screenshot']}`.", ""]


def results_lines(result: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for one run of this script (its --json object)."""
    if "drawn" not in result:
        return ["## HTML report in a browser", "", f"- **FAIL**: {'; '.join(result['failures'])}", ""]
    drawn = result["drawn"]
    verdict = "PASS" if not result["failures"] else "FAIL: " + "; ".join(result["failures"])
    return ["## HTML report in a browser", "",
            f"`audit report {result['log']} -o …` ({result['logBytes'] / 1e6:.0f} MB log): "
            f"{result['reportSeconds']:.2f}s, peak RSS {result['reportRssMiB']} MiB, "
            f"{result['htmlBytes'] / 1e6:.2f} MB of HTML (one-session budget: 1.5 MB). Opened from "
            f"file:// in headless Chromium (`benchmarks/html_report.py`), drawn in {result['browserSeconds']:.2f}s: "
            f"{drawn.get('read', 0)} read and {drawn.get('miss', 0)} miss bars for {result['requests']} requests, "
            f"{drawn.get('collapse', 0)} collapse markers for {result['collapses']} collapses, "
            f"{drawn.get('compaction', 0)} compaction and {drawn.get('header', 0)} header-change marks; "
            f"{result['consoleErrors']} console errors, {len(result['network'])} network requests. "
            f"**{verdict}**. Screenshot: `{result['screenshot']}`.", ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100, help="MB: the benchmark log of this size (generated)")
    parser.add_argument("--log", type=Path, help="this log instead")
    parser.add_argument("--json", action="store_true", help="end with one JSON line (for run.py)")
    parser.add_argument("--many", type=Path, metavar="DIR", help="report over the logs in DIR (small_logs.py's)")
    parser.add_argument("--corpus", type=Path, nargs="?", const=CORPUS, metavar="DIR",
                        help=f"report over a tree of real logs and time its opening (default {CORPUS})")
    opts = parser.parse_args(argv)
    if opts.corpus:
        result = check_corpus(opts.corpus.resolve())
        print("\n".join(corpus_results_lines(result)))
    elif opts.many:
        result = check_many(opts.many.resolve())
        print("\n".join(many_results_lines(result)))
    else:
        result = check(opts.log.resolve() if opts.log else ensure_log(opts.size))
        print("\n".join(results_lines(result)))
    if opts.json:
        print(json.dumps(result))
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
