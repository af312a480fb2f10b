"""JUnit XML (the Ant/Jenkins dialect every CI system displays): one <testcase> per log, classname = the log's
directory, name = its file. A failed log carries a <failure> listing its findings; an unreadable one an <error>;
an older generation that a session directory's newer one supersedes, or a log a filter left out, is <skipped>. The
output names the log format version each log was read as.

Log content reaches the report through finding messages, so text is made XML-safe first: characters XML 1.0
forbids (control characters, lone surrogates) are shown as \\uXXXX escapes instead of making the file invalid.
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePath

from .findings import failing_rule
from .golden import LogDiff
from .output import open_output
from .verify import LogReport

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


@dataclass(frozen=True, slots=True)
class TestCase:
    classname: str
    name: str
    seconds: float = 0.0
    failure: str | None = None      # summary line; `details` holds the full text
    error: str | None = None
    details: str = ""
    failure_type: str = "findings"
    skipped: str | None = None

    __test__ = False   # not a pytest class


def case_for_log(label: str, *, seconds: float = 0.0, failure: str | None = None, error: str | None = None,
                 details: str = "", failure_type: str = "findings", skipped: str | None = None) -> TestCase:
    """classname = directory (for a URL, the URL of its prefix), name = file (a SQLite session keeps its
    `#sessionId`)."""
    folder, _, name = label.rpartition("/") if "://" in label else (str(PurePath(label).parent), "",
                                                                     PurePath(label).name)
    return TestCase(classname=folder, name=name, seconds=seconds, failure=failure, error=error,
                    details=details, failure_type=failure_type, skipped=skipped)


def cases_from_reports(reports: Iterable[LogReport], *, strict: bool,
                       seconds: dict[str, float] | None = None) -> list[TestCase]:
    cases = []
    for report in reports:
        elapsed = (seconds or {}).get(report.label, report.seconds)
        if report.superseded_by is not None:
            cases.append(case_for_log(report.label, skipped=f"an older generation: read {report.superseded_by}"))
            continue
        if report.ignored is not None:
            cases.append(case_for_log(report.label, skipped=f"not a dsh log: {report.ignored}"))
            continue
        if report.left_out_by is not None:
            cases.append(case_for_log(report.label, skipped=f"left out by {report.left_out_by}: {report.left_out}"))
            continue
        read_as = [] if report.generation is None else [f"read as log format v{report.generation}"]
        unlisted = [f"... and {sum(report.unlisted.values())} more finding(s), counted but not listed"
                    ] if report.unlisted else []
        details = "\n".join([*read_as, *(f.render() for f in report.findings), *unlisted])
        if report.read_error is not None:
            cases.append(case_for_log(report.label, seconds=elapsed, error=report.read_error,
                                      details=report.read_error))
        elif report.failed(strict):
            cases.append(case_for_log(report.label, seconds=elapsed, details=details,
                                      failure=failing_rule(report.findings, report.unlisted, strict)))
        else:
            cases.append(case_for_log(report.label, seconds=elapsed, details=details))
    return cases


def cases_from_diffs(directory: Path, diffs: Iterable[LogDiff], *, seconds: float) -> list[TestCase]:
    """golden check's cases: a changed, added or removed log fails with what changed; `seconds` each."""
    return [case_for_log(str(directory / diff.key), seconds=seconds, details="\n".join(diff.details()),
                         error=diff.lines[0] if diff.status == "unreadable" else None,
                         skipped=diff.lines[0] if diff.status == "skipped" else None,
                         failure=None if diff.status in ("same", "unreadable", "skipped") else
                         f"{diff.status}: rebuilt requests differ from the golden file",
                         failure_type="golden-diff")
            for diff in diffs]


def junit_tree(suite: str, cases: list[TestCase]) -> ET.ElementTree:
    total = sum(case.seconds for case in cases)
    suites = ET.Element("testsuites", name="dsh-audit", tests=str(len(cases)),
                        failures=str(sum(c.failure is not None for c in cases)),
                        errors=str(sum(c.error is not None for c in cases)), time=f"{total:.3f}")
    element = ET.SubElement(suites, "testsuite", name=suite, tests=str(len(cases)),
                            failures=suites.get("failures", "0"), errors=suites.get("errors", "0"),
                            skipped=str(sum(c.skipped is not None for c in cases)),
                            time=f"{total:.3f}", hostname=xml_text(socket.gethostname()),
                            timestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    for case in cases:
        testcase = ET.SubElement(element, "testcase", classname=xml_text(case.classname), name=xml_text(case.name),
                                 time=f"{case.seconds:.3f}")
        if case.skipped is not None:
            ET.SubElement(testcase, "skipped", message=xml_text(case.skipped))
        elif case.error is not None:
            ET.SubElement(testcase, "error", message=xml_text(case.error), type="unreadable").text = \
                xml_text(case.details)
        elif case.failure is not None:
            ET.SubElement(testcase, "failure", message=xml_text(case.failure), type=case.failure_type).text = \
                xml_text(case.details)
        elif case.details:
            ET.SubElement(testcase, "system-out").text = xml_text(case.details)
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(path: Path, suite: str, cases: list[TestCase], *, inputs: Iterable[Path] = ()) -> None:
    """Write the report by dsh_audit.output's rules: atomically (a CI step reading it never sees half a file),
    never onto one of `inputs`, through a device such as /dev/null. A missing folder is created:
    `--junit reports/verify.xml` needs no setup step."""
    with open_output(path, binary=True, inputs=inputs, what="the JUnit report", create_folder=True) as out:
        junit_tree(suite, cases).write(out, encoding="utf-8", xml_declaration=True)
