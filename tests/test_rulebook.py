"""The rulebook (dsh_audit.checks): every check verify runs is registered with its fast twin, and a check
registered without one is run on every log, the fast path on or off."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_audit import checks, fastpath
from dsh_audit.findings import Report
from dsh_audit.records import LogSource
from dsh_audit.verify import verify_path
from dsh_audit.walker import Walked

SAMPLE = Path(__file__).resolve().parents[1] / "sample_logs" / "compaction-recovery" / "session.v3.jsonl"


class TurnStarts:
    """The issue's experiment: a new check, added without a fast twin, that reports every turn/start."""

    def __init__(self, report: Report, source: LogSource) -> None:
        self.report = report

    def observe(self, walked: Walked) -> None:
        if walked.event is not None and walked.record is not None and walked.event["type"] == "turn/start":
            self.report("schema", "a turn started", seq=walked.record.seq, event_type="turn/start")

    def finish(self, last_seq: int | None) -> None:
        pass


def turn_starts(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if '"type":"turn/start"' in line.replace(" ", ""))


def test_every_registered_check_has_a_fast_twin_today() -> None:
    assert checks.CHECKS and checks.without_fast_twin() == []
    assert len({check.name for check in checks.CHECKS}) == len(checks.CHECKS)


def test_the_sample_log_takes_the_fast_path() -> None:
    [report] = verify_path(SAMPLE)
    assert report.fast_path and not report.findings


@pytest.mark.parametrize("fast", ["1", "0"])
def test_a_check_without_a_fast_twin_reports_with_the_fast_path_on_or_off(
        fast: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fastpath.SWITCH, fast)
    monkeypatch.setattr(checks, "CHECKS", (*checks.CHECKS, checks.RegisteredCheck(TurnStarts, fast_twin=None)))
    [report] = verify_path(SAMPLE)
    assert not report.fast_path
    assert [f.message for f in report.findings] == ["a turn started"] * turn_starts(SAMPLE)
    assert turn_starts(SAMPLE) >= 1
