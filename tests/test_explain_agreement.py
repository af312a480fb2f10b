"""explain and cache-report share one verdict per request (reports.verdict.unexplained): on generated collapse
cases — each cause cache-report names, none, an options change alone, an edit the log does not record — explain
exits 1 on a request exactly where `cache-report --fail-on-unexplained` fails naming it, and it agrees on every
request of the benchmark's generated logs; and explain shows the time since the predecessor, the cache block,
what the collapse cost and, for the provider's own, the evidence. (The corpus: tests/test_explain_verdict.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_audit.cli import main
from dsh_audit.explain import explain_request
from dsh_audit.readers import open_logs
from dsh_audit.reports.cache_report import build_cache_report
from dsh_audit.reports.verdict import unexplained, verdict
from logbuilder import LogBuilder
from test_cache_report import TOOL_A, TOOL_B, steady_log, turn, write_jsonl
from test_explain import edit_first_answer_unlogged

GENERATOR = Path(__file__).resolve().parents[1] / "benchmarks" / "generate_log.py"


def edited_answer(reads: int) -> LogBuilder:
    """Turn 1's answer edited after the model generated it (its block-end chunk says otherwise), no event saying
    so; turn 2 reads `reads`."""
    log = LogBuilder()
    turn(log, 1, "hello " * 100, 0, reason="initial", tools=[TOOL_A])
    edit_first_answer_unlogged(log)
    turn(log, 2, "again " * 100, reads)
    return log


def then(*turns: tuple[str, int, dict[str, Any]]) -> Callable[[], LogBuilder]:
    def build() -> LogBuilder:
        log = steady_log()
        for number, (prompt, reads, header) in enumerate(turns, start=3):
            turn(log, number, prompt, reads, **header)
        return log
    return build


# Each case: its log, and the requests cache-report calls unexplained collapses.
CASES: dict[str, tuple[Callable[[], LogBuilder], set[str]]] = {
    "tool change": (then(("more", 0, {"reason": "change", "tools": [TOOL_A, TOOL_B]})), set()),
    "resume": (then(("after restart", 0, {"reason": "resume", "tools": [TOOL_A]})), set()),
    "no cause": (then(("later", 0, {})), {"3.1#1"}),
    "options change alone": (then(("more", 0, {"reason": "change", "tools": [TOOL_A], "temperature": 0.5})),
                             {"3.1#1"}),
    "explained, healthy, then none": (then(("more", 0, {"reason": "change", "tools": [TOOL_A, TOOL_B]}),
                                           ("again " * 100, 640, {}), ("later", 0, {})), {"5.1#1"}),
    "unlogged edit, healthy read": (lambda: edited_answer(512), set()),
    "unlogged edit, collapse": (lambda: edited_answer(0), {"2.1#1"}),
}


def request_rows(path: Path) -> list[dict[str, Any]]:
    return [row for row in build_cache_report([path]).requests.to_dicts() if row["kind"] == "request"]


def name(row: dict[str, Any]) -> str:
    return f"{row['turn']}.{row['step']}#{row['attempt']}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_explain_and_cache_report_share_the_verdict_and_its_exit_code(case: str, tmp_path: Path) -> None:
    build, expected = CASES[case]
    log = build()
    path = write_jsonl(log, tmp_path / "session.jsonl")
    rows = request_rows(path)
    assert {name(row) for row in rows if unexplained(row)} == expected
    gate = CliRunner().invoke(main, ["cache-report", str(path), "--fail-on-unexplained", "--format", "json"])
    assert gate.exit_code == (1 if expected else 0), gate.stderr
    for row in rows:
        explanation = explain_request(log.source(), row["turn"], row["step"], row["attempt"])
        assert (explanation.cache, explanation.unexplained) == (verdict(row), name(row) in expected)
        assert explanation.collapse_cost_usd == row["collapseCostUsd"]
        code = CliRunner().invoke(main, ["explain", str(path), name(row), "--format", "json"]).exit_code
        assert code == (1 if name(row) in expected else 0), (case, name(row))
        assert (f"{name(row)} of " in gate.stderr) is (name(row) in expected)


def test_an_edit_the_log_does_not_record_is_shown_and_fails_only_with_a_collapse(tmp_path: Path) -> None:
    """The break is the log's (verify's prefix-break); whether it is unexplained is the provider's read's."""
    for reads, code, last in ((512, 0, "unlogged: message 1 as logged differs"),
                              (0, 1, "unexplained: message 1 as logged differs")):
        path = write_jsonl(edited_answer(reads), tmp_path / f"edited-{reads}.jsonl")
        result = CliRunner().invoke(main, ["explain", str(path), "2.1", "--color", "never"], env={"COLUMNS": "400"})
        assert result.exit_code == code
        assert result.stdout.splitlines()[-1].startswith(last)
        document = json.loads(CliRunner().invoke(main, ["explain", str(path), "2.1", "--format", "json"]).stdout)
        assert (document["verdict"], document["unexplained"]) == ("unlogged", bool(code))


def timed(log: LogBuilder, from_turn: int, later_ms: int | None) -> LogBuilder:
    """Every event at one moment, those from turn `from_turn`'s start `later_ms` later (None: no time logged)."""
    start = next(e["seq"] for e in log.events if e["type"] == "turn/start" and e["data"]["turn"] == from_turn)
    for event in log.events:
        if later_ms is None:
            del event["time"]
        else:
            event["time"] = 1_780_000_000_000 + (later_ms if event["seq"] >= start else 0)
    return log


