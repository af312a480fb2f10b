"""Crash truncation: a shared log in persisted form, cut at EVERY byte (and its .jsonl.zstd form at a sample of
points), must give the verdict the reference's JSONL loader implies.

The reference (session-persistence-jsonl format.ts, SessionLogScanner) commits a record only when it ends in a
newline, so a cut at a line end is a clean shorter log and a cut mid-line drops a torn tail; only a cut inside
the header line is unreadable. When a turn is left open, the open-turn warning names the closers the reference's
crash repair (core/session repair.ts) would append.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import zstandard
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT, require_corpus
from dsh_audit.cli import main
from dsh_audit.readers import open_logs
from dsh_audit.verify import LogReport, verify_path

require_corpus()

# Two steps, a tool call with its tool/call and tool/result: cuts land inside open steps, calls and turns.
RELPATH = "examples/acp-agent/tests/snapshots/lsp-definition/session.jsonl"


def persisted_lines() -> list[bytes]:
    """The log as the JSONL writer stores it: header line, then one event per line with explicit seq and time."""
    source = next(open_logs(LOGS_ROOT / RELPATH))
    events = [{"type": r.event["type"], "seq": r.seq, "time": 1_700_000_000_000 + r.seq,
               **{k: v for k, v in r.event.items() if k not in ("type", "seq", "time")}} for r in source.records()]
    return [json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode() for value in [source.header, *events]]


LINES = persisted_lines()
EVENTS = [json.loads(line) for line in LINES[1:]]
LOG = b"".join(line + b"\n" for line in LINES)
LINE_ENDS = [sum(len(line) + 1 for line in LINES[:n + 1]) for n in range(len(LINES))]


def open_turn_after(count: int) -> tuple[bool, bool]:
    """(turn open, step open) after the first `count` events, computed from the events themselves."""
    turn = step = False
    for event in EVENTS[:count]:
        turn = {"turn/start": True, "turn/end": False}.get(event["type"], turn)
        step = {"step/start": True, "step/end": False, "turn/end": False}.get(event["type"], step)
    return turn, step


def codes(report: LogReport, severity: str) -> set[str]:
    return {f.code for f in report.findings if f.severity == severity}


@pytest.fixture(scope="module")
def full() -> LogReport:
    return verify_path(LOGS_ROOT / RELPATH)[0]


def test_the_uncut_log_is_clean(full: LogReport, tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes(LOG)
    [report] = verify_path(path)
    assert codes(report, "error") == set() and report.read_error is None
    assert [r.sha256 for r in report.requests] == [r.sha256 for r in full.requests]
    assert open_turn_after(len(EVENTS)) == (False, False)


def check_cut(cut: int, report: LogReport, full: LogReport) -> None:
    header_end = LINE_ENDS[0]
    if cut < header_end:
        assert report.read_error is not None, cut
        assert ("torn header" in report.read_error) if cut else ("empty log" in report.read_error)
        return
    assert report.read_error is None, (cut, report.read_error)
    complete = sum(1 for end in LINE_ENDS if end <= cut) - 1       # whole event lines kept
    assert report.events == complete, cut
    assert codes(report, "error") == set(), (cut, [f.render() for f in report.findings])
    torn = [f for f in report.findings if f.code == "torn-tail"]
    if cut in LINE_ENDS:
        assert not torn, cut
    else:
        [finding] = torn
        line, dropped = complete + 2, cut - LINE_ENDS[complete]
        assert f"dropped torn final line {line} ({dropped} bytes)" in finding.message, (cut, finding.message)
        assert finding.line == line and finding.severity == "warning"
    turn_open, step_open = open_turn_after(complete)
    [repair] = [f for f in report.findings if f.code == "open-turn"] or [None]
    assert (repair is not None) == turn_open, cut
    if repair is not None:
        assert repair.message.endswith("turn/end 1 {kind:'interrupted'}"), repair.message
        assert ("step/end 1." in repair.message) == step_open, repair.message
        assert f"seq {complete + (1 if step_open else 0)} turn/end" in repair.message or "tool/result" in \
            repair.message, repair.message
    # A request depends only on events before its dispatch: every request of the cut log is one of the whole log.
    kept = [r for r in full.requests if r.dispatch_seq < complete]
    assert [(r.dispatch_seq, r.sha256) for r in report.requests] == [(r.dispatch_seq, r.sha256) for r in kept], cut


def test_every_byte_truncation_point(full: LogReport, tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    open_turn_cuts = torn_cuts = 0
    for cut in range(len(LOG) + 1):
        path.write_bytes(LOG[:cut])
        [report] = verify_path(path)
        check_cut(cut, report, full)
        open_turn_cuts += any(f.code == "open-turn" for f in report.findings)
        torn_cuts += any(f.code == "torn-tail" for f in report.findings)
        assert path.read_bytes() == LOG[:cut]
    # Every cut after the header line that is not at a line end tears a line.
    assert torn_cuts == len(LOG) + 1 - LINE_ENDS[0] - len(LINE_ENDS) and open_turn_cuts > len(LOG) // 2


def test_open_tool_call_lists_the_synthetic_tool_result(tmp_path: Path) -> None:
    """Cut right after the assistant message that calls the tool: the repair closes the call first."""
    call = next(n for n, e in enumerate(EVENTS) if e["type"] == "assistant/message"
                and any(b.get("type") == "tool-call" for b in e["data"]["message"]["content"]))
    called = next(n for n, e in enumerate(EVENTS) if e["type"] == "tool/call")
    path = tmp_path / "cut.jsonl"
    for count, code in ((call + 1, "TOOL_NOT_STARTED"), (called + 1, "TOOL_OUTCOME_UNKNOWN")):
        path.write_bytes(LOG[:LINE_ENDS[count]])
        [report] = verify_path(path)
        [repair] = [f for f in report.findings if f.code == "open-turn"]
        assert f"seq {count} tool/result isError" in repair.message and code in repair.message, repair.message
        assert f"seq {count + 1} step/end 1.1, seq {count + 2} turn/end 1" in repair.message, repair.message


@pytest.mark.parametrize("cut_kind", ["line-end", "mid-line", "header"])
def test_cli_exit_codes_for_cuts(cut_kind: str, tmp_path: Path) -> None:
    cut = {"line-end": LINE_ENDS[9], "mid-line": LINE_ENDS[9] + 7, "header": LINE_ENDS[0] - 3}[cut_kind]
    path = tmp_path / "cut.jsonl"
    path.write_bytes(LOG[:cut])
    result = CliRunner().invoke(main, ["verify", str(path)])
    assert result.exit_code == (2 if cut_kind == "header" else 0), result.output
    assert "Traceback" not in result.output
    if cut_kind != "header":
        assert CliRunner().invoke(main, ["verify", "--strict", str(path)]).exit_code == 1


# -- .jsonl.zstd: header frame, then one frame per append batch -------------------------------------------------

def zstd_log(batch: int = 4) -> tuple[bytes, list[int]]:
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    frames = [compressor.compress(LINES[0] + b"\n")]
    for start in range(1, len(LINES), batch):
        frames.append(compressor.compress(b"".join(line + b"\n" for line in LINES[start:start + batch])))
    boundaries = [sum(len(f) for f in frames[:n + 1]) for n in range(len(frames))]
    return b"".join(frames), boundaries


def test_zstd_truncation_sample(full: LogReport, tmp_path: Path) -> None:
    data, boundaries = zstd_log()
    cuts = sorted({*range(0, len(data) + 1, 23), *boundaries, *(b - 1 for b in boundaries),
                   *(b + 5 for b in boundaries if b + 5 <= len(data))})
    path = tmp_path / "cut.jsonl.zstd"
    shas = [(r.dispatch_seq, r.sha256) for r in full.requests]
    for cut in cuts:
        path.write_bytes(data[:cut])
        [report] = verify_path(path)
        if cut < boundaries[0]:
            # The header frame is cut. Once its plaintext (the whole header line) has decoded we keep it as a
            # header-only log with a torn tail; the reference refuses any log without one complete frame.
            header_only = report.events == 0 and "torn-tail" in codes(report, "warning")
            assert report.read_error is not None or header_only, cut
            continue
        assert report.read_error is None, (cut, report.read_error)
        assert codes(report, "error") == set(), (cut, [f.render() for f in report.findings])
        torn = [f for f in report.findings if f.code == "torn-tail"]
        assert bool(torn) == (cut not in boundaries), cut
        if torn:
            assert "incomplete final zstd frame" in torn[0].message
        whole_frames = max(n for n, b in enumerate(boundaries) if b <= cut)
        assert report.events >= min(whole_frames * 4, len(EVENTS)), cut
        got: list[Any] = [(r.dispatch_seq, r.sha256) for r in report.requests]
        assert got == shas[:len(got)] and all(seq < report.events for seq, _ in got), cut
        assert path.read_bytes() == data[:cut]
