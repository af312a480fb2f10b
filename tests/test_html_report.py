"""`audit report`: one self-contained HTML file, checked in a real browser.

Headless Chromium (Debian's chromium and chromium-driver, installed by `make browser` or, failing that, by the
fixture below) opens each report from file:// and the tests count what it drew: one bar per request (cache
read and miss each), one marker per collapse, header changes and compactions, against build_cache_report's own
counts; no console error, no request but the file itself; and a PNG screenshot of each report, kept after the
run in test-output/html/ under the repository (or $DSH_AUDIT_TEST_OUTPUT/html), named after the test. The
100 MB benchmark log is checked by benchmarks/html_report.py (make bench); here a 10 MB generated log stands in
as the large one.

Skip policy: never in CI (CI=true): there a browser that cannot be installed fails the tests. Elsewhere the
browser tests skip, loudly, only when chromium is absent and apt-get is not there to install it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from browser import (
    PageResult,
    browser_session,
    find_chromium,
    install_chromium,
    load,
    open_report,
    save_whole_page,
)
from conftest_reference import LOGS_ROOT, in_ci, require_corpus
from dsh_audit.cli import main
from dsh_audit.reports.cache_report import CacheOptions, build_cache_report
from dsh_audit.reports.cache_view import call_name
from dsh_audit.reports.header_diff import build_header_diff
from dsh_audit.reports.html import (
    DETAILED_SESSIONS,
    display_names,
    esc,
    render_report,
    script_json,
    verify_findings,
)
from dsh_audit.reports.html_plot import money, nice_ticks, short_count
from dsh_audit.reports.views import usd
from homebuilder import build_messy_home
from logbuilder import LogBuilder
from test_cache_report import TOOL_A, TOOL_B, turn, write_jsonl
from test_hostile_inputs import MiB, audit, bounded, digest
from test_views import collapsing_home, collapsing_log

ROOT = Path(__file__).resolve().parent.parent
GENERATE = ROOT / "benchmarks" / "generate_log.py"
PLAN_REVIEW = "apps/web/tests/snapshots/plan-review"
MANY_LOGS, COLLAPSING_EVERY = 1000, 40   # 25 of the 1,000 tiny sessions collapse (one unexplained each)
ONE_SESSION_BUDGET = 1_500_000   # bytes of HTML for one session (the 100 MB benchmark log's page: 990 KB)
MANY_LOGS_RSS = 320 * MiB   # measured 200 MiB (one log: 180 MiB); before the report kept each log it peaked at 373
# Kept past the run (gitignored), for a person to look at: one PNG per report opened, named after its test.
Png = Callable[[Path], Path]   # a report's page -> where its screenshot is kept
SCREENSHOTS = Path(os.environ.get("DSH_AUDIT_TEST_OUTPUT") or ROOT / "test-output") / "html"
HOSTILE = ('</script><script>window.pwned=1</script><img src="http://127.0.0.1:9/x" onerror="window.pwned=2">'
           "<!-- $x$ &amp; \u2028 \ud800")   # a lone surrogate is legal in a JS string, so in a log


@pytest.fixture(scope="module")
def chromium() -> None:
    if find_chromium():
        return
    problem = install_chromium()
    if problem is None:
        return
    if in_ci() or "apt-get is not available" not in problem:
        pytest.fail(f"headless Chromium is needed for the HTML report tests: {problem}")
    pytest.skip(f"SKIPPED LOUDLY: no headless Chromium here ({problem}); run `make browser` as root")


@pytest.fixture
def png(request: pytest.FixtureRequest) -> Png:
    """Where the screenshot of a report a test opens is kept: SCREENSHOTS/TEST--REPORT.png."""
    test = re.sub(r"[^\w.-]+", "-", request.node.name).strip("-")
    return lambda report: SCREENSHOTS / f"{test}--{report.stem}.png"


def write_report(tmp_path: Path, *logs: Path | str, name: str = "report.html", extra: tuple[str, ...] = ()) -> Path:
    out = tmp_path / name
    result = CliRunner().invoke(main, ["report", *map(str, logs), "-o", str(out), *extra])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"wrote {out}")
    return out


def opened(report: Path, png: Png) -> PageResult:
    page = open_report(report, png(report))
    print(f"\nscreenshot: {page.screenshot}  ({report.stat().st_size:,} bytes of HTML, drawn in "
          f"{page.seconds_to_ready:.2f}s)")
    return page


def assert_clean_page(page: PageResult, report: Path) -> None:
    """No console message of error level, no request but the report itself, a real PNG."""
    assert page.extra["ready"], "the page never finished drawing its plots"
    assert page.console_errors() == [], page.console_errors()
    assert page.location == report.resolve().as_uri()
    assert report.resolve().as_uri() in page.requested, page.requested   # the network log did see the page
    assert page.network() == [], page.network()
    assert all(url.startswith(("file:", "data:")) for url in page.requested), page.requested
    data = page.screenshot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000


def assert_plots_match(page: PageResult, logs: list[Path | str]) -> dict[str, dict[str, Any]]:
    """Each plot drew one bar per request (read and miss), one marker per collapse, as the library counts."""
    expected = build_cache_report(logs, CacheOptions())
    per_log = {row["log"]: row for row in expected.logs.iter_rows(named=True)}
    assert sorted(plot["log"] for plot in page.plots) == sorted(per_log)
    for plot in page.plots:
        log = per_log[plot["log"]]
        calls = expected.requests.filter(pl.col("log") == plot["log"])
        requests = calls.filter(pl.col("kind") == "request").height
        collapses = calls.filter(pl.col("collapse")).height
        assert plot["rendered"]
        assert requests == log["requests"] + calls.filter(pl.col("inherited") & (pl.col("kind") == "request")).height
        assert plot["drawn"].get("read", 0) == requests, plot
        assert plot["drawn"].get("miss", 0) == requests, plot
        assert plot["drawn"].get("collapse", 0) == collapses == log["collapses"], plot
        assert plot["drawn"].get("cost", 0) == calls.height, plot   # the cumulative cost has a point per call
        unlogged = calls.filter((pl.col("kind") == "request") & pl.col("inputTokens").is_null()
                                & pl.col("cacheReadTokens").is_null()).height
        assert plot["drawn"].get("no-usage", 0) == unlogged, plot   # a request with no usage is still seen
        assert plot["drawn"].get("header", 0) == plot["expected"]["header"]
        assert plot["drawn"].get("compaction", 0) == plot["expected"]["compaction"]
    return {plot["log"]: plot for plot in page.plots}


# -- in the browser ----------------------------------------------------------------------------------------
@pytest.mark.usefixtures("chromium")
def test_synthetic_collapses_one_marker_each_and_hover_names_the_cause(tmp_path: Path, png: Png) -> None:
    log = collapsing_log(tmp_path)
    report = write_report(tmp_path, log)
    page = opened(report, png)
    assert_clean_page(page, report)
    [plot] = assert_plots_match(page, [log]).values()
    assert plot["drawn"]["read"] == 5 and plot["drawn"]["collapse"] == 2   # the log's known collapses
    assert plot["drawn"]["header"] == 1                                     # the tool change before turn 3


@pytest.mark.usefixtures("chromium")
def test_corpus_log(tmp_path: Path, png: Png) -> None:
    require_corpus()
    log = LOGS_ROOT / PLAN_REVIEW
    report = write_report(tmp_path, log)
    page = opened(report, png)
    assert_clean_page(page, report)
    [plot] = assert_plots_match(page, [log]).values()
    assert plot["drawn"]["read"] == 2 and plot["drawn"].get("collapse", 0) == 0


@pytest.mark.usefixtures("chromium")
def test_corpus_directory_overview_sorts_by_cost_and_hit_ratio(tmp_path: Path, png: Png) -> None:
    require_corpus()
    from selenium.webdriver.common.by import By

    from browser import driver_for

    folder = LOGS_ROOT / "apps/web/tests/snapshots"
    report = write_report(tmp_path, folder)
    page = opened(report, png)
    assert_clean_page(page, report)
    assert len(assert_plots_match(page, [folder])) >= 5
    with driver_for(report) as driver:
        def column(index: int) -> list[float]:
            cells = driver.find_elements(By.CSS_SELECTOR, f"#sessions tbody tr td:nth-child({index})")
            return [float(cell.get_attribute("data-sort") or "-inf") for cell in cells]

        heads = [h.text for h in driver.find_elements(By.CSS_SELECTOR, "#sessions thead th")]
        assert {"started (UTC)", "project (cwd)", "cost lost"} <= set(heads)
        cost, hit = heads.index("cost") + 1, heads.index("hit ratio") + 1
        button = driver.find_element(By.CSS_SELECTOR, f"#sessions thead th:nth-child({cost}) button")
        button.click()
        assert column(cost) == sorted(column(cost), reverse=True)     # a number column sorts largest first
        button.click()
        assert column(cost) == sorted(column(cost))
        driver.find_element(By.CSS_SELECTOR, f"#sessions thead th:nth-child({hit}) button").click()
        assert column(hit) == sorted(column(hit), reverse=True)
        link = driver.find_element(By.CSS_SELECTOR, "#sessions tbody tr a").get_attribute("href") or ""
        assert link.startswith(report.resolve().as_uri() + "#session-")   # an anchor in the same file


@pytest.fixture(scope="module")
def pressure_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 10 MB generated log: 416 requests, 11 compactions, a header change, evictions."""
    log = tmp_path_factory.mktemp("pressure") / "s10-pressure.jsonl"
    subprocess.run([sys.executable, str(GENERATE), "--size", "10MB", "--compaction", "pressure", "--out", str(log)],
                   check=True, capture_output=True)
    return log


