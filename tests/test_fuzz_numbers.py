"""Hostile numbers (issue 18, item 2), beside the byte fuzzing of test_fuzz.py: price tables and the numeric
fields of logs, each field given a JSON number literal of any size, sign and form (or another type), through the
CLI. Never exit 3, never a traceback; the output is a normal report with finite costs, or one line saying why.

Bounded for CI: derandomized hypothesis, fixed example counts, in-process runs of the real CLI (CliRunner).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_audit.cli import main
from test_numbers import log_text, write_log

FUZZ = settings(max_examples=60, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# A JSON value as text: numbers of every size and form (the literals orjson and the stdlib read differently
# included), and a few of each other type.
NUMBER = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.integers(min_value=0, max_value=500).map(lambda digits: "1" + "0" * digits),   # 10**digits
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["1e400", "-1e400", "1e-400", "1e308", "5e-324", "-0", "0.0", "2.0", "9007199254740993",
                     "9223372036854775808", "18446744073709551616", "NaN", "Infinity", "-Infinity"]),
)
VALUE = st.one_of(NUMBER, st.sampled_from(['"12"', "true", "null", "[]", "{}", '{"a": 1}']))

PRICE_FIELDS = ("cacheHit", "cacheMiss", "output", "perTokens", "offPeakFactor", "weekday")
USAGE_FIELDS = ("inputTokens", "outputTokens", "cacheReadTokens", "reasoningTokens", "time", "turn", "step")


def _checked(result: Result, path: Path) -> None:
    """A normal report with finite costs, or exit 2 and one line naming `path`."""
    assert result.exit_code in (0, 2), (result.exit_code, result.output)
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    if result.exit_code == 2:
        errors = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(errors) == 1 and str(path) in errors[0], result.stderr
        return
    for row in csv.DictReader(io.StringIO(result.stdout)):
        assert row["costUsd"] == "" or math.isfinite(float(row["costUsd"])), row


def _price_table(field: str, literal: str) -> str:
    rates = {"cacheHit": "0.1", "cacheMiss": "1", "output": "2"}
    rates.update({field: literal} if field in rates else {})
    model = '{"m": {' + ", ".join(f'"{key}": {value}' for key, value in rates.items()) + "}}"
    extra = {"perTokens": f', "perTokens": {literal}', "offPeakFactor": f', "offPeakFactor": {literal}',
             "weekday": f', "peak": {{"utcOffset": "+08:00", "weekdays": [{literal}], "hours": [["00:00", "23:59"]]}}'
             }.get(field, "")
    return '{"models": ' + model + ', "fallback": "m"' + extra + "}"


@FUZZ
@given(field=st.sampled_from(PRICE_FIELDS), literal=VALUE)
def test_price_tables_never_crash_and_never_cost_nan(tmp_path: Path, field: str, literal: str) -> None:
    log = write_log(tmp_path / "log", 2, log_text(2))
    table = tmp_path / "prices.json"
    table.write_text(_price_table(field, literal))
    result = CliRunner().invoke(main, ["cache-report", "--no-predict", "--format", "csv", "--prices", str(table),
                                       str(log)])
    _checked(result, table)


@FUZZ
@given(version=st.integers(min_value=0, max_value=4), field=st.sampled_from(USAGE_FIELDS), literal=VALUE)
def test_numeric_fields_of_logs_never_crash_a_report(tmp_path: Path, version: int, field: str, literal: str
                                                     ) -> None:
    usage = {"inputTokens": 11, "outputTokens": 5, "cacheReadTokens": 100, "reasoningTokens": 2}
    text = log_text(version, usage)
    if field in usage:
        text = text.replace(f'"{field}":{usage[field]}', f'"{field}":{literal}')
    elif field == "time":
        text = text.replace('"time":0', f'"time":{literal}')
    else:   # the turn or step of every event that has one
        text = text.replace(f'"{field}":1', f'"{field}":{literal}')
    log = write_log(tmp_path / "log", version, text)
    result = CliRunner().invoke(main, ["cache-report", "--no-predict", "--format", "csv", str(log)])
    _checked(result, log)
    verified = CliRunner().invoke(main, ["verify", "--format", "json", str(log)])
    assert verified.exit_code in (0, 1, 2) and "Traceback" not in verified.output, verified.output
    assert json.loads(verified.stdout)["logs"][0]["log"] == str(log)
