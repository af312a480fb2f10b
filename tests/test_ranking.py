"""Worst first: the sessions of a home ranked by what their cache collapses lost, cut to the first N or to the
collapses, named by the shortest start of their id, and every `audit explain` command the views print finds the
request it names."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_audit.cli import main
from dsh_audit.cli.options import SORT_KEYS as OPTION_KEYS
from dsh_audit.readers.home import SessionInfo
from dsh_audit.reports.cache_report import build_cache_report
from dsh_audit.reports.ranking import SORT_KEYS, ranked, short_ids
from dsh_audit.sessions import ranked as ranked_sessions
from test_views import collapsing_home

BILLING, SHOP, DOCS, SHOP_API = "e9c4d2b1", "3f2a91c0-7", "b7e01d44", "3f2a91c0-0"


def run(*args: str, env: dict[str, str] | None = None, columns: int = 120) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": str(columns), **(env or {})})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return collapsing_home(Path("sessions"))


def test_an_id_is_named_by_the_shortest_start_no_other_shares() -> None:
    assert short_ids(["session-abcdef12-aaaa", "session-abcdef12-bbbb", "session-1234567890ab", "x", None,
                      "session-same", "session-same"]) == ["abcdef12-a", "abcdef12-b", "12345678", "x", None, None,
                                                           None]
    assert short_ids(["session-0123456789", "session-0123456789ab"]) == ["0123456789", "0123456789a"]


def test_the_command_line_offers_the_keys_the_ranking_knows() -> None:
    assert OPTION_KEYS == SORT_KEYS


def test_each_key_ranks_the_sessions(home: Path) -> None:
    report = build_cache_report([home])

    def order(key: str) -> list[str]:   # each log by its project's folder
        return [label.split("/")[1] for label in ranked(report, sort=key).logs["log"].to_list()]

    assert order("lost")[:2] == ["--work-billing--", "--work-shop--"]   # then the dearer of the two that lost nothing
    assert order("cost")[0] == "--work-billing--" and order("hit")[0] == "--work-billing--"
    assert order("requests")[0] == "--work-shop--"
    assert order("path") == sorted(order("path")) == [label.split("/")[1] for label in report.logs["log"]]


def test_top_and_collapses_only_cut_the_rows_and_keep_the_totals(home: Path) -> None:
    report = build_cache_report([home])
    top = ranked(report, sort="lost", top=1)
    assert top.logs.height == 1 and set(top.requests["log"]) == set(top.logs["log"])
    assert top.totals.equals(report.totals)
    only = ranked(report, sort="path", collapses_only=True)
    assert only.logs.height == 2 and only.requests.height == 3 and only.requests["collapse"].all()


def test_the_machine_formats_keep_their_columns_and_rank_only_when_asked(home: Path) -> None:
    _, plain, _ = run("cache-report", "--format", "json", "--rows", "logs", str(home))
    _, worst, _ = run("cache-report", "--format", "json", "--rows", "logs", "--sort", "lost", "--top", "1",
                      str(home))
    every, first = json.loads(plain), json.loads(worst)
    assert every["schema"] == first["schema"] == "dsh-audit/cache-report/logs"
    assert [row["log"] for row in every["rows"]] == sorted(row["log"] for row in every["rows"])
    assert len(first["rows"]) == 1 and first["rows"][0].keys() == every["rows"][0].keys()
    assert "billing" in first["rows"][0]["log"]
    _, collapses, _ = run("cache-report", "--format", "json", "--collapses-only", str(home))
    assert [(row["turn"], row["cause"]) for row in json.loads(collapses)["rows"]] == [
        (4, "unexplained"), (3, "header-change"), (5, "unexplained")]   # billing's, then shop's, in path order


def test_the_table_honours_rows(home: Path) -> None:
    _, logs, _ = run("cache-report", "--rows", "logs", str(home))
    assert logs.startswith("4 session(s) by what cache collapses lost, most first:")
    assert "  call " not in logs and "3 worst request(s) of 3 collapse(s):" in logs
    _, totals, _ = run("cache-report", "--rows", "totals", str(home))
    assert totals.startswith("4 log(s), 13 request(s)") and "session(s) by" not in totals
    _, single, _ = run("cache-report", str(next(home.rglob("session.jsonl"))))
    assert "session(s) by" not in single   # one log: its calls are the answer
    _, by_cost, _ = run("cache-report", "--rows", "logs", "--sort", "cost", "--top", "2", str(home))
    assert by_cost.startswith("2 of 4 session(s) by cost, highest first:")


def _explain_commands(view: str) -> list[list[str]]:
    return [shlex.split(line.split("why: audit explain ", 1)[1]) for line in view.splitlines()
            if "why: audit explain " in line]


@pytest.mark.parametrize("given", [True, False])
def test_every_explain_command_finds_its_request(home: Path, given: bool) -> None:
    """Below a folder given and below dsh's own session root, each command names the session by its short id;
    explain finds the request and agrees on whether it is explained."""
    env = {"DSH_HOME": str(Path.cwd())}   # its session root is the home's folder, `sessions`
    _, view, _ = run("cache-report", *([str(home)] if given else []), env=env, columns=1000)
    commands = _explain_commands(view)
    assert len(commands) == 3 + 3   # the worst requests, then each collapse under its log
    for command in commands:
        assert "--session" in command and command[-2] in (BILLING, SHOP), command
        assert (command[0] == str(home)) == given
        code, shown, error = run("explain", *command, env=env)
        assert code == (0 if command[-1] == "3.1#1" else 1), (command, shown, error)


def test_a_log_explain_would_not_pick_by_its_id_is_named_by_its_path(home: Path) -> None:
    copy = home / "--work-copy--" / "elsewhere"
    copy.mkdir(parents=True)
    shutil.copy(next((home / "--work-billing--").rglob("session.jsonl")), copy / "session.jsonl")
    _, view, _ = run("cache-report", str(home), columns=1000)
    lines = [line for line in view.splitlines() if "4.1#1" in line and "why:" in line]
    assert lines and all("--session" not in line and "session.jsonl" in line for line in lines)


def test_fail_on_unexplained_names_the_command_that_finds_it(home: Path) -> None:
    code, _, error = run("cache-report", "--fail-on-unexplained", "--format", "json", str(home))
    assert code == 1 and f"audit explain {home} --session {BILLING} 4.1#1" in error


def test_audit_sessions_ranks_by_what_was_lost(home: Path) -> None:
    _, table, _ = run("sessions", "--root", str(home))
    ids = [line.split()[0] for line in table.splitlines()[1:5]]
    assert ids == ["e9c4d2b1", "3f2a91c0-7", "3f2a91c0-0", "b7e01d44"]
    # one naming rule and one money format: the rows of cache-report's ranked sessions, word for word
    _, report, _ = run("cache-report", "--rows", "logs", str(home), columns=200)
    ranked: dict[str, list[str]] = {}
    for words in (line.split() for line in report.splitlines()):   # session, model, requests, hit, %, cost, ...
        if len(words) > 5 and words[1].startswith("deepseek"):
            ranked.setdefault(words[0], words)
    _, wide, _ = run("sessions", "--root", str(home), columns=200)
    for words in (line.split() for line in wide.splitlines()[1:5]):   # id, last, gen, requests, hit, %, cost, ...
        name, hit, cost, lost = words[0], words[4], words[6], words[7] if words[7].startswith("$") else None
        assert (ranked[name][3], ranked[name][5]) == (hit, cost) and lost in (None, ranked[name][-1]), words
    assert table.splitlines()[0].split()[-5:] == ["HIT", "COST", "LOST", "SIZE", "CWD"]
    _, document, _ = run("sessions", "--root", str(home), "--format", "json", "--sort", "hit", "--top", "1")
    [worst] = json.loads(document)["sessions"]
    assert worst["id"].startswith(f"session-{BILLING}") and 0 < worst["hitRatio"] < 0.3 and worst["lostUsd"] > 0


def test_sessions_without_a_figure_rank_last() -> None:
    def info(name: str, lost: float | None, error: str | None = None) -> SessionInfo:
        from datetime import UTC, datetime
        return SessionInfo(name, Path(name), Path(), None, 0, 0, datetime.fromtimestamp(0, UTC), lost_usd=lost,
                           cost_usd=lost, hit_ratio=lost, error=error)

    infos = [info("a", None, "torn"), info("b", 0.0), info("c", 2.0), info("d", None)]
    assert [i.session_id for i in ranked_sessions(infos, "lost")] == ["c", "b", "d", "a"]
    assert [i.session_id for i in ranked_sessions(infos, "hit")] == ["b", "c", "a", "d"]
