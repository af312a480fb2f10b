"""verify over the whole corpus: the verdicts documented in docs/corpus-findings.md, in any process count."""

from __future__ import annotations

from pathlib import Path

from conftest_reference import LOGS_ROOT
from dsh_audit import verify_paths

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
    reports = list(verify_paths([LOGS_ROOT], jobs=1))
    assert len(reports) == 100 and not any(r.read_error for r in reports)
    failed = {str(Path(r.label).relative_to(LOGS_ROOT)) for r in reports if r.failed()}
    assert failed == FAILING
    assert sum(len(r.requests) for r in reports) == 211


def test_parallel_verify_gives_the_same_reports_in_the_same_order() -> None:
    serial = list(verify_paths([LOGS_ROOT], jobs=1))
    parallel = list(verify_paths([LOGS_ROOT], jobs=2))
    assert [r.label for r in parallel] == [r.label for r in serial]
    assert [(r.findings, r.requests) for r in parallel] == [(r.findings, r.requests) for r in serial]
