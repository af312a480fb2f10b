"""Issue 21, item 2: --since/--until, --model and --project on every multi-log command. verify and header-diff
take or leave whole logs by what a log says before its first request (dsh_audit.log_filter), and name and count
each log they leave out; the HTML report counts the calls cache-report counts with the same filters."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from dsh_audit.cli import main
from dsh_audit.log_filter import LogFilter
from dsh_audit.readers import open_log
from dsh_audit.readers.home import session_origin
from dsh_audit.records import EARLIEST_START_MS
from dsh_audit.reports.cache_report import build_cache_report
from dsh_audit.reports.filters import CallFilter, filtered
from dsh_audit.reports.one_walk import narrowed, read_once
from logbuilder import LogBuilder
from test_cache_report import TOOL_A, TOOL_B, steady_log, turn, write_jsonl
from test_rollup import timed

GENERATIONS = Path(__file__).resolve().parent / "fixtures" / "generations"
RECORDED = GENERATIONS / "zsagi1368/packages/test-support/session-snapshot/tests/fixtures/record-suite/rec-child"
PREVIEW = (GENERATIONS / "zsagi1368/packages/experimental/webworker-runtime/tests/fixtures/vfs-example/home/sessions"
           / "--dsh-workspace--/preview-showcase")
V4 = GENERATIONS / "zq0929/snapshots/sdk/text-turn/session.v4.jsonl"
PRO = "deepseek-v4-pro"


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_timed_home(tmp_path_factory.mktemp("home"))


def build_timed_home(root: Path) -> Path:
    """Three sessions below `root`: shop (started 2026-11-30, a collapse on a tool change on 2026-12-01),
    shop-api (started 2026-11-20), docs (started 2026-12-01, on the pro model)."""
    shop = steady_log()
    turn(shop, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
    timed(shop, {1: "2026-11-30T10:00", 2: "2026-11-30T11:00", 3: "2026-12-01T09:00"})
    api = timed(steady_log(), {1: "2026-11-20T08:00", 2: "2026-11-20T08:10"})
    docs = LogBuilder()
    turn(docs, 1, "hello " * 100, 0, reason="initial", tools=[TOOL_A], model=PRO)
    turn(docs, 2, "again " * 100, 512)
    timed(docs, {1: "2026-12-01T12:00", 2: "2026-12-01T12:05"})
    for log, name, started in ((shop, "shop", "2026-11-30T10:00"), (api, "shop-api", "2026-11-20T08:00"),
                               (docs, "docs", "2026-12-01T12:00")):
        log.header |= {"id": f"session-{name}", "cwd": f"/work/{name}", "createdAt": _ms(started)}
        folder = root / f"session-{name}"
        folder.mkdir()
        write_jsonl(log, folder / "session.jsonl")
    return root


def audit(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def verified(*args: str) -> dict[str, object]:
    document = json.loads(audit("verify", "--json", *args).stdout)
    assert isinstance(document, dict)
    return document


# -- which logs: every generation says when, where and on which model -----------------------------------------
@pytest.fixture(scope="module")
def v1_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """No v1 log is committed: a steady v0-shaped log under a v1 header (verify finds nothing in it)."""
    log = steady_log()
    log.header |= {"version": 1, "createdAt": _ms("2026-10-01T08:00"), "cwd": "/work/v1"}
    return write_jsonl(log, tmp_path_factory.mktemp("v1") / "session.v1.jsonl")


@pytest.mark.parametrize(("log", "generation", "model"), [
    (RECORDED / "session.jsonl", 0, "fake"), (None, 1, "deepseek-v4-flash"), (PREVIEW / "session.v2.jsonl", 2, None),
    (RECORDED / "session.v3.jsonl", 3, "fake"), (V4, 4, "deepseek-v4-flash")])
def test_every_generation_is_picked_by_its_header_and_first_request(log: Path | None, generation: int,
                                                                     model: str | None, v1_log: Path) -> None:
    source = open_log(log or v1_log)
    assert source.generation.version == generation
    created = source.header["createdAt"]
    assert isinstance(created, int)
    started = datetime.fromtimestamp(created / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    # a scrubbed fixture's createdAt (700: before dsh existed) is no start: the log is taken
    logged = created >= EARLIEST_START_MS
    assert LogFilter(since_ms=created + 1, since_text="X").outside(source) == (
        ("--since X", f"started {started}") if logged else None)
    assert LogFilter(until_ms=created, until_text="Y").outside(source) == (
        ("--until Y", f"started {started}") if logged else None)
    assert LogFilter(since_ms=created, until_ms=created + 1).outside(source) is None
    # the session header names no model in any generation: the first request header does (v2's fixture has none)
    assert LogFilter(models=("other",)).outside(source) == (
        None if model is None else ("--model other", f"its first request is to {model}"))
    cwd = source.header["cwd"]
    assert isinstance(cwd, str)
    # a scrubbed cwd ({{cwd}}) says nothing: the log is taken
    assert LogFilter(projects=("/elsewhere",)).outside(source) == (
        None if cwd.startswith("{{") else ("--project /elsewhere", f"run in {cwd}"))
    source.close()


def test_a_log_that_does_not_say_is_taken(tmp_path: Path) -> None:
    log = steady_log()
    del log.header["createdAt"]
    path = write_jsonl(log, tmp_path / "session.jsonl")
    source = open_log(path)
    assert LogFilter(since_ms=_ms("2026-01-01T00:00"), since_text="2026-01-01").outside(source) is None
    assert LogFilter(projects=("/work",)).outside(source) is None   # no cwd
    source.close()
    # generated and scrubbed logs: no time logged (0, as a call's time of 0), or one before dsh existed
    for placeholder in (0, 700, EARLIEST_START_MS - 1):
        log.header["createdAt"] = placeholder
        source = open_log(write_jsonl(log, tmp_path / "session.jsonl"))
        assert LogFilter(since_ms=_ms("2026-01-01T00:00"), since_text="2026-01-01").outside(source) is None
        assert LogFilter(until_ms=_ms("2024-06-01T00:00"), until_text="2024-06-01").outside(source) is None
        assert session_origin(source.header).created_ms is None   # the report's overview: no start either
        source.close()
    log.header["createdAt"] = EARLIEST_START_MS
    source = open_log(write_jsonl(log, tmp_path / "session.jsonl"))
    assert LogFilter(until_ms=_ms("2024-06-01T00:00"), until_text="2024-06-01").outside(source) is None
    assert LogFilter(since_ms=_ms("2024-06-01T00:00"), since_text="2024-06-01").outside(source) == (
        "--since 2024-06-01", "started 2024-01-01 00:00 UTC")
    source.close()


# -- verify: a gate lists and counts what it leaves out --------------------------------------------------------
def test_verify_counts_each_log_left_out_and_says_why(home: Path) -> None:
    document = verified("--since", "2026-11-25", str(home))
    summary = document["summary"]
    assert isinstance(summary, dict) and isinstance(document["logs"], list)
    assert (summary["logs"], summary["leftOut"]) == (2, {"--since 2026-11-25": 1})
    [left] = [log for log in document["logs"] if log["leftOutBy"] is not None]
    assert left["log"].endswith("session-shop-api/session.jsonl")
    assert (left["leftOut"], left["ok"], left["events"]) == ("started 2026-11-20 08:00 UTC", True, 0)

    table = audit("verify", "--model", PRO, str(home))
    words = " ".join(table.stdout.split())   # as wide as the terminal: the details go under the path
    assert table.exit_code == 0
    assert ("left out session-shop/session.jsonl (by --model deepseek-v4-pro: its first request is to "
            "deepseek-v4-flash)") in words, table.stdout
    assert "1 log(s), 0 failed" in words and "2 log(s) left out by --model deepseek-v4-pro" in words


def test_verify_keeps_its_exit_code_for_the_logs_verified(home: Path, tmp_path: Path) -> None:
    """A log with findings left out by the filter does not fail the gate; one kept still does, in one process
    or several (the filter goes to the workers)."""
    shutil.copytree(home, copy := tmp_path / "home")
    log = copy / "session-shop-api" / "session.jsonl"
    log.write_text(log.read_text(encoding="utf-8").replace('"type": "turn/end"', '"type": "acme/unknown"', 1),
                   encoding="utf-8")
    assert audit("verify", "--strict", str(copy)).exit_code == 1
    for jobs in ("1", "2"):
        assert audit("verify", "--strict", "-j", jobs, "--since", "2026-11-25", str(copy)).exit_code == 0
        assert audit("verify", "--strict", "-j", jobs, "--project", "/work/shop-api", str(copy)).exit_code == 1


def test_verify_junit_skips_the_logs_left_out(home: Path) -> None:
    result = audit("verify", "--format", "junit", "--project", "/work/docs", str(home))
    assert result.exit_code == 0
    assert result.stdout.count("<skipped message=\"left out by --project /work/docs: run in /work/shop") == 2


def test_a_bad_time_is_bad_usage_before_any_log_is_read(home: Path) -> None:
    result = audit("verify", "--since", "last tuesday", str(home))
    assert result.exit_code == 2 and result.stdout == ""
    assert "--since" in result.stderr and "'last tuesday' is neither a date" in result.stderr


# -- header-diff: whole logs, as verify ---------------------------------------------------------------------
def test_header_diff_leaves_out_whole_logs_and_counts_them(home: Path) -> None:
    result = audit("header-diff", "--json", "--until", "2026-11-29", str(home))
    rows = json.loads(result.stdout)["rows"]
    assert {Path(row["log"]).parent.name for row in rows} == {"session-shop-api"}
    assert "audit: 2 log(s) left out by --until 2026-11-29" in result.stderr
    every = json.loads(audit("header-diff", "--json", str(home)).stdout)["rows"]
    assert [row for row in every if "shop-api" in row["log"]] == rows   # the log kept is diffed as before


# -- report: the page's figures are cache-report's with the same filters -------------------------------------
@pytest.mark.parametrize("chosen", [CallFilter(since_ms=_ms("2026-12-01T00:00")), CallFilter(models=(PRO,)),
                                    CallFilter(projects=("/work/shop",)), CallFilter(until_ms=_ms("2026-11-01"))])
def test_the_page_counts_what_cache_report_counts(home: Path, chosen: CallFilter) -> None:
    page = narrowed(read_once([home]), chosen)
    report = filtered(build_cache_report([home]), chosen)
    for frame in ("requests", "logs", "totals"):
        assert getattr(page.cache, frame).equals(getattr(report, frame)), frame
    kept = set(report.logs["log"])
    assert set(page.origins) == kept
    assert set(page.headers["log"]) <= kept and set(page.findings.tally["log"]) <= kept


def test_report_takes_the_filters_and_says_what_it_left_out(home: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    result = audit("report", "--since", "2026-12-01", "-o", str(page), str(home))
    assert result.exit_code == 0, result.stderr
    totals = json.loads(audit("cache-report", "--json", "--rows", "totals", "--since", "2026-12-01",
                              str(home)).stdout)["rows"][0]
    assert f"2 session log(s), {totals['requests']} request(s), {totals['collapses']} collapse(s)" in result.stdout
    assert "audit: 1 of 3 log(s) have no call the filters keep, and are left out" in result.stderr
    assert "session-shop-api" not in page.read_text(encoding="utf-8")
