"""`--junit FILE` on verify and golden check: valid against the Ant/Jenkins JUnit schema (tests/junit.xsd), one
test case per log, <failure> for findings, <error> for unreadable input, and hostile log text kept XML-safe."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT, require_corpus
from dsh_audit.cli import main

require_corpus()

SCHEMA = xmlschema.XMLSchema(Path(__file__).with_name("junit.xsd"))
CLEAN = "examples/acp-agent/tests/snapshots/lsp-definition/session.jsonl"   # clean, placeholder header
FAILING = "apps/web/tests/snapshots/cordis-tool-round/session.jsonl"
HEADER = b'{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0}\n'


def invoke(*args: str) -> int:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.exit_code


def cases(report: Path) -> dict[str, ET.Element]:
    SCHEMA.validate(str(report))
    root = ET.parse(report).getroot()
    return {f"{case.get('classname')}/{case.get('name')}": case for case in root.iter("testcase")}


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    for name, relpath in (("clean", CLEAN), ("failing", FAILING)):
        (root / name).mkdir(parents=True)
        shutil.copyfile(LOGS_ROOT / relpath, root / name / "session.jsonl")
    (root / "unreadable").mkdir()
    (root / "unreadable" / "session.jsonl.zstd").write_bytes(b"\x28\xb5\x2f\xfd garbage")
    # Finding text from the log itself: control characters in an unknown event type.
    (root / "hostile").mkdir()
    (root / "hostile" / "session.jsonl").write_bytes(HEADER + b'{"type":"x\\u0001\\u001b","data":{}}\n')
    return root


def test_verify_junit_has_one_valid_case_per_log(logs: Path, tmp_path: Path) -> None:
    report = tmp_path / "out" / "verify.xml"
    report.parent.mkdir()
    before = {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    assert invoke("verify", "--junit", str(report), str(logs)) == 2
    found = cases(report)
    assert sorted(found) == sorted(f"{logs}/{d}/{f}" for d, f in (("clean", "session.jsonl"),
                                                                   ("failing", "session.jsonl"),
                                                                   ("unreadable", "session.jsonl.zstd"),
                                                                   ("hostile", "session.jsonl")))
    clean, failing = found[f"{logs}/clean/session.jsonl"], found[f"{logs}/failing/session.jsonl"]
    assert clean.find("failure") is None and clean.find("error") is None
    failure = failing.find("failure")
    assert failure is not None and "surface-provenance" in (failure.get("message") or "")
    assert "[surface-provenance]" in (failure.text or "")
    error = found[f"{logs}/unreadable/session.jsonl.zstd"].find("error")
    assert error is not None and "zstd" in (error.get("message") or "")
    hostile = found[f"{logs}/hostile/session.jsonl"].find("failure")
    assert hostile is not None and "x\\u0001\\u001b" in (hostile.text or "")
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "2", "1")
    assert {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before


def test_verify_format_junit_prints_the_report_on_stdout(logs: Path, tmp_path: Path) -> None:
    """`--format junit` is the `--junit` report on stdout, with the same exit code and the same cases."""
    report, printed = tmp_path / "verify.xml", tmp_path / "printed.xml"
    result = CliRunner().invoke(main, ["verify", "--format", "junit", "--junit", str(report), str(logs)])
    assert result.exit_code == 2
    printed.write_text(result.stdout, encoding="utf-8")
    assert sorted(cases(printed)) == sorted(cases(report)) and len(cases(printed)) == 4
    assert result.stdout.startswith("<?xml") and "ok " not in result.stdout   # no table before it


def test_strict_turns_warnings_into_failures(logs: Path, tmp_path: Path) -> None:
    report = tmp_path / "strict.xml"
    clean = logs / "clean" / "session.jsonl"
    assert invoke("verify", "--junit", str(report), str(clean)) == 0
    [case] = cases(report).values()
    assert case.find("failure") is None
    assert invoke("verify", "--strict", "--junit", str(report), str(clean)) == 1
    [case] = cases(report).values()
    failure = case.find("failure")
    assert failure is not None and "placeholder-header" in (failure.get("message") or "")


def test_golden_check_junit(logs: Path, tmp_path: Path) -> None:
    shutil.rmtree(logs / "unreadable")
    assert invoke("golden", "update", str(logs)) == 0
    report = tmp_path / "golden.xml"
    assert invoke("golden", "check", "--junit", str(report), str(logs)) == 0
    assert len(cases(report)) == 3 and all(c.find("failure") is None for c in cases(report).values())
    clean = logs / "clean" / "session.jsonl"
    lines = clean.read_bytes().splitlines(keepends=True)
    user = next(i for i, line in enumerate(lines) if b'"type":"user/message"' in line and b'"surfaceOp"' in line)
    lines[user] = lines[user].replace(b'"text":"', b'"text":"changed ', 1)
    clean.write_bytes(b"".join(lines))
    assert invoke("golden", "check", "--junit", str(report), str(logs)) == 1
    failure = cases(report)[f"{logs}/clean/session.jsonl"].find("failure")
    assert failure is not None and failure.get("type") == "golden-diff" and "changed: sha256" in (failure.text or "")
    result = CliRunner().invoke(main, ["golden", "check", "--format", "junit", str(logs)])   # the same, on stdout
    printed = tmp_path / "printed.xml"
    printed.write_text(result.stdout, encoding="utf-8")
    assert result.exit_code == 1 and result.stdout.startswith("<?xml")
    assert sorted(cases(printed)) == sorted(cases(report))


def test_lone_surrogates_from_the_log_stay_xml_safe(tmp_path: Path) -> None:
    """JSON.parse accepts a lone surrogate escape; it reaches finding text but must not reach the XML raw."""
    log = tmp_path / "surrogate.jsonl"
    log.write_bytes(HEADER + b'{"type":"x\\ud800","data":{}}\n')
    report = tmp_path / "surrogate.xml"
    assert invoke("verify", "--format", "json", "--junit", str(report), str(log)) == 1
    [case] = cases(report).values()
    failure = case.find("failure")
    assert failure is not None and 'event type "x\\ud800"' in (failure.text or "")


def test_the_schema_rejects_what_ci_readers_would(tmp_path: Path) -> None:
    """The XSD is not vacuous: a case without a name, or two failures in one case, is invalid."""
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="s" tests="1" failures="2" errors="0" time="0">'
                   '<testcase classname="c" time="0"><failure type="t"/><failure type="t"/></testcase>'
                   "</testsuite></testsuites>")
    assert not SCHEMA.is_valid(str(bad))


def test_report_directory_is_created_and_each_case_carries_its_time(logs: Path, tmp_path: Path) -> None:
    report = tmp_path / "not" / "yet" / "verify.xml"
    invoke("verify", "--junit", str(report), str(logs / "clean"))
    [case] = cases(report).values()
    assert float(case.get("time", "0")) > 0


def test_an_older_generation_is_a_skipped_case_and_each_case_names_its_generation(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[1] / "sample_logs" / "compaction-recovery"
    report = tmp_path / "generations.xml"
    assert invoke("verify", "--junit", str(report), str(sample)) == 0
    found = cases(report)
    skipped = found[f"{sample}/session.jsonl"].find("skipped")
    assert skipped is not None and "session.v3.jsonl" in (skipped.get("message") or "")
    read = found[f"{sample}/session.v3.jsonl"]
    assert read.find("skipped") is None and "read as log format v3" in (read.findtext("system-out") or "")
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("skipped")) == ("2", "1")
