"""Cost that adds up: DeepSeek's price table by the time of each call (peak or off-peak), compaction calls
priced, a prices file instead, and every corpus log's cost equal to an independent sum of its usage."""

from __future__ import annotations

import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT, require_corpus, session_log_paths
from dsh_audit.cli import main
from dsh_audit.reports import prices
from dsh_audit.reports.cache_report import CacheOptions, build_cache_report
from dsh_audit.reports.prices import MAX_PRICE, Prices, default_table, load_table
from test_numbers import audit, one_line

TABLE = default_table()
SAMPLE = Path(__file__).resolve().parents[1] / "sample_logs" / "compaction-recovery" / "session.jsonl"


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


def test_the_bundled_table_meets_its_schema() -> None:
    """default_table reads it without the schema check a --prices file gets."""
    bundled = json.loads((Path(prices.__file__).parent / "data" / "deepseek-prices.json").read_text())
    assert prices.validate_document(prices._table_schema(), bundled) == []
    assert prices.parse_table(bundled, "bundled") == TABLE


def test_models_aliases_and_the_fallback() -> None:
    assert TABLE.price("deepseek-flash", None).model == "deepseek-flash"
    assert TABLE.price("deepseek-v4-flash", None).model == "deepseek-flash (as deepseek-v4-flash)"
    assert TABLE.price("fake", None).model == "deepseek-flash (no price for fake)"
    assert TABLE.price("fake", None).tier == "off-peak (no time logged)"


# -- dated periods: a call is priced at the prices of its day (docs/prices.md) ------------------------------------
@pytest.mark.parametrize(("when", "model", "tier", "rates"), [
    ("2026-07-01T10:00:00+08:00", "deepseek-v4-flash", "flat", (0.0028, 0.14, 0.28)),   # before peak hours
    ("2026-07-01T10:00:00+08:00", "deepseek-chat", "flat", (0.0028, 0.14, 0.28)),
    ("2026-08-17T10:00:00+08:00", "deepseek-v4-flash", "peak", (0.014, 0.44, 1.32)),     # the first peak hour
    ("2026-08-22T10:00:00+08:00", "deepseek-v4-flash", "peak", (0.014, 0.44, 1.32)),     # a Saturday, then peak
    ("2026-08-29T10:00:00+08:00", "deepseek-v4-flash", "off-peak", (0.007, 0.22, 0.66)),  # a Saturday, then not
    ("2026-09-10T11:59:00+08:00", "deepseek-v4-pro", "peak", (0.044, 1.32, 3.96)),
    ("2026-09-10T14:00:00+08:00", "deepseek-v4-flash", "peak", (0.006, 0.3, 1.2)),       # V4.1-Flash's prices
])
def test_each_call_is_priced_by_the_period_of_its_time(when: str, model: str, tier: str,
                                                        rates: tuple[float, float, float]) -> None:
    priced = TABLE.price(model, ms(when))
    assert priced.tier == tier
    assert (priced.prices.cache_hit, priced.prices.cache_miss, priced.prices.output) == pytest.approx(rates)


def test_a_call_without_a_time_is_priced_by_the_newest_period() -> None:
    assert TABLE.price("deepseek-v4-flash", None).prices == TABLE.models["deepseek-flash"].scaled(0.5)


def test_a_prices_file_of_periods_prices_each_call_by_its_time(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"models": {"m": {"cacheHit": 0, "cacheMiss": 2, "output": 0}}, "fallback": "m",
                                "from": "2026-11-30T12:00:00Z",
                                "earlier": [{"models": {"m": {"cacheHit": 0, "cacheMiss": 1, "output": 0}},
                                             "fallback": "m"}]}))
    table = load_table(path)
    assert [table.price("m", ms(when)).prices.cache_miss
            for when in ("2026-11-30T11:59:59+00:00", "2026-11-30T12:00:00+00:00")] == [1, 2]


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


def _independent_cost(path: Path) -> float | None:
    """The log's cost from its logged usage alone; None where no call logged usage (not a cost of $0)."""
    total, priced = 0.0, False
    for model, time, usage in _usage_calls(path):
        priced = True
        rates = TABLE.price(model, time if isinstance(time, int) else None).prices
        total += (usage.get("inputTokens", 0) * rates.cache_miss + usage.get("cacheReadTokens", 0) * rates.cache_hit
                  + usage.get("outputTokens", 0) * rates.output) / 1_000_000
    return total if priced else None


