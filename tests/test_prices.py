"""Cost that adds up: DeepSeek's price table by the time of each call (peak or off-peak), compaction calls
priced, a prices file instead, and every corpus log's cost equal to an independent sum of its usage."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT, require_corpus, session_log_paths
from dsh_audit.cli import main
from dsh_audit.reports.cache_report import CacheOptions, build_cache_report
from dsh_audit.reports.prices import default_table, load_table

TABLE = default_table()


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).astimezone(UTC).timestamp() * 1000)


@pytest.mark.parametrize(("when", "tier"), [
    ("2026-12-03T09:30:00+08:00", "peak"),        # a Thursday morning in Beijing
    ("2026-12-03T12:30:00+08:00", "off-peak"),    # the lunch break
    ("2026-12-03T17:59:00+08:00", "peak"),
    ("2026-12-03T18:00:00+08:00", "off-peak"),    # the window ends
    ("2026-12-05T10:00:00+08:00", "off-peak"),    # Saturday
    ("2026-10-02T10:00:00+08:00", "off-peak"),    # National Day holiday, a Friday
    ("2026-12-03T02:30:00+00:00", "peak"),        # the same hour given in UTC
])
def test_peak_hours_are_beijing_weekdays_outside_holidays(when: str, tier: str) -> None:
    priced = TABLE.price("deepseek-v4-pro", ms(when))
    assert priced.tier == tier
    peak = TABLE.models["deepseek-v4-pro"]
    assert priced.prices.cache_miss == (peak.cache_miss if tier == "peak" else peak.cache_miss * 0.5)


def test_models_aliases_and_the_fallback() -> None:
    assert TABLE.price("deepseek-flash", None).model == "deepseek-flash"
    assert TABLE.price("deepseek-v4-flash", None).model == "deepseek-flash (as deepseek-v4-flash)"
    assert TABLE.price("fake", None).model == "deepseek-flash (no price for fake)"
    assert TABLE.price("fake", None).tier == "off-peak (no time logged)"


def test_a_prices_file_replaces_the_table(tmp_path: Path) -> None:
    document = {"models": {"m": {"cacheHit": 1, "cacheMiss": 2, "output": 3}}, "fallback": "m", "perTokens": 1000}
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(document))
    table = load_table(path)
    assert table.price("anything", ms("2026-12-03T09:30:00+08:00")).prices.cost(1000, 1000, 1000) == 6
    path.write_text(json.dumps({"models": {}}))
    log = LOGS_ROOT / "apps/web/tests/snapshots/plan-review/session.jsonl"
    result = CliRunner().invoke(main, ["cache-report", "--no-predict", "--prices", str(path), str(log)])
    assert result.exit_code == 2 and "not a price table" in result.stderr and str(path) in result.stderr


# -- the corpus: cost equals an independent sum of the logged usage -----------------------------------------
def _usage_calls(path: Path) -> list[tuple[str | None, int | None, dict[str, Any]]]:
    """(model, time, usage) of every priced call, read off the JSON lines: the usage chunks of the loop's
    attempts (a message's own usage when its attempt logged none) and the compaction summaries. A child's
    inherited events (before seedLength) are its parent's calls."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    header, events = lines[0], lines[1:]
    seed = header.get("seedLength") if isinstance(header.get("seedLength"), int) else 0
    model: str | None = None
    calls, chunk_usage, position = [], False, 0
    for event in events:
        kind, data = event.get("type"), event.get("data") if isinstance(event.get("data"), dict) else {}
        inherited = position < seed
        position += len(data.get("texts") or data.get("args") or [None]) if kind.endswith("-chunks") else 1
        if kind == "request/header" and isinstance(data.get("header"), dict):
            model = (data["header"].get("config") or {}).get("model")
        elif kind == "assistant/chunk" and (data.get("chunk") or {}).get("type") == "usage":
            chunk_usage = True
            if not inherited:
                calls.append((model, event.get("time"), data["chunk"]["usage"]))
        elif kind == "assistant/message":
            if not chunk_usage and isinstance(data.get("usage"), dict) and not inherited:
                calls.append((model, event.get("time"), data["usage"]))
            chunk_usage = False
        elif kind == "compaction/summary" and isinstance(data.get("usage"), dict) and not inherited:
            calls.append((data.get("model"), event.get("time"), data["usage"]))
    return calls


def _independent_cost(path: Path) -> float:
    total = 0.0
    for model, time, usage in _usage_calls(path):
        rates = TABLE.price(model, time if isinstance(time, int) else None).prices
        total += (usage.get("inputTokens", 0) * rates.cache_miss + usage.get("cacheReadTokens", 0) * rates.cache_hit
                  + usage.get("outputTokens", 0) * rates.output) / 1_000_000
    return total


def test_every_corpus_logs_cost_is_the_sum_of_its_priced_usage() -> None:
    require_corpus()
    report = build_cache_report([LOGS_ROOT], CacheOptions(predict=False))
    by_log = {row["log"]: row for row in report.logs.to_dicts()}
    checked = compactions = 0
    for relpath in session_log_paths():
        path = LOGS_ROOT / relpath
        if str(path) not in by_log:
            continue
        assert by_log[str(path)]["costUsd"] == pytest.approx(_independent_cost(path), rel=1e-9, abs=1e-12), relpath
        checked += 1
        compactions += by_log[str(path)]["compactionCalls"]
    assert checked == 100 and compactions > 0
