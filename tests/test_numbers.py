"""Logged numbers no report can hold (issue 18, item 2), through the real CLI in a child process under a hard
address-space limit: a token count of 2**63, -1, 10**400, 1e400, 1.5 or true, in every generation, stops
cache-report (every format) and report with one line naming file, line, seq, event type and field (exit 2);
verify reports each as a `schema` finding; `audit sessions` lists such a session as a row with its error beside
the rest. Times, turns and steps out of range are refused the same way; a time past the calendar is priced
off-peak and says so; token sums past 2**63-1 are refused, not wrapped. The input is never changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_child import Run, run_audit
from dsh_audit.generations import generations
from genbuilder import GenLog
from logbuilder import LogBuilder
from test_hostile_inputs import digest

AS_LIMIT = 4 << 30   # polars reserves about 1.4 GiB of address space when imported
MARK = 777001        # the inputTokens of the built logs, replaced by each bad value as text
# Each bad value as the log's text has it, and as the error shows it.
BAD_COUNTS = {"2**63": ("9223372036854775808", "9223372036854775808"), "-1": ("-1", "-1"),
              "10**400": ("1" + "0" * 400, "(401 characters)"), "1e400": ("1e400", "inf"),
              "1.5": ("1.5", "1.5"), "true": ("true", "true")}
# Where each generation's first usage is: line, seq, event type, field.
WHERE = {0: (7, 5, "assistant/chunk", "/data/chunk/usage/inputTokens"),
         1: (7, 5, "assistant/chunk", "/data/chunk/usage/inputTokens"),
         2: (6, 4, "assistant/message", "/data/usage/inputTokens"),
         3: (7, 5, "assistant/message", "/data/usage/inputTokens"),
         4: (7, 5, "assistant/message", "/data/usage/inputTokens")}
VERSIONS = [known.version for known in generations()]


def audit(*args: str, env: dict[str, str] | None = None) -> Run:
    return run_audit(*args, as_limit=AS_LIMIT, env=env, timeout=300)


def one_line(run: Run, code: int, *needles: str) -> str:
    """The run ended with `code` and one line on stderr holding every needle; no traceback, no internal error."""
    assert run.code == code, run.out + run.err
    assert "Traceback" not in run.err and "internal error" not in run.err, run.err
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def log_text(version: int, usage: dict[str, Any] | None = None, turns: int = 1) -> str:
    """One-step turns answered with `usage`: v0/v1 by LogBuilder (a usage chunk, then the message citing it),
    v2 on by GenLog (the usage in the settlement and in its embedded stream)."""
    usage = usage or {"inputTokens": MARK, "outputTokens": 5, "cacheReadTokens": 100}
    if version >= 2:
        log = GenLog(version)
        for turn in range(1, turns + 1):
            log.turn(turn, "hi", "ok", head="sys" if version >= 3 and turn == 1 else None, usage=usage)
        rows = [log.header, *log.events]
    else:
        built = LogBuilder(version=version)
        for turn in range(1, turns + 1):
            built.add("turn/start", {"turn": turn})
            built.add("step/start", {"turn": turn, "step": 1})
            built.user("hi")
            if turn == 1:
                built.header_event("initial")
            built.response(turn, 1, "ok", usage=usage)
            built.add("step/end", {"turn": turn, "step": 1})
            built.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        rows = [built.header, *built.events]
    return "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows)


def write_log(folder: Path, version: int, text: str) -> Path:
    """`text` as a generation's log file in `folder` (v0: session.jsonl, else session.vN.jsonl)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("session.jsonl" if version == 0 else f"session.v{version}.jsonl")
    path.write_text(text, encoding="utf-8")
    return path


def every_generation(root: Path, turns: int) -> Path:
    """`root` holding one log of `turns` turns of each known generation, a session folder each (vN)."""
    for known in generations():
        write_log(root / f"v{known.version}", known.version, log_text(known.version, turns=turns))
    return root


def bad_log(folder: Path, version: int, value: str) -> Path:
    """A log of `version` whose every inputTokens is `value` (a BAD_COUNTS key), as text."""
    return write_log(folder, version, log_text(version).replace(str(MARK), BAD_COUNTS[value][0]))


def where(path: Path, version: int) -> tuple[str, str]:
    """The location a report's error names for the bad count of `version`'s log at `path`, and the field."""
    line, seq, event_type, field = WHERE[version]
    return f"{path}:{line}: seq {seq}: {event_type}: {field}: ", field


def folder_of(value: str) -> str:
    return value.replace("*", "^")


# -- token counts: every value, every generation -------------------------------------------------------------

@pytest.mark.parametrize("value", list(BAD_COUNTS))
def test_a_count_no_report_holds_is_one_line_and_exit_2(tmp_path: Path, value: str) -> None:
    # spread over the generations; the next test has them all
    version = VERSIONS[list(BAD_COUNTS).index(value) % len(VERSIONS)]
    log = bad_log(tmp_path, version, value)
    before = digest(log)
    located, _ = where(log, version)
    one_line(audit("cache-report", "--format", "csv", str(log)), 2, located, BAD_COUNTS[value][1],
             "is not a token count a report holds")
    assert digest(log) == before


