"""cache-report: logged figures against hand counts, collapse attribution, prediction, cost, CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from dsh_audit.cli import main
from dsh_audit.reports.cache_report import CacheOptions, agreement, build_cache_report, log_rows
from dsh_audit.reports.prices import Prices, default_table, flat_table
from logbuilder import LogBuilder

LOGS = Path(__file__).resolve().parents[2] / "shared" / "dsh-logs"
TOOL_A = {"name": "read", "description": "read a file", "parameters": {"type": "object", "properties": {}}}
TOOL_B = {"name": "write", "description": "write a file", "parameters": {"type": "object", "properties": {}}}
needs_logs = pytest.mark.skipif(not LOGS.is_dir(), reason="shared dsh-logs corpus not present")


def usage(fresh: int, reads: int, output: int = 10) -> dict[str, int]:
    return {"inputTokens": fresh, "cacheReadTokens": reads, "outputTokens": output}


def turn(log: LogBuilder, number: int, prompt: str, reads: int, **header: Any) -> None:
    """One turn of one step; `header` (reason=...) logs a request/header before the request."""
    log.add("turn/start", {"turn": number})
    log.add("step/start", {"turn": number, "step": 1})
    log.user(prompt)
    if header:
        log.header_event(header.pop("reason"), **header)
    log.response(number, 1, f"answer {number} " + "word " * 200, usage=usage(300, reads))
    log.add("step/end", {"turn": number, "step": 1})
    log.add("turn/end", {"turn": number, "reason": {"kind": "completed"}})


def rows(log: LogBuilder, **options: Any) -> list[dict[str, Any]]:
    return log_rows(log.source(), CacheOptions(**options))


def collapses(found: list[dict[str, Any]]) -> list[tuple[int, str | None]]:
    return [(row["turn"], row["cause"]) for row in found if row["collapse"]]


def write_jsonl(log: LogBuilder, path: Path) -> Path:
    path.write_text("\n".join(json.dumps(line) for line in [log.header, *log.events]) + "\n", encoding="utf-8")
    return path


def steady_log() -> LogBuilder:
    log = LogBuilder()
    turn(log, 1, "hello " * 100, 0, reason="initial", tools=[TOOL_A])
    turn(log, 2, "again " * 100, 512)
    return log


# -- synthetic logs: each collapse names its logged cause -------------------------------------------------
def test_mid_session_tool_change_is_the_named_cause() -> None:
    log = steady_log()
    turn(log, 3, "more", 0, reason="change", tools=[TOOL_A, TOOL_B])
    found = rows(log)
    assert collapses(found) == [(3, "header-change")]
    assert "tools" in found[-1]["causeDetail"]
    # the prediction sees the break too: the new tool list sits in the system area, before every message
    assert found[-1]["predictedCacheTokens"] < found[1]["predictedCacheTokens"]


def test_compaction_replace_is_the_named_cause() -> None:
    log = steady_log()
    log.add("turn/start", {"turn": 3})
    log.add("step/start", {"turn": 3, "step": 1})
    log.user("summary of earlier turns", surfaceOp={"op": "replace", "start": 2, "end": 16},
             sourceEventSeqs=[2, 7, 12, 16])  # every node it shadows
    log.response(3, 1, "ok", usage=usage(200, 0))
    found = rows(log)
    assert collapses(found) == [(3, "compaction-replace")]


def test_resume_is_the_named_cause() -> None:
    log = steady_log()
    turn(log, 3, "after restart", 0, reason="resume", tools=[TOOL_A], temperature=0.5)
    found = rows(log)
    assert collapses(found) == [(3, "header-change")]   # a resume with drift: the drift is named
    assert found[-1]["causeDetail"].startswith("seq") and "resume: config.temperature" in found[-1]["causeDetail"]
    quiet = steady_log()
    turn(quiet, 3, "after restart", 0, reason="resume", tools=[TOOL_A])
    assert collapses(rows(quiet)) == [(3, "resume")]


def test_a_collapse_with_no_logged_cause_is_unexplained() -> None:
    log = steady_log()
    turn(log, 3, "later", 0)
    found = rows(log)
    assert collapses(found) == [(3, "unexplained")]
    assert found[0]["cause"] == "first-request" and not found[0]["collapse"]


def test_threshold_is_configurable() -> None:
    log = steady_log()
    turn(log, 3, "later", 384)              # 384 of 512 reads: 75% of its predecessor
    assert collapses(rows(log)) == []
    assert collapses(rows(log, collapse_ratio=0.9)) == [(3, "unexplained")]


def test_prediction_counts_previous_answer_and_rounds_to_blocks() -> None:
    found = rows(steady_log(), block=64)
    second = found[1]
    assert second["predictedPrefixTokens"] > found[0]["promptTokens"]   # the answer is cached too
    assert second["predictedCacheTokens"] % 64 == 0
    assert second["predictedPrefixTokens"] - second["predictedCacheTokens"] < 64
    assert not second["approximate"]                 # real system prompt and tools: an exact linearization
    logged = 300 + 0 + 10                            # the provider's own count of turn 1 prompt + answer
    assert second["loggedBasisCacheTokens"] == logged - logged % 64


def test_placeholders_are_flagged_not_guessed() -> None:
    log = LogBuilder()
    turn(log, 1, "hi", 0, reason="initial", system="{{system}}", tools="{{tools}}")
    (row,) = rows(log)
    assert row["approximate"] and "{{system}}" in row["note"] and "tools scrubbed" in row["note"]
    (real,) = log_rows(log.source(), CacheOptions(system="You are helpful.", tools=[TOOL_A]))
    assert not real["approximate"] and real["promptTokens"] > row["promptTokens"]


def test_cost_uses_published_prices_or_configured_ones() -> None:
    (row,) = rows(_one_request())   # time 0 in this log: no time logged, so the off-peak rate
    flash = default_table().models["deepseek-flash"]
    assert row["costUsd"] == pytest.approx(0.5 * (300 * flash.cache_miss + 10 * flash.output) / 1e6)
    assert (row["priceModel"], row["priceTier"]) == ("deepseek-flash (as deepseek-v4-flash)",
                                                     "off-peak (no time logged)")
    (priced,) = rows(_one_request(), prices=flat_table(Prices(cache_hit=1, cache_miss=2, output=3)))
    assert priced["costUsd"] == pytest.approx((300 * 2 + 10 * 3) / 1e6) and priced["priceModel"] == "configured"


def _one_request() -> LogBuilder:
    log = LogBuilder()
    turn(log, 1, "hi", 0, reason="initial")
    return log


# -- the shared corpus -------------------------------------------------------------------------------------
def _hand_count(log: Path) -> dict[str, int]:
    """Sum of the usage chunks, read straight off the JSON lines (no fold involved)."""
    totals = {"inputTokens": 0, "cacheReadTokens": 0, "outputTokens": 0, "requests": 0}
    for line in log.read_text(encoding="utf-8").splitlines()[1:]:
        event = json.loads(line)
        chunk = (event.get("data") or {}).get("chunk") if isinstance(event.get("data"), dict) else None
        if event.get("type") == "assistant/chunk" and isinstance(chunk, dict) and chunk.get("type") == "usage":
            totals["requests"] += 1
            for key in ("inputTokens", "cacheReadTokens", "outputTokens"):
                totals[key] += chunk["usage"].get(key, 0)
    return totals


@needs_logs
@pytest.mark.parametrize("scenario", ["apps/web/tests/snapshots/cordis-tool-round",
                                      "apps/web/tests/snapshots/permission-policy-context",
                                      "examples/acp-agent/tests/snapshots/both-mode-turn",
                                      "examples/acp-agent/tests/snapshots/pwsh-tool-turn"])
def test_logged_figures_equal_a_hand_count(scenario: str) -> None:
    log = LOGS / scenario / "session.jsonl"
    summary = build_cache_report([log]).logs.to_dicts()[0]
    expected = _hand_count(log)
    assert {key: summary[key] for key in expected} == expected


@needs_logs
def test_hit_ratio_matches_the_reference_ui() -> None:
    # apps/web plan-review's expected UI text shows "Cache hit 51%  Input 10.2K"
    summary = build_cache_report([LOGS / "apps/web/tests/snapshots/plan-review"]).logs
    assert round(summary["hitRatio"][0] * 100) == 51
    assert round((summary["inputTokens"][0] + summary["cacheReadTokens"][0]) / 100) == 102


@needs_logs
def test_every_collapse_in_the_corpus_is_attributed_and_inherited_usage_is_not_totalled() -> None:
    report = build_cache_report([LOGS])
    requests = report.requests.filter(pl.col("kind") == "request")
    assert requests.filter(pl.col("collapse") & pl.col("cause").is_null()).height == 0
    total = report.totals.to_dicts()[0]
    own = requests.filter(~pl.col("inherited"))
    assert requests.filter(pl.col("inherited")).height > 0
    assert total["requests"] == own.height
    assert total["cacheReadTokens"] == report.requests.filter(~pl.col("inherited"))["cacheReadTokens"].fill_null(
        0).sum()
    assert report.logs["costUsd"].sum() == pytest.approx(total["costUsd"])


@needs_logs
def test_agreement_is_measured_at_both_block_sizes() -> None:
    for block in (64, 128):
        report = build_cache_report([LOGS], CacheOptions(block=block))
        agreeing, compared = agreement(report, basis="logged")
        assert compared > 0 and 0 <= agreeing <= compared
        tokenizer_agreeing, tokenizer_compared = agreement(report)
        assert tokenizer_compared >= compared and 0 <= tokenizer_agreeing <= tokenizer_compared


# -- CLI -----------------------------------------------------------------------------------------------------
def test_cli_formats_and_exit_codes(tmp_path: Path) -> None:
    log = steady_log()
    turn(log, 3, "later", 0)
    path = write_jsonl(log, tmp_path / "session.jsonl")
    runner = CliRunner()
    table = runner.invoke(main, ["cache-report", str(path)])
    assert table.exit_code == 0 and "unexplained" in table.output
    failing = runner.invoke(main, ["cache-report", str(path), "--fail-on-unexplained", "--format", "json"])
    assert failing.exit_code == 1
    assert "3.1#1" in failing.stderr and "audit explain" in failing.stderr
    parsed = json.loads(failing.stdout)
    assert (parsed["schema"], parsed["version"], len(parsed["rows"])) == ("dsh-audit/cache-report/requests", 2, 3)
    out = tmp_path / "report.parquet"
    assert runner.invoke(main, ["cache-report", str(tmp_path), "--out", str(out)]).exit_code == 0
    assert pl.read_parquet(out).height == 3
    csv = runner.invoke(main, ["cache-report", str(path), "--format", "csv", "--rows", "logs"])
    assert csv.exit_code == 0 and csv.stdout.splitlines()[0].startswith("log,generation,")
    assert len(csv.stdout.splitlines()) == 2


def test_cli_unreadable_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "session.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    for target in (bad, tmp_path / "missing.jsonl"):
        result = CliRunner().invoke(main, ["cache-report", str(target)])
        assert result.exit_code == 2
        assert result.stderr.startswith("audit: ") and len(result.stderr.strip().splitlines()) == 1


def test_no_predict_keeps_logged_figures_collapses_and_causes() -> None:
    log = steady_log()
    turn(log, 3, "later", 0)
    predicted, logged_only = rows(log), rows(log, predict=False)
    assert collapses(logged_only) == collapses(predicted) == [(3, "unexplained")]
    for full, lean in zip(predicted, logged_only, strict=True):
        assert (lean["cacheReadTokens"], lean["inputTokens"], lean["cause"]) == (
            full["cacheReadTokens"], full["inputTokens"], full["cause"])
        assert lean["predictedCacheTokens"] is None and "no prediction" in lean["note"]