@pytest.mark.usefixtures("chromium")
def test_large_generated_log(pressure_log: Path, tmp_path: Path, png: Png) -> None:
    """Every bar and marker of the 10 MB log drawn, and its page within the one-session size budget."""
    started = time.perf_counter()
    report = write_report(tmp_path, pressure_log)
    written = time.perf_counter() - started
    page = opened(report, png)
    print(f"report written in {written:.2f}s")
    assert_clean_page(page, report)
    [plot] = assert_plots_match(page, [pressure_log]).values()
    assert plot["drawn"]["read"] == 416 and plot["drawn"]["collapse"] >= 12   # as many as the library counts
    assert plot["drawn"]["compaction"] == 11 and plot["drawn"]["header"] == 1
    assert report.stat().st_size < ONE_SESSION_BUDGET


def test_one_long_session_stays_under_the_size_budget(pressure_log: Path) -> None:
    """4,160 requests in one session (the 10 MB log's calls ten times over, each copy later turns and seqs; the
    100 MB benchmark log has 4,166): every request a bar of each kind and a hover text, the page under 1.5 MB."""
    cache = build_cache_report([pressure_log], CacheOptions())
    turns, seqs = cache.requests.select(pl.col("turn").max(), pl.col("seq").max()).row(0)
    cache.requests = pl.concat([cache.requests.with_columns(pl.col("turn") + k * turns, pl.col("seq") + k * (seqs + 1))
                                for k in range(10)])
    page = render_report(cache, build_header_diff([pressure_log]), verify_findings([]))
    tips = json.loads(page.split('<script type="application/json" id="session-0-tips">', 1)[1].split("</script>")[0])
    assert len(tips) == page.count("<rect ") // 2 == 4160
    assert tips[416].startswith(f"{turns + 1}.") and page.count('<g data-role="collapse"') >= 1
    print(f"\n4,160 requests: {len(page.encode('utf-8')):,} bytes of HTML")
    assert len(page.encode("utf-8")) < ONE_SESSION_BUDGET


