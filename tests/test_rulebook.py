"""The rulebook: every check verify runs is registered with its fast twin (dsh_audit.checks), and a check
registered without one is run on every log, the fast path on or off; every finding code emitted anywhere is
registered once (dsh_audit.finding_codes), and the README lists the registry."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_audit import checks, fastpath
from dsh_audit.finding_codes import CODES, FindingCode, with_table
from dsh_audit.findings import Finding, Report
from dsh_audit.readers import open_logs
from dsh_audit.records import LogSource
from dsh_audit.verify import verify_path
from dsh_audit.walker import Walked

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_logs" / "compaction-recovery" / "session.v3.jsonl"
SOURCES = sorted((REPO / "src" / "dsh_audit").rglob("*.py"))
EMITTERS = {"report", "finding", "Finding"}   # FindingSink.report, the fold's `finding`, a Finding built directly


class TurnStarts:
    """The issue's experiment: a new check, added without a fast twin, that reports every turn/start."""

    def __init__(self, report: Report, source: LogSource) -> None:
        self.report = report

    def observe(self, walked: Walked) -> None:
        if walked.event is not None and walked.record is not None and walked.event["type"] == "turn/start":
            self.report("turn-started", "a turn started", seq=walked.record.seq, event_type="turn/start")

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
    monkeypatch.setitem(CODES, "turn-started", FindingCode("turn-started", "error", False, "a turn started"))
    monkeypatch.setattr(checks, "CHECKS", (*checks.CHECKS, checks.RegisteredCheck(TurnStarts, fast_twin=None)))
    [report] = verify_path(SAMPLE)
    assert not report.fast_path
    assert [f.message for f in report.findings] == ["a turn started"] * turn_starts(SAMPLE)
    assert turn_starts(SAMPLE) >= 1


# -- finding codes --------------------------------------------------------------------------------------------
def _strings(node: ast.expr | None) -> list[str] | None:
    """The string constants an argument can be: one, or each branch of `a if c else b`; None if not constant."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        body, orelse = _strings(node.body), _strings(node.orelse)
        return body + orelse if body is not None and orelse is not None else None
    return None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def emitted() -> list[tuple[str, str, list[str] | None, bool]]:
    """Every place src/ emits a finding: (where, code, severities it can have (None: the default), whether it
    marks the log refused). A SurfaceError's code (its second argument, else its default) is reported by the fold
    with rejects=True; a code passed on from a variable is no emission of its own and is left to the test below."""
    found: list[tuple[str, str, list[str] | None, bool]] = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            if name == "SurfaceError":
                codes = _strings(node.args[1]) if len(node.args) > 1 else ["surface-provenance"]
                found += [(where, code, None, True) for code in codes or ["?"]]
            elif name in EMITTERS and (node.args or _keyword(node, "code")):
                argument = node.args[0] if node.args else _keyword(node, "code")
                codes = _strings(argument)
                if codes is None:
                    continue
                severity = _keyword(node, "severity")
                severities = _strings(severity) if severity is not None else None
                rejects = _keyword(node, "rejects")
                refused = isinstance(rejects, ast.Constant) and rejects.value is True
                found += [(where, code, severities, refused) for code in codes]
    return found


def test_only_known_places_pass_a_code_on_from_a_variable() -> None:
    """The emissions `emitted` cannot read: the sink's and the fold's passing of SurfaceError.code, and the fleet
    report's findings read back from a dataset (each emitted, and so registered, where export walked its log)."""
    passed_on = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in EMITTERS:
                argument = node.args[0] if node.args else _keyword(node, "code")
                if argument is not None and _strings(argument) is None:
                    passed_on.append(f"{path.name}: {ast.unparse(argument)}")
    assert sorted(passed_on) == ["findings.py: code", "fold.py: error.code", "report.py: row['code']"]


def test_every_emitted_code_is_registered_with_its_severity_and_refusal() -> None:
    found = emitted()
    assert len(found) > 40
    for where, code, severities, refused in found:
        assert code in CODES, f"{where}: finding code {code!r} is not registered in dsh_audit.finding_codes"
        entry = CODES[code]
        assert entry.severity in (severities or ["error"]), (where, code, severities)
        assert entry.refuses == refused, (where, code)


def test_every_registered_code_is_emitted_somewhere() -> None:
    assert set(CODES) == {code for _, code, _, _ in emitted()}


