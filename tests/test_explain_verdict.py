"""explain agrees with the logged usage: it carries cache-report's verdict on the request's row (reports.verdict),
on every request of the wild lyteboat logs (native v4, real DeepSeek usage) and of the corpus logs with usage; a
first request that read from another session's cache says so, a request without a collapse is healthy with its
hit, and a collapse shows the read it collapsed from, in every view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT, session_log_paths
from dsh_audit.cli import main
from dsh_audit.errors import DshAuditError
from dsh_audit.explain import explain_request
from dsh_audit.readers import open_logs
from dsh_audit.reports.cache_report import build_cache_report
from dsh_audit.reports.verdict import unexplained, verdict
from test_cache_report import TOOL_A, steady_log, turn, write_jsonl
from test_hostile_inputs import build_store
from test_views import collapsing_log

WILD = Path(__file__).parent / "fixtures/wild/lyteboat-boat"
WILD_LOGS = sorted(WILD.rglob("session.v4.jsonl"))
OVERVIEW = WILD / "examples/agents/finance/evals/baseline/sessions/overview-then-diagnosis/session.v4.jsonl"


def request_rows(path: Path) -> list[dict[str, Any]]:
    """cache-report's judged request rows of one log, as `audit cache-report LOG` reads it."""
    return [row for row in build_cache_report([path]).requests.to_dicts() if row["kind"] == "request"]


def assert_explain_agrees(path: Path) -> int:
    """explain's verdict on every request of `path` is cache-report's on its row, unexplained (exit 1) exactly
    where cache-report's gate fails, with the row's cost and block; the requests compared. A request explain
    cannot compare (no request/header in force) is no unexplained collapse either."""
    rows = request_rows(path)
    for at, row in enumerate(rows):
        [source] = [source for source in open_logs(path) if source.label == row["log"]]
        before = rows[at - 1] if at and rows[at - 1]["log"] == row["log"] else None
        try:
            explanation = explain_request(source, row["turn"], row["step"], row["attempt"])
        except DshAuditError as error:
            assert "no request/header in force" in error.message and not unexplained(row), (path, row["seq"])
            continue
        assert explanation.cache == verdict(row), (path, explanation.name)
        assert explanation.unexplained is unexplained(row), (path, explanation.name)
        assert explanation.collapse_cost_usd == row["collapseCostUsd"] and explanation.cache_block == 128
        # the time since the predecessor is read from the row before: the predecessor explain compares with
        assert explanation.predecessor == (None if before is None else
                                           f"{before['turn']}.{before['step']}#{before['attempt']}")
    return len(rows)


def test_explain_agrees_with_cache_report_on_every_request_of_the_wild_logs() -> None:
    kinds = []
    for path in WILD_LOGS:
        assert_explain_agrees(path)
        kinds += [verdict(row).kind for row in request_rows(path)]
    # Every first request with usage read from the provider's cache of another session: none is "nothing was
    # cached"; the recorded fixture logs no usage.
    assert sorted(kinds) == sorted(["cross-session-read"] * 4 + ["healthy"] * 5 + ["collapse", "no-usage"])


@pytest.mark.skipif(not session_log_paths(), reason=f"shared corpus {LOGS_ROOT} not present")
def test_explain_agrees_with_cache_report_on_every_request_of_the_corpus_logs() -> None:
    paths = [LOGS_ROOT / path for path in session_log_paths()]
    with_usage = [path for path in paths if any(row["cacheReadTokens"] is not None for row in request_rows(path))]
    assert len(paths) >= 50 and len(with_usage) >= 30
    assert sum(map(assert_explain_agrees, paths)) >= 210


def explain(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["explain", *args, "--color", "never"], env={"COLUMNS": "200"})
    return result.exit_code, result.stdout


def test_a_first_request_says_what_the_provider_read_from_another_session() -> None:
    code, out = explain(str(OVERVIEW), "1.1")
    assert code == 0
    assert out.splitlines()[1] == ("first request of the log; the provider read 512 tokens from its cache, from "
                                   "another session; hit 40.9 % of 1,251 prompt tokens")
    assert "nothing was cached" not in out


def test_a_request_without_a_collapse_is_healthy_with_its_hit() -> None:
    code, out = explain(str(OVERVIEW), "1.2")
    assert code == 0
    assert out.splitlines()[1] == "healthy: read 1,280, expected 1,280; hit 80.3 % of 1,595 prompt tokens"
    assert "collapse" not in out