@pytest.mark.usefixtures("chromium")
def test_collapses_ranked_open_above_the_plot_x_named_by_call_and_hover_detail(tmp_path: Path, png: Png) -> None:
    """A session's collapses are an open table above its plot, costliest first, each with its audit explain
    command; the x axis names every request turn.step#attempt; hovering a collapse's bar shows its detail."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    from browser import driver_for

    log = collapsing_log(tmp_path)
    report = write_report(tmp_path, log)
    assert_clean_page(opened(report, png), report)
    calls = build_cache_report([log], CacheOptions()).requests.filter(pl.col("kind") == "request")
    names = [call_name(row) for row in calls.iter_rows(named=True)]
    costliest = calls.filter(pl.col("collapse")).sort("collapseCostUsd", descending=True, maintain_order=True)
    with driver_for(report) as driver:
        table = driver.find_element(By.CSS_SELECTOR, "table.collapses")
        plot = driver.find_element(By.CSS_SELECTOR, ".plot")
        assert table.is_displayed() and table.location["y"] < plot.location["y"]
        rows = [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
                for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
        assert [row[1] for row in rows] == [call_name(row) for row in costliest.iter_rows(named=True)]
        assert [row[4] for row in rows] == [usd(value) for value in costliest["collapseCostUsd"]]
        assert all(row[5].startswith("audit explain ") and row[5].endswith(" " + row[1]) for row in rows)
        labels = driver.find_elements(By.CSS_SELECTOR, '.plot svg g.ticks[text-anchor="middle"] text')
        assert [label.text for label in labels] == names
        worst = names.index(call_name(costliest.row(0, named=True)))
        bar = driver.find_elements(By.CSS_SELECTOR, '[data-role="miss"] rect')[worst]
        ActionChains(driver).move_to_element(bar).perform()
        tip = driver.find_element(By.ID, "tip")
        assert tip.is_displayed()
        assert tip.text.startswith(f"{names[worst]} · seq ") and "collapse (" in tip.text and "cost lost: $" in tip.text


@pytest.mark.usefixtures("chromium")
def test_a_filtered_report_draws_the_sessions_kept(tmp_path: Path, png: Png) -> None:
    """--project over a home of four: the page draws and lists the two sessions run in /work/shop or below, one
    marker per collapse as cache-report counts them with the same filter; it loads cleanly."""
    home = collapsing_home(tmp_path / "sessions")
    report = write_report(tmp_path, home, extra=("--project", "/work/shop", "--project", "/work/docs"))
    page = opened(report, png)
    assert_clean_page(page, report)
    kept = [log for log in map(str, sorted(home.rglob("session.jsonl"))) if "--work-shop--" in log
            or "--work-docs--" in log]
    assert sorted(plot["log"] for plot in page.plots) == kept and page.extra["sessionRows"] == 2
    assert_plots_match(page, kept)
    text = report.read_text(encoding="utf-8")
    assert ("only the calls --project /work/shop --project /work/docs keeps; 2 of 4 session log(s) left out, none "
            "of their calls kept") in text
    # named among every session read: 3f2a91c0 alone would also pick the one --project left out
    assert f"<code>audit explain {home} --session 3f2a91c0-7 3.1#1</code>" in text and ">3f2a91c0-7</a>" in text


def test_the_overview_ranks_sessions_by_cost_lost_with_start_and_project(tmp_path: Path) -> None:
    """Over a few sessions (all drawn) the table is ranked by the cost lost, not the order read, names each by
    its short id beside its log's path and says when and where each started; the page opens with the costliest
    collapses and their explain commands, which find the log by its short id (and do: the command runs)."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name, created, cwd, collapsing in (("a-steady", 1_790_370_182_807, "/home/me/ledger", False),
                                           ("b-collapsing", 1_790_456_582_807, "/home/me/atlas", True)):
        log = LogBuilder(session_id=name, createdAt=created, cwd=cwd)
        turn(log, 1, "hello " * 100, 0, reason="initial", tools=[TOOL_A])
        turn(log, 2, "again " * 100, 512)
        if collapsing:
            turn(log, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
        write_jsonl(log, folder / f"{name}.jsonl")
    page = write_report(tmp_path, folder).read_text(encoding="utf-8")
    table = page.split('id="sessions"', 1)[1].split("</table>", 1)[0]
    first, second = table.split("<tr><td class=\"log\"")[1:]
    assert (f'<a href="#session-0" title="{folder / "b-collapsing.jsonl"}">b-collap</a><br>'   # the path under it
            '<span class="path">b-collapsing.jsonl</span>') in first
    assert f'<a href="#session-1" title="{folder / "a-steady.jsonl"}">a-steady</a>' in second
    assert "2026-09-26 21:03" in first and "/home/me/atlas" in first
    assert "2026-09-25 21:03" in second and "/home/me/ledger" in second
    assert page.index('id="worst"') < page.index('id="sessions"') < page.index('<section class="session"')
    board = page.split('id="worst-collapses"', 1)[1].split("</table>", 1)[0]
    assert board.count("<tr><td") == 1 and f"<code>audit explain {folder} --session b-collap 3.1#1</code>" in board
    assert '<h2 title="' + str(folder / "b-collapsing.jsonl") + '">b-collap</h2>' in page
    explained = CliRunner().invoke(main, ["explain", str(folder), "--session", "b-collap", "3.1#1"])
    assert explained.exit_code == 0 and "header" in explained.output, explained.output


@pytest.mark.usefixtures("chromium")
def test_hostile_log_text_is_shown_never_run(tmp_path: Path, png: Png) -> None:
    """A session id, a header key, an event type and a folder name that are markup: shown as text, nothing
    runs, nothing is fetched (a blocked script would also show as a console error)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    from browser import driver_for

    log = LogBuilder(session_id="s" + HOSTILE)
    turn(log, 1, "hello " * 100, 0, reason="initial", tools=[TOOL_A])
    turn(log, 2, "again " * 100, 512)
    turn(log, 3, "more", 0, reason="change", tools=[TOOL_A], **{HOSTILE: HOSTILE})
    log.add("x/" + HOSTILE, {"a": HOSTILE})
    folder = tmp_path / 'logs<img src=x onerror="window.pwned=3">'
    folder.mkdir()
    write_jsonl(log, folder / "session.jsonl")
    report = write_report(tmp_path, folder)
    page = opened(report, png)
    assert_clean_page(page, report)
    with driver_for(report) as driver:
        assert driver.execute_script("return window.pwned") is None
        text = driver.find_element(By.TAG_NAME, "body").text
        assert 'session s</script><script>window.pwned=1</script><img src="http://127.0.0.1:9/x"' in text
        assert "[unknown-event]" in text
        marker = driver.find_element(By.CSS_SELECTOR, '[data-role="header"] path')
        ActionChains(driver).move_to_element(marker).perform()
        hover = driver.execute_script("return document.getElementById('tip').textContent")
        assert "config.</script><script>window.pwned=1</script>" in hover, hover
        assert driver.execute_script("return window.pwned") is None


# -- the file and the command ------------------------------------------------------------------------------
def test_log_text_is_escaped_wherever_it_lands() -> None:
    assert esc('<a href="x">&') == "&lt;a href=&quot;x&quot;&gt;&amp;"
    assert esc("\ud800") == "\\ud800"                          # always valid UTF-8
    encoded = script_json({"t": "</script><!-- \u2028 & \ud800", "n": float("nan")})
    assert "<" not in encoded and ">" not in encoded and "&" not in encoded and "\u2028" not in encoded
    assert encoded.isascii() and '"n":null' in encoded


@pytest.mark.parametrize(("most", "ticks"), [(930, [0, 200, 400, 600, 800, 1000]), (0, [0, 1]),
                                           (203_500, [0, 50_000, 100_000, 150_000, 200_000, 250_000]),
                                           (0.00026, [0, 0.0001, 0.0002, 0.0003])])
def test_an_axis_ends_on_the_first_round_tick_at_or_above_its_largest_value(most: float, ticks: list[float]) -> None:
    assert nice_ticks(most) == pytest.approx(ticks)


def test_axis_labels_read_short() -> None:
    assert [short_count(v) for v in (800, 250_000, 1_500_000)] == ["800", "250k", "1.5M"]
    assert money(0.0001, 0.0003) == "$0.00010" and money(12.5, 50) == "$12.50"   # the digits the top tick needs


def test_several_logs_are_named_without_the_folder_they_share() -> None:
    assert display_names(["/a/b/x/session.jsonl", "/a/b/y/session.v3.jsonl"]) == ["x/session.jsonl",
                                                                                  "y/session.v3.jsonl"]
    assert display_names(["/a/store.db#s1", "/a/store.db#s2"]) == ["store.db#s1", "store.db#s2"]
    assert display_names(["/a/session.jsonl"]) == ["/a/session.jsonl"]


def test_one_file_no_network_and_a_policy_that_forbids_it(tmp_path: Path) -> None:
    report = write_report(tmp_path, collapsing_log(tmp_path))
    document = report.read_text(encoding="utf-8")
    policy = document[document.index('http-equiv="Content-Security-Policy"'):].split(">", 1)[0]
    assert "default-src &#x27;none&#x27;" in policy and "unsafe-eval" not in policy
    assert "connect-src" not in policy          # so default-src 'none' forbids every fetch
    markup = document.split("<script>", 1)[0]  # what is not the page's script
    assert " src=" not in markup and "http://" not in markup and "https://" not in markup
    assert document.count("<script>") == 1 and document.count('<script type="application/json"') == 1


def test_missing_output_folder_is_one_clear_line(tmp_path: Path) -> None:
    log = collapsing_log(tmp_path)
    result = CliRunner().invoke(main, ["report", str(log), "-o", str(tmp_path / "no" / "such" / "r.html")])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "no such folder" in result.stderr
    assert not (tmp_path / "no").exists()


def test_unreadable_log_and_bad_usage_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "session.jsonl"
    broken.write_text("not json\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["report", str(broken), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and result.stderr.startswith("audit: ") and result.stderr.count("\n") == 1
    assert not (tmp_path / "r.html").exists()
    assert CliRunner().invoke(main, ["report", str(broken)]).exit_code == 2   # -o is required


def test_help_names_examples_and_exit_codes() -> None:
    result = CliRunner().invoke(main, ["report", "--help"])
    assert result.exit_code == 0
    assert "audit report session.v3.jsonl -o report.html" in result.output
    assert "Exit codes: 0 written (a log that cannot be read is named in the page and left out), 2" in result.output


def test_the_figures_are_cache_reports_with_its_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_audit.reports import one_walk

    read: list[one_walk.PageParts] = []
    read_once = one_walk.read_once

    def spy(*args: Any, **kwargs: Any) -> one_walk.PageParts:
        read.append(read_once(*args, **kwargs))
        return read[-1]

    monkeypatch.setattr(one_walk, "read_once", spy)
    log = collapsing_log(tmp_path)
    write_report(tmp_path, log, name="plain.html")
    expected = build_cache_report([log], CacheOptions())
    [parts] = read
    assert all(parts.cache.rows(kind).equals(expected.rows(kind)) for kind in ("requests", "logs", "totals"))


def test_a_home_with_unreadable_sessions_names_them_on_the_page(chromium: None, tmp_path: Path, png: Png) -> None:
    """A newer dsh's session and a torn one are named in an open box at the top; the four readable are drawn."""
    from selenium.webdriver.common.by import By

    page = tmp_path / "home.html"
    done = CliRunner().invoke(main, ["report", str(build_messy_home(tmp_path / "sessions")), "-o", str(page)])
    assert done.exit_code == 0, done.output
    with browser_session() as driver:
        load(driver, page)
        box = driver.find_element(By.ID, "unreadable")
        assert box.is_displayed() and box.get_attribute("open") is not None
        assert "2 log(s) could not be read" in box.text and "format v5" in box.text and "not valid JSON" in box.text
        assert len(driver.find_elements(By.CSS_SELECTOR, "section.session")) == 4
        save_whole_page(driver, png(page))


@pytest.mark.parametrize("width", [390, 1280])
def test_a_narrow_window_scrolls_no_page_sideways(chromium: None, width: int, tmp_path: Path, png: Png) -> None:
    """The page over several logs and the fleet page of their dataset: only a plot or a tall table's own box
    scrolls sideways, never the page (the costliest collapses' `audit explain` command once pushed it wider than a
    phone's window)."""
    from selenium.webdriver.common.by import By

    wild = ROOT / "tests" / "fixtures" / "wild"
    assert CliRunner().invoke(main, ["export", str(wild), "--to", str(tmp_path / "fleet")]).exit_code == 0
    for page in (write_report(tmp_path, wild, name="logs.html"), write_report(tmp_path, tmp_path / "fleet")):
        with browser_session() as driver:
            load(driver, page)
            driver.set_window_size(width, 900)
            assert driver.find_elements(By.ID, "worst-collapses")
            wide, room = driver.execute_script("const d = document.documentElement; "
                                               "return [d.scrollWidth, d.clientWidth];")
            save_whole_page(driver, png(page), width)
            assert wide <= room, (page.name, wide, room)


# -- many logs ---------------------------------------------------------------------------------------------
def tiny_session(session_id: str, *, collapsing: bool) -> LogBuilder:
    """Two steady turns; a collapsing one adds collapsing_log's three collapses (one unexplained)."""
    log = LogBuilder(session_id=session_id)
    turn(log, 1, "hello " * 100, 0, reason="initial", tools=[TOOL_A])
    turn(log, 2, "again " * 100, 512)
    if collapsing:
        turn(log, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
        turn(log, 4, "again " * 100, 640)
        turn(log, 5, "later", 0)
    return log


def many_sessions(folder: Path, count: int) -> Path:
    folder.mkdir()
    for k in range(count):
        write_jsonl(tiny_session(f"s-{k:04d}", collapsing=k % COLLAPSING_EVERY == 0), folder / f"s-{k:04d}.jsonl")
    return folder


def test_a_thousand_logs_draw_the_worst_and_list_every_one_in_bounded_memory(chromium: None, tmp_path: Path,
                                                                              png: Png) -> None:
    """1,000 tiny sessions through the real CLI under a hard memory limit: peak RSS independent of the number of
    logs, the 25 worst drawn (the collapsing ones: an unexplained collapse ranks first), every session a row of
    the table, the summary visible at the top of a page that loads cleanly; the logs untouched."""
    from selenium.webdriver.common.by import By

    folder = many_sessions(tmp_path / "sessions", MANY_LOGS)
    before = {path.name: digest(path) for path in folder.iterdir()}
    out = tmp_path / "many.html"
    run = audit("report", str(folder), "-o", str(out))
    assert run.code == 0 and "Traceback" not in run.text, run.text
    assert run.out.startswith(f"wrote {out}") and f"{MANY_LOGS} session log(s)" in run.out, run.out
    print(f"\naudit report over {MANY_LOGS} logs: peak RSS {run.peak_rss >> 20} MiB")
    bounded(run, MANY_LOGS_RSS)
    assert {path.name: digest(path) for path in folder.iterdir()} == before
    page = opened(out, png)
    assert_clean_page(page, out)
    collapsing = {str(folder / f"s-{k:04d}.jsonl") for k in range(0, MANY_LOGS, COLLAPSING_EVERY)}
    assert len(page.plots) == DETAILED_SESSIONS == len(collapsing)
    assert {plot["log"] for plot in page.plots} == collapsing
    assert all(plot["rendered"] and plot["drawn"]["collapse"] == plot["expected"]["collapses"] >= 2
               for plot in page.plots), page.plots[0]
    with browser_session() as driver:
        load(driver, out)
        summary = driver.find_element(By.ID, "summary")
        assert summary.is_displayed() and summary.location["y"] < 200
        assert summary.text.startswith(f"{MANY_LOGS} session log(s), ") and "25 unexplained" in summary.text
        assert len(driver.find_elements(By.CSS_SELECTOR, "#sessions tbody tr")) == MANY_LOGS
        assert len(driver.find_elements(By.CSS_SELECTOR, "#sessions tbody tr a")) == DETAILED_SESSIONS
        note = driver.find_element(By.ID, "drawn-note").text
        assert f"The {DETAILED_SESSIONS} worst are drawn below; the other {MANY_LOGS - DETAILED_SESSIONS} are rows" \
               in note, note


def test_past_the_listed_cap_the_rest_are_counted_with_where_to_find_them(tmp_path: Path) -> None:
    folder = many_sessions(tmp_path / "sessions", 6)
    cache = build_cache_report([folder], CacheOptions())
    page = render_report(cache, build_header_diff([folder]), verify_findings([]), detailed=2, listed=4)
    table = page.split('id="sessions"', 1)[1].split("</table>", 1)[0]
    assert page.count('<section class="session"') == 2 and table.count("<tr><td class=\"log\"") == 4
    assert "The 2 worst are drawn below; the other 2 are rows of this table only" in page
    assert '<p class="note" id="more-sessions">2 more session(s), the lowest ranked, are not listed: see ' \
           "<code>audit cache-report --rows logs</code>" in page
    assert page.index(str(folder / "s-0000.jsonl")) < page.index(str(folder / "s-0001.jsonl"))   # it collapses


def test_verify_findings_keep_a_fixed_number_per_log_and_count_every_one() -> None:
    """Per log: the first `shown` findings as rows, every one counted by severity and code, verify's own
    uncounted-by-code remainder as `unlisted`; an older generation is named as skipped, not counted."""
    from dsh_audit.findings import Finding
    from dsh_audit.verify import LogReport

    noisy = LogReport("a.jsonl", generation=0, unlisted={"error": 5},
                      findings=[Finding("seq-gap", f"gap {k}", seq=k, line=k + 1, log="a.jsonl") for k in range(4)]
                      + [Finding("torn-tail", "torn", severity="warning", log="a.jsonl")])
    broken = LogReport("b.jsonl", read_error="b.jsonl:3: not valid JSON")
    older = LogReport("c/session.jsonl", generation=0, superseded_by="c/session.v3.jsonl")
    found = verify_findings([noisy, broken, older], shown=2)
    assert found.shown.select("log", "code", "seq").rows() == [("a.jsonl", "seq-gap", 0), ("a.jsonl", "seq-gap", 1),
                                                               ("b.jsonl", "unreadable", None)]
    assert sorted(found.tally.select("log", "severity", "code", "count").rows()) == [
        ("a.jsonl", "error", "seq-gap", 4), ("a.jsonl", "error", "unlisted", 5), ("a.jsonl", "warning", "torn-tail", 1),
        ("b.jsonl", "error", "unreadable", 1)]
    assert found.skipped == [("c/session.jsonl", "c/session.v3.jsonl")]


def test_a_session_past_its_shown_findings_counts_the_rest(tmp_path: Path) -> None:
    """The drawn session's block tallies every finding and says how many are not listed."""
    from dsh_audit.findings import Finding
    from dsh_audit.verify import LogReport

    log = collapsing_log(tmp_path)
    cache = build_cache_report([log], CacheOptions())
    label = cache.logs["log"][0]
    report = LogReport(label, generation=0, unlisted={"error": 7},
                       findings=[Finding("seq-gap", f"gap {k}", seq=k, log=label) for k in range(3)])
    page = render_report(cache, build_header_diff([log]), verify_findings([report], shown=2))
    assert "3 error [seq-gap], 7 more error(s), counted by verify past the findings it keeps" in page
    assert page.count("[seq-gap] gap ") == 2 and "and 8 more (audit verify lists them all)" in page
    assert "verify: 10 error(s), 0 warning(s)" in page
