"""verify over the whole corpus: the verdicts documented in docs/corpus-findings.md, in any process count."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from conftest_reference import LOGS_ROOT
from dsh_audit import digest_spool, verify_paths

FAILING = {
    "apps/web/tests/snapshots/cordis-tool-round/session.jsonl",
    "apps/web/tests/snapshots/minimal-preset/session.jsonl",
    "apps/web/tests/snapshots/web-search-round/session.jsonl",
    "examples/headless-agent/tests/subagent-inheritance-snapshots/parent-override/child.replay.jsonl",
    "packages/test-support/acp-snapshot/tests/fixtures/record-suite/rec-pin/session.jsonl",
    "packages/test-support/acp-snapshot/tests/fixtures/record-suite/rec-pin/session.1.jsonl",
    "packages/test-support/acp-snapshot/tests/fixtures/record-suite/rec-skip/session.jsonl",
    "packages/test-support/acp-snapshot/tests/fixtures/suite/authored-error/session.jsonl",
    "packages/test-support/acp-snapshot/tests/fixtures/suite/blocked-log/session.jsonl",
    "packages/test-support/acp-snapshot/tests/fixtures/suite/pin-turn/session.jsonl",
    "packages/test-support/acp-snapshot/tests/fixtures/suite/shared-pin/session.jsonl",
}


def test_corpus_verdicts_match_the_documented_findings() -> None:
    found = list(verify_paths([LOGS_ROOT], jobs=1))
    reports = [r for r in found if r.ignored is None]
    assert len(reports) == 100 and not any(r.read_error for r in reports)
    assert len(found) == 107   # the corpus's 7 other .jsonl files (stream captures and the like): named, not read
    failed = {str(Path(r.label).relative_to(LOGS_ROOT)) for r in reports if r.failed()}
    assert failed == FAILING
    assert sum(len(r.requests) for r in reports) == 211


def test_parallel_verify_gives_the_same_reports_in_the_same_order() -> None:
    serial = list(verify_paths([LOGS_ROOT], jobs=1))
    parallel = list(verify_paths([LOGS_ROOT], jobs=2))
    assert [r.label for r in parallel] == [r.label for r in serial]
    assert [(r.findings, list(r.requests)) for r in parallel] == [(r.findings, list(r.requests)) for r in serial]


def test_digests_spilled_to_disk_cross_processes_and_leave_no_file(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Past SPILL_BYTES a log's digests are in a temporary file: a worker hands over a named copy, which the
    receiver opens and unlinks, so no file is left and neither process holds them all."""
    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setattr(digest_spool, "SPILL_BYTES", 1)   # every spool on disk
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    serial = list(verify_paths([LOGS_ROOT], jobs=1))
    parallel = list(verify_paths([LOGS_ROOT], jobs=2))
    assert [(r.label, list(r.requests)) for r in parallel] == [(r.label, list(r.requests)) for r in serial]
    assert sum(len(r.requests) for r in parallel) == 211
    assert not list(spill.iterdir())


def test_findings_past_the_cap_are_counted_not_kept(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from dsh_audit.cli import main
    from dsh_audit.verify import FINDINGS_KEPT
    from logbuilder import LogBuilder

    log = LogBuilder()
    for _ in range(FINDINGS_KEPT + 250):
        log.add("x/unknown", {})
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [log.header, *log.events]) + "\n", encoding="utf-8")
    [report] = verify_paths([path])
    assert len(report.findings) == FINDINGS_KEPT and report.unlisted == {"error": 250}
    assert report.failed() and report.rejected
    table = CliRunner().invoke(main, ["verify", str(path)])
    assert table.exit_code == 1
    assert "... and 250 more finding(s), counted but not listed (250 error)" in table.output
    assert f"{FINDINGS_KEPT + 250} error(s)" in table.output.splitlines()[-1]
    document = json.loads(CliRunner().invoke(main, ["verify", "--format", "json", str(path)]).output)
    assert document["logs"][0]["unlistedFindings"] == {"error": 250}
    assert document["summary"]["errors"] == FINDINGS_KEPT + 250