def test_the_registry_is_well_formed() -> None:
    for code, entry in CODES.items():
        assert entry.code == code and code == code.lower() and " " not in code
        assert entry.severity in ("error", "warning", "info") and entry.summary
        assert not (entry.refuses and entry.severity != "error"), code


def test_a_finding_with_an_unregistered_code_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="not-a-code"):
        Finding("not-a-code", "message")


def test_the_readme_lists_the_registry() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme == with_table(readme), "run: .venv/bin/python -m dsh_audit.finding_codes README.md"


# -- every mirrored code: a mutation the full verifier reports and the fast path declines ----------------------
Lines = list[Any]   # the header and the events, and (torn-tail) a last str written as it is, with no newline


def _data(lines: Lines, seq: int) -> dict[str, Any]:
    data = lines[seq + 1]["data"]   # line 0 is the header; the sample's seqs run 0, 1, … from line 1
    assert isinstance(data, dict)
    return data


def _event(lines: Lines, seq: int) -> dict[str, Any]:
    """The line of the event at `seq` in a log with packed rows (which carry no seq)."""
    return next(line for line in lines if isinstance(line, dict) and line.get("seq") == seq)


def _renamed_call(lines: Lines) -> None:
    result = _data(lines, 12)["message"]
    result["source"]["callId"] = result["content"][0]["toolCallId"] = "call_never_made"


def _undeclared_tool(lines: Lines) -> None:
    _data(lines, 10)["message"]["content"][0]["name"] = _data(lines, 11)["name"] = "no_such_tool"


def _header_after_the_first_dispatch(lines: Lines) -> None:
    """The request/header (seq 8) and the tool/call (seq 11) trade places: the first request has no header, the
    second one's only cause is the log's first header, which explains nothing."""
    header, call = lines[9], lines[12]
    lines[9], lines[12] = {**call, "seq": 8}, {**header, "seq": 11}


def _chunkless_response_without_header(lines: Lines) -> None:
    lines[9] = {**lines[1], "seq": 8}   # no request/header
    _data(lines, 10)["stream"] = []


_IMAGE_OFFLOAD = {"type": "image/offload", "seq": 6, "time": 0, "data": {"targets": [{"seq": 5, "imageIndexes": [0]}]}}


# code -> an edit of the sample log (SAMPLE, v3, which the fast path accepts) that makes the full verifier report it
MUTATIONS: dict[str, Callable[[Lines], Any]] = {
    "seq-gap": lambda lines: lines.pop(3),
    "seq-duplicate": lambda lines: lines.insert(3, dict(lines[2])),
    "envelope": lambda lines: lines[3].update(bogus=1),
    "unknown-event": lambda lines: lines[3].update(type="acme/thing"),
    "unknown-ignorable": lambda lines: lines[3].update(type="acme/thing", ignorable=True),
    "schema": lambda lines: _data(lines, 1).update(bogus=1),
    "turn-enclosure": lambda lines: _data(lines, 22).update(turn=2),
    "step-enclosure": lambda lines: _data(lines, 13).update(step=5),
    "open-turn": lambda lines: lines.pop(),
    "empty-log": lambda lines: lines.__delitem__(slice(1, None)),
    "system-step": lambda lines: _data(lines, 4).update(step=9),
    "attempt-step": lambda lines: _data(lines, 15).update(step=9),
    "instance-anchor": lambda lines: _data(lines, 8).update(reason="resume"),
    "placeholder-header": lambda lines: _data(lines, 8)["header"].update(tools="{{tools}}"),
    "retired-header-system": lambda lines: _data(lines, 8)["header"].update(system="you are"),
    "tool-pairing": _renamed_call,
    "tool-undeclared": _undeclared_tool,
    "tool-result-error": lambda lines: _data(lines, 12).update(error={"message": "failed"}),
    "surface-op-missing": lambda lines: lines[6].pop("surfaceOp"),
    "surface-op-invalid": lambda lines: lines[6].update(surfaceOp="bogus"),
    "replace-missing-node": lambda lines: lines[19]["surfaceOp"].update(startSeq=99, endSeq=99),
    "surface-provenance": lambda lines: lines[19].update(sourceEventSeqs=[30]),
    "torn-tail": lambda lines: lines.append('{"type":"turn/st'),
    "header-placement": lambda lines: lines.__setitem__(2, {**lines[1], "seq": 1}),   # no turn/start
    "no-header": lambda lines: lines.__setitem__(9, {**lines[1], "seq": 8}),   # no request/header
    "late-surface-event": lambda lines: lines.__setitem__(10, {**lines[6], "seq": 9}),   # for the request/context
    "shape": lambda lines: _data(lines, 5).update(content="text"),
    "assistant-provenance": lambda lines: lines[11].update(sourceEventSeqs=[9]),
    "seed-marker": lambda lines: lines[0].update(isSeeded=True),
    "unlogged-model-call": lambda lines: (_data(lines, 17).update(compactionId="another"),
                                          _data(lines, 19).update(error="summary not smaller")),
    "system-head": lambda lines: lines[19].update(surfaceOp={"op": "replace", "startSeq": 7, "endSeq": 7},
                                                  sourceEventSeqs=[7]),
    "prefix-break": _header_after_the_first_dispatch,
    "untraced-response": _chunkless_response_without_header,
    "unsupported-projection": lambda lines: lines.__setitem__(7, _IMAGE_OFFLOAD),   # for the session/title
    "source-ranges": lambda lines: lines[19].update(sourceEventSeqs=[[5, 2]]),   # a range that ends before it starts
}