def test_every_corpus_logs_cost_is_the_sum_of_its_priced_usage() -> None:
    require_corpus()
    report = build_cache_report([LOGS_ROOT], CacheOptions(predict=False))
    by_log = {row["log"]: row for row in report.logs.to_dicts()}
    checked = compactions = unpriced = 0
    for relpath in session_log_paths():
        path = LOGS_ROOT / relpath
        if str(path) not in by_log:
            continue
        expected = _independent_cost(path)
        cost = by_log[str(path)]["costUsd"]
        assert cost is None if expected is None else cost == pytest.approx(expected, rel=1e-9, abs=1e-12), relpath
        checked += 1
        unpriced += expected is None
        compactions += by_log[str(path)]["compactionCalls"]
    assert checked == 100 and compactions > 0 and 0 < unpriced < checked


def test_every_wild_logs_real_usage_is_priced_at_deepseeks_off_peak_rate() -> None:
    """The lyteboat logs (tests/fixtures/wild: real DeepSeek usage, run about 21:03 UTC, inside DeepSeek's
    off-peak hours, docs/prices.md): each log's cost is the sum of its priced usage, every priced request is
    off-peak, and a log whose replies were written without a model call has no cost at all (issue 19)."""
    wild = Path(__file__).resolve().parent / "fixtures" / "wild"
    report = build_cache_report([wild], CacheOptions(predict=False))
    costs = {Path(row["log"]).parent.name: row["costUsd"] for row in report.logs.to_dicts()}
    assert {name: cost is None for name, cost in costs.items()} == {
        "diagnosis-midlife": False, "education-rebalance": False, "education-without-customer": False,
        "overview-then-diagnosis": False, "out-of-scope": True, "unauthorized": True, "recorded": True}
    for row in report.logs.to_dicts():
        expected = _independent_cost(Path(row["log"]))
        assert row["costUsd"] is None if expected is None else row["costUsd"] == pytest.approx(expected, rel=1e-12)
    priced = report.requests.filter(report.requests["costUsd"].is_not_null())
    assert priced.height == 10 and set(priced["priceTier"].to_list()) == {"off-peak"}   # of 11: one logged none


# -- a --prices file is validated at the edge (issue 18, item 2) -------------------------------------------------
MODEL = '"models": {"m": {"cacheHit": 1, "cacheMiss": 2, "output": 3}}, "fallback": "m"'
PEAK = '"peak": {"utcOffset": "+08:00", "weekdays": [1], "hours": [["09:00", "12:00"]]'