def test_a_collapse_shows_the_read_it_collapsed_from_in_every_view(tmp_path: Path) -> None:
    code, out = explain(str(OVERVIEW), "2.1")
    assert code == 0   # a tools change the log records
    assert out.splitlines()[1].startswith("collapse (header-change): read 384 (was 1,280), expected 384; hit 20.4 %")
    table = CliRunner().invoke(main, ["cache-report", str(OVERVIEW), "--color", "never"], env={"COLUMNS": "200"})
    assert "2.1#1: collapse (header-change): read 384 (was 1,280), expected 384" in table.stdout
    lines = [line.split() for line in table.stdout.splitlines()]
    header = next(line for line in lines if line[:2] == ["call", "seq"])   # side-call rows and notes around it
    [collapsed] = [line for line in lines if line[:1] == ["2.1#1"]]
    assert header[header.index("was") - 1:header.index("was") + 1] == ["read", "was"]
    assert collapsed[:6] == ["2.1#1", "35", "1.5K", "384", "1.3K", "20.4"]
    document = json.loads(CliRunner().invoke(main, ["cache-report", str(OVERVIEW), "--format", "json"]).stdout)
    requests = [row for row in document["rows"] if row["kind"] == "request"]   # side calls have no reads
    assert [row["previousCacheReadTokens"] for row in requests] == [None, 512, 1280, 384]
    assert CliRunner().invoke(main, ["report", str(OVERVIEW), "-o", str(tmp_path / "r.html")]).exit_code == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert '<th class="n">read</th><th class="n">was</th>' in page
    assert '<td class="n">384</td><td class="n">1.3K</td>' in page
    assert "read 384 (was 1,280), expected 384" in page


def test_an_unexplained_collapse_where_the_prompt_extends_is_the_provider_s_own_and_exit_1(tmp_path: Path) -> None:
    path = str(collapsing_log(tmp_path))
    code, out = explain(path, "5.1")
    assert code == 1
    assert out.splitlines()[1] == "unexplained collapse: read 0 (was 640), expected 896; hit 0.0 % of 300 prompt tokens"
    assert "no divergence" in out and "is the provider's own (cache expiry or eviction)" in out
    document = json.loads(CliRunner().invoke(main, ["explain", path, "5.1", "--format", "json"]).stdout)
    assert document["cache"]["kind"] == "unexplained-collapse" and document["verdict"] == "extends"
    code, out = explain(path, "4.1")
    assert code == 0 and out.splitlines()[1].startswith("healthy: read 640, expected 256")
    assert "provider's own" not in out


def test_explain_gives_the_verdict_on_a_session_of_a_sqlite_store(tmp_path: Path) -> None:
    """A store's session, which cannot reopen itself, has its verdict: explain takes it from its one walk."""
    store = f"{build_store(tmp_path / 'store.db')}#s-1"
    rows = request_rows(Path(store))
    assert len(rows) == 3
    for row in rows:
        name = f"{row['turn']}.{row['step']}#{row['attempt']}"
        document = json.loads(CliRunner().invoke(main, ["explain", store, name, "--format", "json"]).stdout)
        assert document["cache"] == {"kind": verdict(row).kind, "text": verdict(row).text}
    code, out = explain(store, "1.1")
    assert code == 0
    assert out.splitlines()[1:] == ["no cache read logged (its usage has no cacheReadTokens): what the provider read "
                                    "from its cache is unknown", "cache block 128 tokens", "first request of the log"]


def test_a_collapse_after_a_change_of_request_options_alone_is_unexplained_in_both(tmp_path: Path) -> None:
    """A temperature change leaves the prompt an extension (no prefix break): cache-report calls the collapse
    after it unexplained, and explain says so and exits 1, listing the change it logged."""
    log = steady_log()
    turn(log, 3, "more", 0, reason="change", tools=[TOOL_A], temperature=0.5)
    path = write_jsonl(log, tmp_path / "session.jsonl")
    [row] = [row for row in request_rows(path) if row["turn"] == 3]
    assert (row["cause"], verdict(row).kind) == ("unexplained", "unexplained-collapse")
    code, out = explain(str(path), "3.1")
    assert code == 1
    assert out.splitlines()[1] == verdict(row).text
    assert "logged: seq 22 request/header (options-change: change: config.temperature)" in out


def test_explain_reads_the_log_once_and_gives_the_verdict_on_standard_input_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One walk gives the explanation and cache-report's rows for its verdict: the file is opened once, its events
    streamed once; a log on standard input, which can be read only once, has the same verdict as the file."""
    from test_one_walk import Reads

    path = collapsing_log(tmp_path)
    reads = Reads(monkeypatch)
    filed = CliRunner().invoke(main, ["explain", str(path), "5.1", "--format", "json"])
    assert (reads.opened, reads.streamed) == ({str(path): 1}, {str(path): 1})
    piped = CliRunner().invoke(main, ["explain", "-", "5.1", "--format", "json"], input=path.read_bytes())
    assert piped.exit_code == filed.exit_code, piped.output
    from_file, from_pipe = json.loads(filed.stdout), json.loads(piped.stdout)
    assert from_pipe["cache"] == from_file["cache"] and from_pipe["cache"]["kind"] == "unexplained-collapse"
    assert {**from_pipe, "log": None} == {**from_file, "log": None}