def _edited_answer(lines: Lines) -> None:
    _data(lines, 15)["message"]["content"][1]["text"] += " (edited)"


def _short_of_a_gap(lines: Lines) -> None:
    record = next(r for r in _data(lines, 15)["stream"] if r["type"] == "reasoning-chunks")
    record["dt"].pop()


# code -> an edit of a generated v4 log (V4_BASE) the fast path accepts: v4's and the streams' rules
V4_MUTATIONS: dict[str, Callable[[Lines], Any]] = {
    "developer-header": lambda lines: _data(lines, 14).update(headerSeq=2),
    "message-chunk-mismatch": _edited_answer,
    "stream-record": _short_of_a_gap,
}
# code -> an edit of a generated v0 log (V0_BASE, packed chunk rows) the fast path accepts: the legacy rules
V0_MUTATIONS: dict[str, Callable[[Lines], Any]] = {
    "legacy-rejected": lambda lines: _event(lines, 914)["data"].update(reason="fallback"),
    "migration-refused": lambda lines: _event(lines, 6).update(type="acme/thing", ignorable=True),
    "legacy-malformed": lambda lines: _event(lines, 0)["data"].update(trigger="user"),   # not a {kind} object
}
# code -> an edit of the sample that the full verifier reports only when the log is read once (a pipe): a seeded
# child's inherited cut is found by a second pass, which a file always allows, and the fast path reads files only
PIPED_MUTATIONS: dict[str, Callable[[Lines], Any]] = {
    "seed-cut-unknown": lambda lines: lines[0].update(isSeeded=True),
}


# Codes whose rule both engines call (dsh_audit.rules): the fast path declines their mutation in the words the full
# verifier reports it with (a stream record's finding also says where in the stream it is)
WORDED_ONCE = frozenset({
    "assistant-provenance", "attempt-step", "developer-header", "instance-anchor", "late-surface-event",
    "message-chunk-mismatch", "placeholder-header", "replace-missing-node", "step-enclosure", "stream-record",
    "surface-provenance", "system-head", "system-step", "tool-pairing", "tool-undeclared", "turn-enclosure"})
# Codes whose finding goes on past the rule's words (open-turn: what the crash repair would append, state only the
# full verifier keeps): the fast path declines in the words the message starts with
WORDED_FIRST = frozenset({"open-turn"})


def test_every_code_is_mutated() -> None:
    bases = (MUTATIONS, V4_MUTATIONS, V0_MUTATIONS, PIPED_MUTATIONS)
    assert sum(map(len, bases)) == len(CODES) and set(CODES) == set().union(*bases)
    assert WORDED_ONCE.issubset(CODES) and WORDED_FIRST.issubset(CODES)


def _generated(tmp_path_factory: pytest.TempPathFactory, name: str, *args: str) -> Path:
    out = tmp_path_factory.mktemp("base") / name
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "generate_log.py"), "--out", str(out), "--size", "8KB",
                    "--seed", "1", *args], check=True, capture_output=True, cwd=REPO)
    return out