@pytest.mark.parametrize(("text", "said"), [
    ('{"models": {"m": {"cacheHit": NaN, "cacheMiss": 2, "output": 3}}, "fallback": "m"}', "not valid JSON"),
    ('{"models": {"m": {"cacheHit": 1, "cacheMiss": Infinity, "output": 3}}, "fallback": "m"}', "not valid JSON"),
    ('{"models": {"m": {"cacheHit": -1, "cacheMiss": 2, "output": 3}}, "fallback": "m"}',
     "/models/m/cacheHit: -1 is less than the minimum of 0"),
    ('{"models": {"m": {"cacheHit": "1", "cacheMiss": 2, "output": 3}}, "fallback": "m"}',
     "/models/m/cacheHit: expected number, got string"),
    ('{"models": {"m": {"cacheHit": 1, "cacheMiss": 1e308, "output": 3}}, "fallback": "m"}',
     "/models/m/cacheMiss: 1e+308 is greater than the maximum of 1000000"),
    ('{"models": {"m": {"cacheHit": 1, "cacheMiss": 2, "output": 1e400}}, "fallback": "m"}',
     "/models/m/output: inf is greater than the maximum of 1000000"),
    ('{"models": {"m": {"cacheHit": 1, "cacheMiss": 2}}, "fallback": "m"}', "/models/m/output: missing required key"),
    ('{' + MODEL + ', "perTokens": 0}', "/perTokens: 0 is less than the minimum of 1"),
    ('{' + MODEL + ', "perTokens": 1e-320}', "/perTokens: expected integer, got number"),
    ('{' + MODEL + ', "offPeakFactor": 2}', "/offPeakFactor: 2 is greater than the maximum of 1"),
    ('{' + MODEL + ', "currency": "EUR"}', '/currency: expected "USD", got "EUR"'),
    ('{' + MODEL + ', "perToken": 1000}', "/perToken: unexpected key"),
    ('{"models": {}, "fallback": "m"}', "/models: {} should be non-empty"),
    ('{"models": {"m": {"cacheHit": 1, "cacheMiss": 2, "output": 3}}, "fallback": "x"}',
     "/fallback: 'x' is not one of the models"),
    ('{' + MODEL + ', "aliases": {"a/b": "x"}}', "/aliases/a~1b: 'x' is not one of the models"),
    ('{' + MODEL + ', ' + PEAK + ', "holidays": ["2026-02-30"]}}', "/peak/holidays/0: day is out of range"),
    ('{' + MODEL + ', ' + PEAK + ', "holidays": ["2026-10-07..2026-10-01"]}}',
     "/peak/holidays/0: the range ends before it starts"),
    ('{' + MODEL + ', "peak": {"utcOffset": "+25:00", "weekdays": [1], "hours": []}}', "/peak/utcOffset: "),
    ('{' + MODEL + ', "peak": {"utcOffset": "+08:00", "weekdays": [8], "hours": []}}',
     "/peak/weekdays/0: 8 is greater than the maximum of 7"),
    ('{' + MODEL + ', "peak": {"utcOffset": "+08:00", "weekdays": [1], "hours": [["09:00", "24:00"]]}}',
     "/peak/hours/0/1: "),
    ('[]', "/: expected object, got array"),
    ('{' + MODEL + ',}', "not valid JSON"),
    ('{' + MODEL + ', "from": "2026-09-10"}', "/from: "),   # a moment with its offset, not a date
    ('{' + MODEL + ', "from": "2026-09-10T04:00:00Z", "earlier": [{' + MODEL + ', "from": "2026-09-10T04:00:00Z"}]}',
     "/from: a period must begin after the one before it"),
    ('{' + MODEL + ', "earlier": [{' + MODEL + '}]}', "/from: only the oldest period may have no start"),
    ('{' + MODEL + ', "from": "2026-09-10T04:00:00Z", "earlier": [{' + MODEL + '}, {' + MODEL + '}]}',
     "/earlier/1/from: only the oldest period may have no start"),
    ('{' + MODEL + ', "earlier": [{"models": {"m": {"cacheHit": 1, "cacheMiss": 2, "output": 3}}, "fallback": "x"}]}',
     "/earlier/0/fallback: 'x' is not one of the models"),
])
def test_a_bad_price_table_is_one_line_naming_the_field(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(text)
    result = CliRunner().invoke(main, ["cache-report", "--no-predict", "--prices", str(path), str(SAMPLE)])
    assert result.exit_code == 2 and result.stdout == "", result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"audit: {path}: not a price table: ") and said in line, line
    assert path.read_text() == text


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e308"])
def test_a_flat_rate_is_a_finite_price(value: str) -> None:
    result = CliRunner().invoke(main, ["cache-report", "--no-predict", "--price-hit", value, "--price-miss", "1",
                                       "--price-output", "1", str(SAMPLE)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "Invalid value for '--price-hit'" in result.stderr and "is not a price from 0 to 1e+06 USD" in result.stderr


def test_the_dearest_price_costs_a_finite_sum() -> None:
    """The schema's cap, 1e6 USD per token at perTokens 1, on 2**53-1 tokens of each kind: a finite cost."""
    schema = json.loads((Path(prices.__file__).parent / "data" / "prices.schema.json").read_text())
    assert schema["$defs"]["Price"]["maximum"] == MAX_PRICE
    dearest = Prices(MAX_PRICE, MAX_PRICE, MAX_PRICE, per_tokens=1)
    cost = dearest.cost(2**53 - 1, 2**53 - 1, 2**53 - 1)
    assert math.isfinite(cost) and math.isfinite(cost * 2**63)   # however many such calls a report sums


def test_a_holiday_range_costs_no_memory_per_day(tmp_path: Path) -> None:
    """Ranges are kept as ranges: the whole calendar as one holiday is two dates, not 3.6 million."""
    path = tmp_path / "prices.json"
    path.write_text('{' + MODEL + ', ' + PEAK + ', "holidays": ["0001-01-01..9999-12-31"]}}')
    table = load_table(path)
    assert table.peak is not None and len(table.peak.holidays) == 1
    assert table.price("m", ms("2026-12-07T10:00:00+08:00")).tier == "off-peak"   # a Monday morning, a holiday


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "2 MiB", "nested 100,000 deep", "not UTF-8"])
def test_a_price_table_is_read_only_from_a_small_regular_file(tmp_path: Path, kind: str) -> None:
    """Through the real CLI under a hard memory limit: one line, exit 2, and never a wait on a pipe."""
    path = tmp_path / "prices.json"
    if kind == "/dev/zero":
        path.symlink_to("/dev/zero")   # a path the user typed is followed: it is the device that is refused
    elif kind == "fifo":
        os.mkfifo(path)                # no writer: opening it for reading would wait for one
    elif kind == "2 MiB":
        path.write_text('{' + MODEL + ', "description": "' + "x" * (2 << 20) + '"}')
    elif kind == "nested 100,000 deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        path.write_bytes(b'{"models": {"\xff": {}}}')
    said = {"/dev/zero": "not a regular file", "fifo": "not a regular file", "2 MiB": "larger than 1048576 bytes",
            "nested 100,000 deep": "nested deeper than 200 levels", "not UTF-8": "invalid UTF-8"}[kind]
    one_line(audit("cache-report", "--no-predict", "--prices", str(path), str(SAMPLE)), 2, str(path), said)
