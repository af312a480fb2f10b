"""Filters (--since/--until, --model, --project) and rollups (--by) against totals counted by hand on a built
home whose calls carry times, and the invariant that groups add up to the totals of the calls counted."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from dsh_audit.cli import main
from dsh_audit.log_filter import moment_ms, zone
from dsh_audit.reports.cache_report import build_cache_report
from dsh_audit.reports.filters import CallFilter, filtered
from dsh_audit.reports.rollup import ROLLUP_COLUMNS, ROLLUPS, rollup
from logbuilder import LogBuilder
from test_cache_report import TOOL_A, TOOL_B, steady_log, turn, write_jsonl

REPO = Path(__file__).resolve().parents[1]


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def timed(log: LogBuilder, turns: dict[int, str]) -> LogBuilder:
    """Each event of turn N logged at turns[N] (UTC), a second after the one before it."""
    current, offset = 1, 0
    for event in log.events:
        if event["type"] == "turn/start":
            current, offset = event["data"]["turn"], 0
        event["time"] = _ms(turns[current]) + offset
        offset += 1000
    return log


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two sessions: /work/shop (2 requests on Monday 2026-11-30, a third on Tuesday that collapses on a tool
    change) and /work/shop-api (2 requests on Sunday 2026-11-29, the week before, at 23:30 UTC: Monday in
    Shanghai)."""
    root = tmp_path_factory.mktemp("home")
    shop = steady_log()
    turn(shop, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
    timed(shop, {1: "2026-11-30T10:00", 2: "2026-11-30T11:00", 3: "2026-12-01T09:00"})
    api = timed(steady_log(), {1: "2026-11-29T23:30", 2: "2026-11-29T23:40"})
    for log, name, project in ((shop, "session-aaaa1111", "shop"), (api, "session-bbbb2222", "shop-api")):
        log.header |= {"id": name, "cwd": f"/work/{project}"}
        folder = root / name
        folder.mkdir()
        write_jsonl(log, folder / "session.jsonl")
    return root


def groups(home: Path, by: str, zone_name: str = "UTC") -> dict[str | None, dict[str, Any]]:
    return {row["group"]: row for row in rollup(build_cache_report([home]), by, zone_name).to_dicts()}


def test_days_weeks_and_months_count_what_was_logged_in_them(home: Path) -> None:
    days = groups(home, "day")
    assert list(days) == ["2026-11-29", "2026-11-30", "2026-12-01"]
    assert [(row["sessions"], row["requests"], row["inputTokens"], row["cacheReadTokens"], row["collapses"])
            for row in days.values()] == [(1, 2, 600, 512, 0), (1, 2, 600, 512, 0), (1, 1, 300, 0, 1)]
    assert {week: row["requests"] for week, row in groups(home, "week").items()} == {"2026-11-23": 2,
                                                                                     "2026-11-30": 3}
    assert {month: row["requests"] for month, row in groups(home, "month").items()} == {"2026-11": 4,
                                                                                       "2026-12": 1}


def test_days_are_those_of_the_time_zone_given(home: Path) -> None:
    days = groups(home, "day", "Asia/Shanghai")
    assert {day: row["requests"] for day, row in days.items()} == {"2026-11-30": 4, "2026-12-01": 1}


def test_projects_and_models_rank_by_what_collapses_lost(home: Path) -> None:
    projects = groups(home, "project")
    assert list(projects) == ["/work/shop", "/work/shop-api"]
    assert projects["/work/shop"]["requests"] == 3 and projects["/work/shop"]["collapseCostUsd"] > 0
    assert {model: row["requests"] for model, row in groups(home, "model").items()} == {"deepseek-v4-flash": 5}


@pytest.mark.parametrize("by", ROLLUPS)
@pytest.mark.parametrize("chosen", [CallFilter(), CallFilter(since_ms=_ms("2026-11-30T00:00")),
                                    CallFilter(projects=("/work/shop-api",))])
def test_the_groups_add_up_to_the_totals(home: Path, by: str, chosen: CallFilter) -> None:
    report = filtered(build_cache_report([home]), chosen)
    assert_adds_up(rollup(report, by), report.totals.to_dicts()[0])


def assert_adds_up(grouped: pl.DataFrame, totals: dict[str, object]) -> None:
    assert grouped.schema == pl.Schema(ROLLUP_COLUMNS)
    for column in ("requests", "inputTokens", "cacheReadTokens", "outputTokens", "collapses", "unexplained"):
        assert grouped[column].sum() == totals[column], column
    for column in ("costUsd", "collapseCostUsd"):
        assert grouped[column].sum() == pytest.approx(totals[column] or 0), column


def test_every_generation_adds_up() -> None:
    """The committed sample logs and wild fixtures: every generation of the log format, without logged times."""
    logs = [REPO / "sample_logs", REPO / "tests" / "fixtures" / "wild"]
    report = build_cache_report(logs, all_generations=True)
    assert report.requests["log"].n_unique() > 1
    for by in ROLLUPS:
        assert_adds_up(rollup(report, by), report.totals.to_dicts()[0])


def test_a_filter_keeps_each_verdict_and_sums_the_logs_again(home: Path) -> None:
    report = filtered(build_cache_report([home]), CallFilter(since_ms=_ms("2026-12-01T00:00")))
    [row] = report.requests.to_dicts()
    assert (row["turn"], row["collapse"], row["cause"]) == (3, True, "header-change")   # judged against turn 2
    assert report.logs["requests"].to_list() == [1] and report.totals["logs"][0] == 1
    assert report.logs["collapseCostUsd"][0] == pytest.approx(row["collapseCostUsd"])


def test_until_and_project_and_model(home: Path) -> None:
    whole = build_cache_report([home])
    before = filtered(whole, CallFilter(until_ms=_ms("2026-11-30T00:00")))
    assert before.requests["log"].unique().to_list() == [str(home / "session-bbbb2222" / "session.jsonl")]
    # a prefix of directories, not of text: /work/shop is not /work/shop-api
    assert filtered(whole, CallFilter(projects=("/work/shop",))).totals["requests"][0] == 3
    assert filtered(whole, CallFilter(projects=("/work",))).totals["requests"][0] == 5
    assert filtered(whole, CallFilter(models=("deepseek-flash",))).totals["logs"][0] == 0
    assert filtered(whole, CallFilter(models=("deepseek-v4-flash",))).totals["requests"][0] == 5


def test_a_time_of_either_kind() -> None:
    now = datetime(2026, 12, 6, 12, tzinfo=UTC)
    utc = zone(None)
    assert moment_ms("7d", zone=utc, now=now) == _ms("2026-11-29T12:00")
    assert moment_ms("24h", zone=utc, now=now) == _ms("2026-12-05T12:00")
    assert moment_ms("2026-12-01", zone=utc, now=now) == _ms("2026-12-01T00:00")
    assert moment_ms("2026-12-01", zone=utc, now=now, end=True) == _ms("2026-12-02T00:00")   # the whole day
    assert moment_ms("2026-12-01T09:30", zone=zone("Asia/Shanghai"), now=now) == _ms("2026-12-01T01:30")
    assert moment_ms("2026-12-01T09:30+00:00", zone=zone("Asia/Shanghai"), now=now) == _ms("2026-12-01T09:30")


def test_the_command_line(home: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(main, ["cache-report", "--by", "day", "--format", "json", "--until", "2026-11-30",
                                str(home)])
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert document["schema"] == "dsh-audit/cache-report/rollup"
    assert [(row["group"], row["requests"]) for row in document["rows"]] == [("2026-11-29", 2), ("2026-11-30", 2)]
    done = runner.invoke(main, ["cache-report", "--rows", "totals", "--format", "json", "--project",
                                "/work/shop-api", str(home)])
    assert json.loads(done.stdout)["rows"][0]["requests"] == 2
    assert done.stderr == "audit: 1 of 2 log(s) have no call the filters keep, and are left out\n"
    done = runner.invoke(main, ["cache-report", "--since", "last tuesday", str(home)])
    assert done.exit_code == 2 and "--since" in done.stderr and not done.stdout
    done = runner.invoke(main, ["sessions", "--root", str(home), "--format", "json", "--project", "/work/shop"])
    assert [session["cwd"] for session in json.loads(done.stdout)["sessions"]] == ["/work/shop"]
    for since, listed in (("1d", 2), ("2000-01-01", 2)):   # by last activity: the files were written just now
        done = runner.invoke(main, ["sessions", "--root", str(home), "--format", "json", "--since", since])
        assert len(json.loads(done.stdout)["sessions"]) == listed
    done = runner.invoke(main, ["sessions", "--root", str(home), "--format", "json", "--until", "2000-01-01"])
    assert json.loads(done.stdout)["sessions"] == []


def test_an_old_call_costs_what_it_cost_that_day(tmp_path: Path) -> None:
    """Priced by the dated table: a request of July 2026 at V4 Flash's flat rate, one of December at V4.1-Flash's
    off-peak rate (a Sunday); each month's group costs what its calls did."""
    log = timed(steady_log(), {1: "2026-07-05T10:00", 2: "2026-12-06T10:00"})
    report = build_cache_report([write_jsonl(log, tmp_path / "session.jsonl")])
    [july, december] = report.requests.to_dicts()
    assert (july["priceTier"], december["priceTier"]) == ("flat", "off-peak")
    assert july["costUsd"] == pytest.approx((300 * 0.14 + 10 * 0.28) / 1e6)
    assert december["costUsd"] == pytest.approx((300 * 0.15 + 512 * 0.003 + 10 * 0.6) / 1e6)
    months = {row["group"]: row["costUsd"] for row in rollup(report, "month").to_dicts()}
    assert months == {"2026-07": pytest.approx(july["costUsd"]), "2026-12": pytest.approx(december["costUsd"])}