@pytest.fixture(scope="module")
def v4_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generated(tmp_path_factory, "base.v4.jsonl", "--generation", "4")


@pytest.fixture(scope="module")
def v0_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generated(tmp_path_factory, "base.jsonl")


def _mutated(tmp_path: Path, base: Path, edit: Callable[[Lines], Any] | None) -> Path:
    lines: Lines = [json.loads(line) for line in base.read_text(encoding="utf-8").splitlines()]
    if edit is not None:
        edit(lines)
    path = tmp_path / base.name
    path.write_text("".join(line if isinstance(line, str) else json.dumps(line, ensure_ascii=False) + "\n"
                            for line in lines), encoding="utf-8")
    return path


def test_the_unmutated_bases_are_decided_by_the_fast_path(v4_base: Path, v0_base: Path, tmp_path: Path) -> None:
    for base in (SAMPLE, v4_base, v0_base):
        [source] = open_logs(_mutated(tmp_path, base, None))
        assert isinstance(fastpath.decide(source), fastpath.Decided), base


def _reported_and_declined(path: Path, code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    [source] = open_logs(path)
    declined = fastpath.decide(source)
    assert isinstance(declined, str)
    [fast] = verify_path(path)
    monkeypatch.setenv(fastpath.SWITCH, "0")
    [full] = verify_path(path)
    assert code in {finding.code for finding in full.findings}, [f.render() for f in full.findings]
    assert not fast.fast_path and fast.findings == full.findings
    if code in WORDED_ONCE:
        assert any(f.message.endswith(declined) for f in full.findings if f.code == code), declined
    if code in WORDED_FIRST:
        assert any(f.message.startswith(declined) for f in full.findings if f.code == code), declined


@pytest.mark.parametrize("code", sorted(MUTATIONS))
def test_a_mutation_is_reported_by_the_full_verifier_and_declined_by_the_fast_path(
        code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _reported_and_declined(_mutated(tmp_path, SAMPLE, MUTATIONS[code]), code, monkeypatch)


@pytest.mark.parametrize("code", sorted(V4_MUTATIONS))
def test_a_v4_mutation_is_reported_by_the_full_verifier_and_declined_by_the_fast_path(
        code: str, v4_base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _reported_and_declined(_mutated(tmp_path, v4_base, V4_MUTATIONS[code]), code, monkeypatch)


@pytest.mark.parametrize("code", sorted(V0_MUTATIONS))
def test_a_v0_mutation_is_reported_by_the_full_verifier_and_declined_by_the_fast_path(
        code: str, v0_base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _reported_and_declined(_mutated(tmp_path, v0_base, V0_MUTATIONS[code]), code, monkeypatch)


def _piped(path: Path, tmp_path: Path, name: str) -> Path:
    """A named pipe a thread writes the log at `path` into: a source read once, with no second pass."""
    pipe = tmp_path / name
    os.mkfifo(pipe)
    data = path.read_bytes()

    def write() -> None:
        with pipe.open("wb") as handle:   # waits for the reader; the log fits the pipe's buffer
            handle.write(data)

    threading.Thread(target=write, daemon=True).start()
    return pipe


@pytest.mark.parametrize("code", sorted(PIPED_MUTATIONS))
def test_a_piped_mutation_is_reported_by_the_full_verifier_and_declined_by_the_fast_path(
        code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _mutated(tmp_path, SAMPLE, PIPED_MUTATIONS[code])
    [source] = open_logs(_piped(path, tmp_path, "decided"))
    assert isinstance(fastpath.decide(source), str)
    assert sum(1 for _ in source.records()) > 0   # read to the end: the writer is done
    [fast] = verify_path(_piped(path, tmp_path, "fast"))
    monkeypatch.setenv(fastpath.SWITCH, "0")
    [full] = verify_path(_piped(path, tmp_path, "full"))
    assert code in {finding.code for finding in full.findings}, [f.render() for f in full.findings]
    unlabelled = [[msgspec.structs.replace(f, log=None) for f in report.findings] for report in (fast, full)]
    assert not fast.fast_path and unlabelled[0] == unlabelled[1]   # each pipe is a log of its own name
    [from_file] = verify_path(path)   # a file is read twice for the cut: no such finding
    assert code not in {finding.code for finding in from_file.findings}
