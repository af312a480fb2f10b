"""Memory bounded by the largest line, not the log (issue 18, item 4), through the real CLI in a child held to a
hard address-space limit (tests/test_hostile_inputs.py): verify's JSON document keeps one request at a time,
in both engines, and writes the same bytes as one json.dumps of the whole document would; a packed run past
the member cap is refused before its line is parsed, in one line, within 4 times the line."""

from __future__ import annotations

import io
import json
import pickle
import random
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest_reference import LOGS_ROOT
from dsh_audit import digest_spool, verify_paths
from dsh_audit.findings import failing_rule
from dsh_audit.readers import packed
from dsh_audit.records import RequestDigest
from dsh_audit.text import printable
from dsh_audit.verify import summary, verify_path
from test_hostile_inputs import REPO, MiB, audit, bounded, digest, one_line_error

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


def test_rebuild_digests_past_a_full_temporary_folder_are_one_line_and_exit_2(many_steps: Path) -> None:
    """rebuild --format digest's lines wait for the fast path's verdict, past 4 MiB in a temporary file: a
    folder that cannot take them is named, and nothing is printed before the error."""
    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (MiB, MiB))

    done = subprocess.run([sys.executable, "-m", "dsh_audit", "rebuild", "--format", "digest", str(many_steps)],
                          capture_output=True, text=True, preexec_fn=small_files, cwd=REPO, check=False,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stdout == "", done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("audit: ") and line.endswith("(rebuild's request digests): File too large"), line


def test_the_json_document_is_what_one_json_dumps_of_it_writes() -> None:
    """The streamed document against the whole document built in memory and dumped at once, on the corpus."""
    reports = list(verify_paths([LOGS_ROOT], jobs=1))
    whole = {"schema": "dsh-audit/verify", "version": 1, "logs": [{
        "log": r.label, "generation": r.generation, "ok": not r.failed(),
        "failedBy": failing_rule(r.findings, r.unlisted, False) or None, "skipped": r.skipped,
        "supersededBy": r.superseded_by, "ignored": r.ignored, "leftOutBy": r.left_out_by,
        "leftOut": r.left_out, "events": r.events, "readError": r.read_error,
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


# -- packed runs: refused past the member cap before their line is parsed ------------------------------------
RUN_MEMBERS = 5_000_000   # one 55 MB line in v2, 84 MB in v0 (whose message cites every member)


@pytest.fixture(scope="module", params=[0, 2], ids=["v0-row", "v2-stream"])
def huge_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Written by a child: a child's peak RSS starts from its parent's (Linux carries it across exec)."""
    log = tmp_path_factory.mktemp("packed") / "run.jsonl"
    subprocess.run([sys.executable, str(SCALE), "packed", "--count", str(RUN_MEMBERS), "--generation",
                    str(request.param), "--out", str(log)], check=True, capture_output=True, cwd=REPO)
    return log


@pytest.mark.parametrize("command", ["verify", "cache-report"])
def test_a_run_of_millions_of_members_is_one_line_within_4x_its_line(huge_run: Path, command: str) -> None:
    """Parsed, the run would cost 13 times its line (728 MB for the 55 MB one); it is refused at the line's
    bytes, in both engines (the fast path leaves it to the full verifier)."""
    before = digest(huge_run)
    line = max(len(row) for row in huge_run.read_bytes().splitlines())
    for engine in ("1", "0"):
        run = audit(command, str(huge_run), env={"DSH_AUDIT_FAST_PATH": engine})
        one_line_error(run, 2, ":6: seq 4: a packed run of 5,000,000 members, over the cap of 1,048,576 per run")
        bounded(run, 4 * line)
    assert digest(huge_run) == before


def _packed_log(tmp_path: Path, members: int, generation: int) -> Path:
    log = tmp_path / f"v{generation}-{members}.jsonl"
    subprocess.run([sys.executable, str(SCALE), "packed", "--count", str(members), "--generation", str(generation),
                    "--out", str(log)], check=True, capture_output=True, cwd=REPO)
    return log


@pytest.mark.parametrize("generation", [0, 2])
@pytest.mark.parametrize("engine", ["1", "0"])
def test_the_member_cap_is_exact_in_both_engines(generation: int, engine: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packed, "MAX_MEMBERS", 10)
    monkeypatch.setattr(packed, "SCANNED_LINE_BYTES", 20)
    monkeypatch.setenv("DSH_AUDIT_FAST_PATH", engine)
    [at_cap] = verify_path(_packed_log(tmp_path, 10, generation))
    assert at_cap.read_error is None and not at_cap.failed() and at_cap.request_count == 1
    over = _packed_log(tmp_path, 11, generation)
    [refused] = verify_path(over)
    assert refused.read_error == f"{over}:6: seq 4: {packed.member_cap_message(11)}"
    torn = tmp_path / "torn.jsonl"   # unterminated, the final line is dropped unread whatever it holds
    torn.write_bytes(b"\n".join(over.read_bytes().splitlines()[:6]))
    [dropped] = verify_path(torn)
    assert dropped.read_error is None
    assert [(f.code, f.line) for f in dropped.findings if f.code == "torn-tail"] == [("torn-tail", 6)]


def test_members_are_counted_in_the_bytes_as_the_parse_counts_them() -> None:
    """Strings with quotes, backslashes, commas and brackets, escaped every way JSON allows."""
    rng = random.Random(18)
    alphabet = ['"', "\\", ",", "[", "]", "a", "é", "\u2028", "\n", "\\\\", '\\"', "\ud800"]
    for _ in range(500):
        texts = ["".join(rng.choices(alphabet, k=rng.randrange(6))) for _ in range(rng.randrange(1, 30))]
        gaps = [rng.randrange(3) for _ in range(rng.randrange(len(texts) + 3))]
        key = rng.choice(["texts", "args"])
        for line in (json.dumps({"type": "text-chunks", "seq0": 3, "data": {"dt": gaps, key: texts}},
                                ensure_ascii=rng.random() < 0.5),
                     json.dumps({"seq": 7, "data": {"stream": [{"type": "chunk"}, {key: texts, "dt": gaps}]}})):
            found = packed.largest_run(line.encode("utf-8", "surrogatepass"))
            assert found is not None and found[0] == max(len(texts), len(gaps) + 1), line
            assert found[1] in (3, 7)


@pytest.mark.parametrize("spill_bytes", [digest_spool.SPILL_BYTES, 1], ids=["in-memory", "on-disk"])
def test_the_spool_gives_back_exactly_what_it_kept_also_across_processes(spill_bytes: int, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(digest_spool, "SPILL_BYTES", spill_bytes)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    kept = [RequestDigest(2**64, 10**30, 1, 7, None, True, False, ["replace@7: \ud800 quoted \x00", "é"]),
            RequestDigest(1, 2, 3, 4, "ab" * 32, False, True, [])]
    spool = digest_spool.DigestSpool()
    for request in kept:
        spool.append(request)
    assert len(spool) == 2 and list(spool) == kept and list(spool) == kept   # read back as often as asked
    moved = pickle.loads(pickle.dumps(spool))
    assert not list(tmp_path.iterdir())   # the handed-over copy is unlinked by its receiver
    assert list(moved) == kept and len(moved) == 2


@pytest.mark.parametrize("spill_bytes", [digest_spool.SPILL_BYTES, 1], ids=["in-memory", "on-disk"])
def test_the_spool_gives_back_records_its_batch_has_not_written_yet(spill_bytes: int, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Records reach the file LINES_PER_WRITE at a time: a read back (iterating, or handing the spool to another
    process) holds every record appended before it, across batch boundaries and with appends after reads."""
    monkeypatch.setattr(digest_spool, "SPILL_BYTES", spill_bytes)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    batch = digest_spool.LINES_PER_WRITE
    kept = [RequestDigest(k, 1, 1, k, "ab" * 32, False, True, [f"cause {k}"]) for k in range(2 * batch + 3)]
    spool = digest_spool.DigestSpool()
    for k, request in enumerate(kept):
        spool.append(request)
        if k in (2, batch - 1, batch + 1):
            assert list(spool) == kept[:k + 1]
    assert list(spool) == kept
    moved = pickle.loads(pickle.dumps(spool))
    assert not list(tmp_path.iterdir())
    assert list(moved) == kept
    moved.append(kept[0])   # the receiver appends after what it was handed
    assert list(moved) == [*kept, kept[0]]


@pytest.mark.parametrize("spill_bytes", [digest_spool.SPILL_BYTES, 1], ids=["in-memory", "on-disk"])
def test_digest_lines_write_out_what_they_kept(spill_bytes: int, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """rebuild --format digest's lines, kept while the fast path decides: byte for byte as printed, in order,
    in memory or in an anonymous file that leaves nothing behind."""
    monkeypatch.setattr(digest_spool, "SPILL_BYTES", spill_bytes)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    kept = [RequestDigest(1, 2, 3, 4, "ab" * 32, False, True, []),
            RequestDigest(10**30, 1, 1, 2**64, "cd" * 32, True, False, ["replace@7: quoted"])] * 40_000
    lines = digest_spool.DigestLines()
    for request in kept:
        lines.append(request)
    assert not list(tmp_path.iterdir())
    written = io.BytesIO()
    lines.write_to(written)
    assert len(lines) == len(kept)
    assert written.getvalue() == b"".join(digest_spool.digest_line(request) for request in kept)
    assert written.getvalue().startswith(b"1.2#3\tseq=4\t" + b"ab" * 32 + b"\n1000000000000000000000000000000.1#1\t")