@pytest.mark.parametrize(("later_ms", "sent", "evidence"), [
    (15_900, "sent 15.9 s after 2.1#1", "sent 15.9 s after 2.1#1, well within the cache's documented lifetime, "
                                        "so expiry is unlikely: the cache is best-effort"),
    (7_500_000, "sent 2 h 5 min after 2.1#1", "sent 2 h 5 min after 2.1#1, an hour or more: the cache may have "
                                              "expired"),
    (None, None, "the time since 2.1#1 is not logged: expiry cannot be weighed")])
def test_the_provider_s_own_collapse_is_weighed_against_the_cache_s_lifetime(
        later_ms: int | None, sent: str | None, evidence: str, tmp_path: Path) -> None:
    path = write_jsonl(timed(then(("later", 0, {}))(), 3, later_ms), tmp_path / "session.jsonl")
    [row] = [row for row in request_rows(path) if row["turn"] == 3]
    result = CliRunner().invoke(main, ["explain", str(path), "3.1", "--color", "never"], env={"COLUMNS": "400"})
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[1] == verdict(row).text and lines[1].startswith("unexplained collapse: read 0 (was 512)")
    cost = f"the collapse cost ${row['collapseCostUsd']:.6f}".rstrip("0")
    assert lines[2] == "; ".join(part for part in (sent, "cache block 128 tokens", cost) if part)
    assert lines[-1].startswith(f"evidence: {evidence}")
    assert "DeepSeek's Context Caching guide: a cache no longer in use is cleared within a few hours" in lines[-1]
    document = json.loads(CliRunner().invoke(main, ["explain", str(path), "3.1", "--format", "json"]).stdout)
    assert document["since_predecessor_ms"] == later_ms and document["cache_block"] == 128
    assert document["collapse_cost_usd"] == row["collapseCostUsd"] > 0
    assert document["evidence"].startswith(evidence) and document["unexplained"] is True


def test_a_collapse_a_logged_event_explains_has_its_cost_and_no_evidence(tmp_path: Path) -> None:
    log = timed(then(("more", 0, {"reason": "change", "tools": [TOOL_A, TOOL_B]}))(), 3, 4_000)
    path = write_jsonl(log, tmp_path / "session.jsonl")
    document = json.loads(CliRunner().invoke(main, ["explain", str(path), "3.1", "--format", "json"]).stdout)
    assert document["cache"]["kind"] == "collapse" and document["collapse_cost_usd"] > 0
    assert (document["since_predecessor_ms"], document["evidence"], document["unexplained"]) == (4_000, None, False)


@pytest.mark.parametrize("generation", ["0", "4"])
def test_explain_agrees_on_every_request_of_a_benchmark_log(generation: str, tmp_path: Path) -> None:
    """The benchmark's generator at 400 KB: 18 requests, one of them a collapse its compaction explains."""
    path = tmp_path / "bench.jsonl"
    subprocess.run([sys.executable, str(GENERATOR), "--size", "400KB", "--seed", "3", "--compaction", "once",
                    "--generation", generation, "--out", str(path)], check=True, capture_output=True, timeout=300)
    rows = request_rows(path)
    kinds = []
    for row in rows:
        [source] = open_logs(path)
        explanation = explain_request(source, row["turn"], row["step"], row["attempt"])
        assert (explanation.cache, explanation.unexplained) == (verdict(row), unexplained(row)), name(row)
        assert explanation.collapse_cost_usd == row["collapseCostUsd"]
        kinds.append(explanation.cache.kind)
    assert len(rows) == 18 and kinds.count("collapse") == 1 and kinds.count("healthy") >= 14
