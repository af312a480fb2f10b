"""Memory bounded by the largest line, not the log (issue 18, item 4), through the real CLI in a child held to a
hard address-space limit (tests/test_hostile_inputs.py): verify's JSON document keeps one request at a time,
in both engines, and writes the same bytes as one json.dumps of the whole document would."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from conftest_reference import LOGS_ROOT
from dsh_audit import verify_paths
from dsh_audit.text import printable
from dsh_audit.verify import summary
from test_hostile_inputs import REPO, MiB, audit, bounded, digest

SCALE = REPO / "benchmarks" / "scale_cases.py"
# 100,000 requests: at the 2.2 KB each that verify --format json kept per request before (261 MB peak measured
# here, 2,487 MB at a million), this log alone would break the bound; kept on disk, it costs the interpreter's
# 40 MB. A million steps (benchmarks/scale_cases.py memory) takes a minute more and peaks the same.
STEPS = 100_000
JSON_BUDGET = 200 * MiB


@pytest.fixture(scope="module")
def many_steps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log = tmp_path_factory.mktemp("steps") / "steps.jsonl"
    subprocess.run([sys.executable, str(SCALE), "steps", "--count", str(STEPS), "--out", str(log)], check=True,
                   capture_output=True, cwd=REPO)
    return log


@pytest.mark.parametrize("fast_path", ["1", "0"])
def test_verify_json_keeps_one_request_not_the_log(many_steps: Path, fast_path: str) -> None:
    before = digest(many_steps)
    run = audit("verify", "--format", "json", str(many_steps), env={"DSH_AUDIT_FAST_PATH": fast_path})
    assert run.code == 0, run.err
    bounded(run, JSON_BUDGET)
    document = json.loads(run.out)
    [log] = document["logs"]
    assert document["summary"]["requests"] == len(log["requests"]) == STEPS
    assert [r["step"] for r in log["requests"][-2:]] == [STEPS - 1, STEPS]
    assert digest(many_steps) == before


def test_a_full_temporary_folder_is_one_line_and_exit_2(many_steps: Path) -> None:
    """The digests beyond 4 MiB go to a temporary file; a folder that cannot take them is named, as a full
    disk would be (RLIMIT_FSIZE stands in for it: Python ignores SIGXFSZ, so the write fails with EFBIG)."""
    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (MiB, MiB))

    for fast_path in ("1", "0"):
        done = subprocess.run([sys.executable, "-m", "dsh_audit", "verify", "--format", "json", str(many_steps)],
                              capture_output=True, text=True, preexec_fn=small_files, cwd=REPO, check=False,
                              env={"PATH": "/usr/bin:/bin", "DSH_AUDIT_FAST_PATH": fast_path})
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith("audit: ") and "request digests for --format json): File too large" in line


def test_the_json_document_is_what_one_json_dumps_of_it_writes() -> None:
    """The streamed document against the whole document built in memory and dumped at once, on the corpus."""
    reports = list(verify_paths([LOGS_ROOT], jobs=1))
    whole = {"logs": [{
        "log": r.label, "generation": r.generation, "ok": not r.failed(), "skipped": r.skipped,
        "supersededBy": r.superseded_by, "ignored": r.ignored, "events": r.events, "readError": r.read_error,
        "rejectedByReference": r.rejected, "unlistedFindings": r.unlisted,
        "findings": [{"code": f.code, "severity": f.severity, "line": f.line, "seq": f.seq, "eventType": f.event_type,
                      "message": f.message, "rejects": f.rejects} for f in r.findings],
        "requests": [{"turn": q.turn, "step": q.step, "attempt": q.attempt, "dispatchSeq": q.dispatch_seq,
                      "sha256": q.sha256, "inherited": q.inherited, "extendsPrevious": q.extends_previous,
                      "causes": q.causes} for q in r.requests]} for r in reports], "summary": summary(reports)}
    assert sum(len(log["requests"]) for log in whole["logs"]) == 211
    done = subprocess.run([sys.executable, "-m", "dsh_audit", "verify", "--format", "json", "-j", "2",
                           str(LOGS_ROOT)], capture_output=True, cwd=REPO, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stdout.decode() == printable(json.dumps(whole, indent=2, ensure_ascii=False)) + "\n"