@pytest.mark.parametrize("version", VERSIONS)
def test_every_generation_names_each_bad_log_and_reports_the_rest(tmp_path: Path, version: int) -> None:
    """Several logs at once: each bad one named with its field on a line of its own, the good one reported, in
    both engines (the fast path doubts a value outside its schema's range; the walk refuses it)."""
    logs = [bad_log(tmp_path / folder_of(value), version, value) for value in BAD_COUNTS]
    good = write_log(tmp_path / "good", version, log_text(version))
    for fast in ("1", "0"):
        run = audit("cache-report", "--no-predict", "--format", "json", *map(str, [*logs, good]),
                    env={"DSH_AUDIT_FAST_PATH": fast})
        assert run.code == 0 and "Traceback" not in run.err, run.err
        assert [row["log"] for row in json.loads(run.out)["rows"]] == [str(good)]
        for log in logs:
            located, _ = where(log, version)
            assert sum(line.startswith(f"audit: {located}") for line in run.err.splitlines()) == 1, run.err


@pytest.mark.parametrize("sink", ["table", "json", "jsonl", "parquet", "report"])
def test_every_sink_refuses_the_count_before_it_writes(tmp_path: Path, sink: str) -> None:
    log = bad_log(tmp_path / "log", 2, "2**63")
    out = tmp_path / ("report.html" if sink == "report" else f"rows.{sink}")
    args = ["report"] if sink == "report" else ["cache-report", "--format", sink]
    located, _ = where(log, 2)
    one_line(audit(*args, "--out", str(out), str(log)), 2, located, "9223372036854775808")
    assert not out.exists()


def test_verify_reports_each_as_a_schema_finding(tmp_path: Path) -> None:
    logs = {version: [bad_log(tmp_path / f"v{version}" / folder_of(value), version, value) for value in BAD_COUNTS]
            for version in VERSIONS}
    run = audit("verify", "--format", "json", *(str(log) for paths in logs.values() for log in paths))
    assert run.code == 1 and "Traceback" not in run.err, run.err
    reports = {report["log"]: report for report in json.loads(run.out)["logs"]}
    for version, paths in logs.items():
        for log in paths:
            _, field = where(log, version)
            found = reports[str(log)]["findings"]
            assert any(f["code"] == "schema" and f["message"].startswith(field) for f in found), (log, found)


def test_sessions_lists_the_session_with_its_error_beside_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    bad = bad_log(root / "--work--" / "session-bad", 2, "10**400")
    good = write_log(root / "--work--" / "session-good", 4, log_text(4))
    run = audit("sessions", "--root", str(root), "--format", "json")
    assert run.code == 0 and "Traceback" not in run.err, run.err
    rows = {row["path"]: row for row in json.loads(run.out)["sessions"]}
    assert rows[str(good)]["requests"] == 1 and rows[str(good)]["error"] is None
    located, _ = where(bad, 2)
    assert rows[str(bad)]["requests"] is None and rows[str(bad)]["error"].startswith(located)


# -- times, turns, steps, sums ------------------------------------------------------------------------------

@pytest.mark.parametrize(("field", "before", "after"), [
    ("/time", '"time":0,"data":{"turn":1,"step":1,"message"', '"time":9223372036854775808,"data":{"turn":1,'
                                                              '"step":1,"message"'),
    ("/data/turn", '"data":{"turn":1,"step":1,"message"', '"data":{"turn":1' + "0" * 400 + ',"step":1,"message"'),
    ("/data/step", '"data":{"turn":1,"step":1,"message"', '"data":{"turn":1,"step":-9007199254740992,"message"'),
])
def test_a_time_turn_or_step_no_report_holds_is_one_line(tmp_path: Path, field: str, before: str, after: str
                                                         ) -> None:
    text = log_text(2)
    assert before in text
    log = write_log(tmp_path, 2, text.replace(before, after, 1))
    one_line(audit("cache-report", str(log)), 2, f"{log}:6: seq 4: assistant/message: {field}: ")


def test_a_time_past_the_calendar_is_priced_off_peak_and_says_so(tmp_path: Path) -> None:
    log = write_log(tmp_path, 2, log_text(2).replace('"time":0,"data":{"turn":1,"step":1,"message"',
                                                     '"time":9007199254740991,"data":{"turn":1,"step":1,"message"'))
    run = audit("cache-report", "--no-predict", "--format", "json", str(log))
    assert run.code == 0, run.err
    (row,) = json.loads(run.out)["rows"]
    assert row["timeMs"] == 2**53 - 1 and row["priceTier"] == "off-peak (time past the year 9999)"


def test_token_sums_past_int64_are_refused_not_wrapped(tmp_path: Path) -> None:
    """1,025 calls of 2**53-1 input tokens each: every count in range, their sum past 2**63-1 (an Int64 sum
    wraps to a negative total)."""
    log = write_log(tmp_path, 2, log_text(2, {"inputTokens": 2**53 - 1, "outputTokens": 1}, turns=1025))
    one_line(audit("cache-report", "--no-predict", "--rows", "totals", "--format", "csv", str(log)), 2,
             f"{log}: this log's inputTokens add up to {1025 * (2**53 - 1)}, past 2**63-1")
