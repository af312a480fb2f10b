"""`audit golden update|check`: one golden file per directory, per-step diffs, exit codes, logs left untouched.
The corpus is read-only, so every test works on copies in tmp_path."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner

from conftest_reference import LOGS_ROOT, require_corpus
from dsh_audit import reconstruct_file
from dsh_audit.cli import main
from dsh_audit.golden import GOLDEN_NAME, body_text

require_corpus()

SCENARIOS = [
    "examples/headless-agent/tests/snapshots/compaction-recovery",
    "examples/acp-agent/tests/snapshots/lsp-definition",
    "apps/web/tests/snapshots/cordis-tool-round",
]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout + result.stderr


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    for scenario in SCENARIOS:
        target = root / Path(scenario).name
        shutil.copytree(LOGS_ROOT / scenario, target)
        for path in target.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        target.chmod(0o755)
    return root


def snapshot(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != GOLDEN_NAME}


def edit_first_user_text(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    for index, line in enumerate(lines):
        value = json.loads(line)
        if value["type"] == "user/message" and isinstance(value["data"].get("content"), list):
            value["data"]["content"][0]["text"] += " (edited)"
            lines[index] = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            break
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_update_writes_one_sorted_golden_file_and_check_passes(logs: Path) -> None:
    before = snapshot(logs)
    code, out = run("golden", "update", str(logs))
    assert code == 0 and "3 log(s)" in out
    golden_file = logs / GOLDEN_NAME
    text = golden_file.read_text()
    document = json.loads(text)
    assert text == json.dumps(document, indent=2, sort_keys=True) + "\n"
    log = "compaction-recovery/session.jsonl"
    expected = reconstruct_file(logs / log, bodies=False).requests
    assert [r["sha256"] for r in document["logs"][log]["requests"]] == [r.sha256 for r in expected]
    assert [(r["turn"], r["step"], r["attempt"], r["dispatchSeq"]) for r in document["logs"][log]["requests"]] == \
        [(r.turn, r.step, r.attempt, r.dispatch_seq) for r in expected]
    # Keyed by path relative to the directory; stream-json.expected.jsonl has no session header, so is no log.
    assert sorted(document["logs"]) == [f"{Path(s).name}/session.jsonl" for s in sorted(SCENARIOS, key=lambda s:
                                                                                          Path(s).name)]
    assert list(logs.glob("*.tmp")) == [] and list(logs.glob(".dsh-audit-golden.*")) == []
    code, out = run("golden", "check", str(logs))
    assert code == 0 and "0 changed" in " ".join(out.split())   # the summary wraps where the temp path is long
    run("golden", "update", str(logs))
    assert golden_file.read_text() == text          # deterministic
    assert snapshot(logs) == before                  # the logs are never written


def test_changed_request_fails_with_a_per_step_diff(logs: Path) -> None:
    run("golden", "update", str(logs))
    edit_first_user_text(logs / "compaction-recovery/session.jsonl")
    before = snapshot(logs)
    code, out = run("golden", "check", str(logs))
    assert code == 1
    assert "CHANGED    compaction-recovery/session.jsonl" in out
    assert "~ 1.1#1, 1.2#1 changed: other bytes (sha256)" in out
    assert "ok         lsp-definition/session.jsonl" in out
    assert snapshot(logs) == before


def test_full_golden_names_the_differing_message_and_path(logs: Path) -> None:
    run("golden", "update", "--full", str(logs))
    document = json.loads((logs / GOLDEN_NAME).read_text())
    request = document["logs"]["lsp-definition/session.jsonl"]["requests"][0]
    assert json.loads(body_text(request["body"], document["bodies"]) or "")["messages"]
    edit_first_user_text(logs / "lsp-definition/session.jsonl")
    code, out = run("golden", "check", str(logs))
    assert code == 1
    assert "first differing message: index 0" in out
    assert "root['messages'][0]['content'][0]['text']" in out


def test_added_and_removed_requests_and_logs(logs: Path) -> None:
    run("golden", "update", str(logs))
    log = logs / "lsp-definition/session.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    second_step = next(i for i, line in enumerate(lines) if b'"step/start"' in line and b'"step":2' in line)
    log.write_bytes(b"".join(lines[:second_step]))
    shutil.copytree(logs / "compaction-recovery", logs / "new-scenario")
    shutil.rmtree(logs / "cordis-tool-round")
    code, out = run("golden", "check", str(logs))
    assert code == 1
    assert "- 1.2#1 removed" in out
    assert "ADDED      new-scenario/session.jsonl" in out
    assert "REMOVED    cordis-tool-round/session.jsonl" in out


def test_missing_golden_file_and_unreadable_log_exit_2(logs: Path) -> None:
    code, out = run("golden", "check", str(logs))
    assert code == 2 and "no golden file" in out and "Traceback" not in out
    run("golden", "update", str(logs))
    (logs / "broken.jsonl.zstd").write_bytes(b"not zstd at all")
    code, out = run("golden", "check", str(logs))
    assert code == 2 and "UNREADABLE" in out and "broken.jsonl.zstd" in out
    golden = (logs / GOLDEN_NAME).read_bytes()
    code, out = run("golden", "update", str(logs))
    assert code == 2 and "golden file not written" in out
    assert (logs / GOLDEN_NAME).read_bytes() == golden


def test_golden_commands_take_a_directory(logs: Path) -> None:
    code, out = run("golden", "check", str(logs / "lsp-definition/session.jsonl"))
    assert code == 2 and "Traceback" not in out
    (logs / GOLDEN_NAME).write_text("[]")
    code, out = run("golden", "check", str(logs))
    assert code == 2 and "not a dsh-audit golden file" in out


def test_every_command_leaves_its_inputs_byte_identical(logs: Path, tmp_path: Path) -> None:
    """Read-only by construction: after each command every input file has the same bytes, mode and mtime."""
    clean = logs / "lsp-definition/session.jsonl"
    (logs / "torn").mkdir()
    (logs / "torn/session.jsonl").write_bytes(clean.read_bytes()[:-40])
    (logs / "packed").mkdir()
    (logs / "packed/session.jsonl.zstd").write_bytes(zstandard.ZstdCompressor().compress(clean.read_bytes()))
    (logs / "hostile").mkdir()
    lines = clean.read_bytes().splitlines(keepends=True)
    (logs / "hostile/session.jsonl").write_bytes(b"".join([*lines[:3], b"\xff\xfe{\x00\n", *lines[3:], b"\x00{"]))

    def state() -> dict[Path, tuple[bytes, int, int]]:
        return {p: (p.read_bytes(), p.stat().st_mode, p.stat().st_mtime_ns) for p in logs.rglob("*")
                if p.is_file() and p.name != GOLDEN_NAME}

    before = state()
    out = tmp_path / "out"
    out.mkdir()
    commands = [
        ["verify", str(logs)], ["verify", "--strict", "--format", "json", "--junit", str(out / "v.xml"), str(logs)],
        ["rebuild", str(clean)], ["rebuild", "--format", "jsonl", str(logs / "torn/session.jsonl")],
        ["rebuild", "--format", "digest", str(logs / "packed/session.jsonl.zstd")],
        ["header-diff", str(logs)], ["cache-report", "--format", "json", str(logs)],
        ["golden", "update", "--full", str(logs)], ["golden", "check", "--junit", str(out / "g.xml"), str(logs)],
    ]
    for command in commands:
        code, text = run(*command)
        assert code in (0, 1, 2) and "Traceback" not in text, command
        assert state() == before, command


def test_golden_pins_the_generation_and_a_dsh_upgrade_shows_in_the_check(tmp_path: Path) -> None:
    """dsh migrates a session's log by writing its successor beside it: the golden check names the new file and
    reports the old one as gone, and each log's generation is pinned."""
    sample = Path(__file__).resolve().parents[1] / "sample_logs" / "compaction-recovery"
    logs = tmp_path / "golden-logs"
    logs.mkdir()
    shutil.copyfile(sample / "session.jsonl", logs / "session.jsonl")
    assert run("golden", "update", str(logs))[0] == 0
    pinned = json.loads((logs / GOLDEN_NAME).read_text())["logs"]
    assert pinned["session.jsonl"]["generation"] == 0
    shutil.copyfile(sample / "session.v3.jsonl", logs / "session.v3.jsonl")
    code, out = run("golden", "check", str(logs))
    assert code == 1 and "session.v3.jsonl" in out and "- log is in the golden file but no longer" in out


def test_full_golden_stores_each_piece_once_and_gives_every_body_back(logs: Path) -> None:
    """A conversation's requests repeat their history: each message is kept once in `bodies`, and every body
    comes back from its pieces byte for byte (its SHA-256 is the one pinned)."""
    assert run("golden", "update", "--full", str(logs))[0] == 0
    text = (logs / GOLDEN_NAME).read_text()
    document = json.loads(text)
    assert document["format"] == "dsh-audit-golden/2"
    pieces = document["bodies"]
    whole = 0
    for pinned in document["logs"].values():
        for stored in pinned["requests"]:
            body = (body_text(stored["body"], pieces) or "").encode()
            assert hashlib.sha256(body).hexdigest() == stored["sha256"]
            assert isinstance(stored["body"], list)   # split into pieces, not kept whole
            whole += len(body)
    assert len(set(pieces.values())) == len(pieces)          # no piece twice
    assert len(text.encode()) < whole                         # smaller than the bodies it holds


def test_a_body_its_pieces_would_not_give_back_is_kept_whole() -> None:
    from dsh_audit.golden import _stored

    bodies: dict[str, str] = {}
    for body in ('{"model":"m","messages":[{"role":"user","content":"hi"}]}',   # JSON.stringify's bytes
                 '{"model": "m", "messages": []}',                            # other bytes: whole
                 '{"temperature":1.0,"messages":[]}',                          # 1.0 is 1 to JSON.stringify
                 'not json'):
        stored = _stored(body, bodies)
        assert body_text(stored, bodies) == body
        assert isinstance(stored, list) is body.startswith('{"model":"m"')


def test_a_golden_file_of_format_1_is_still_read(logs: Path) -> None:
    """A --full file written before bodies were split keeps each body as a string: check still reads it and
    shows what changed in the body."""
    assert run("golden", "update", "--full", str(logs))[0] == 0
    document = json.loads((logs / GOLDEN_NAME).read_text())
    pieces = document.pop("bodies")
    document["format"] = "dsh-audit-golden/1"
    for pinned in document["logs"].values():
        for request in pinned["requests"]:
            request["body"] = body_text(request["body"], pieces)
    (logs / GOLDEN_NAME).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    assert run("golden", "check", str(logs))[0] == 0
    edit_first_user_text(logs / "lsp-definition/session.jsonl")
    code, out = run("golden", "check", str(logs))
    assert code == 1 and "root['messages'][0]['content'][0]['text']" in out


def two_runs_of_one_session(tmp_path: Path) -> Path:
    sample = Path(__file__).resolve().parents[1] / "sample_logs" / "compaction-recovery" / "session.v3.jsonl"
    logs = tmp_path / "runs"
    for run_name in ("a", "b"):
        (logs / run_name).mkdir(parents=True)
        shutil.copyfile(sample, logs / run_name / "session.v3.jsonl")
    return logs


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")


SYSTEM_LINE = "Verify your work by running the code or tests."


def test_the_same_change_in_many_requests_is_shown_once_with_its_text(tmp_path: Path) -> None:
    """A one-line system-prompt edit changes every request of both runs: one change, named by each log's line,
    its text shown once as header-diff shows a system prompt's; the JUnit report keeps every digest."""
    logs = two_runs_of_one_session(tmp_path)
    assert run("golden", "update", "--full", str(logs))[0] == 0
    for run_name in ("a", "b"):
        edit(logs / run_name / "session.v3.jsonl", SYSTEM_LINE, "Verify your work by running the tests.")
    code, out = run("golden", "check", "--junit", str(tmp_path / "golden.xml"), str(logs))
    assert code == 1
    assert out.count("~ 1.1#1, 1.2#1, 1.2#2 changed: change 1") == 2
    assert "change 1: the same change in 6 requests of 2 logs" in out
    assert "system prompt changed: 23 lines -> 23 lines (+1 -1 lines)" in out
    assert out.count(f"-{SYSTEM_LINE}") == 1 and out.count("+Verify your work by running the tests.") == 1
    assert "sha256" not in out and "change 2" not in out
    assert (tmp_path / "golden.xml").read_text().count("changed: sha256 ") == 6


def test_a_changed_message_text_shows_its_lines_and_different_changes_stay_apart(tmp_path: Path) -> None:
    logs = two_runs_of_one_session(tmp_path)
    assert run("golden", "update", "--full", str(logs))[0] == 0
    edit(logs / "a" / "session.v3.jsonl", "Establish a durable", "Establish a lasting")
    code, out = run("golden", "check", str(logs))
    assert code == 1 and "ok         b/session.v3.jsonl" in out
    assert "~ 1.1#1, 1.2#1 changed: change 1" in out and "change 1: the same change in 2 requests\n" in out
    assert "root['messages'][1]['content'][0]['text']" in out
    assert "-Establish a durable compaction premise" in out and "+Establish a lasting compaction premise" in out
    for run_name in ("a", "b"):   # and the system prompt edited in both: each change once, by what it is
        edit(logs / run_name / "session.v3.jsonl", SYSTEM_LINE, "Verify your work by running the tests.")
    code, out = run("golden", "check", str(logs))
    assert code == 1 and "change 1: the same change in 6 requests of 2 logs" in out
    assert "~ 1.1#1, 1.2#1 changed: changes 1, 2" in out and "change 2: the same change in 2 requests\n" in out
    assert out.count(f"-{SYSTEM_LINE}") == 1 and out.count("-Establish a durable") == 1


def test_a_digest_only_golden_file_says_how_to_see_the_text(tmp_path: Path) -> None:
    logs = two_runs_of_one_session(tmp_path)
    assert run("golden", "update", str(logs))[0] == 0
    edit(logs / "a" / "session.v3.jsonl", SYSTEM_LINE, "Verify your work by running the tests.")
    code, out = run("golden", "check", str(logs))
    assert code == 1 and "~ 1.1#1, 1.2#1, 1.2#2 changed: other bytes (sha256)" in out and "change 1" not in out
    assert "pins digests only: `audit golden update --full` pins the bodies too" in " ".join(out.split())


def test_a_golden_file_missing_a_piece_says_so_and_still_gates(tmp_path: Path) -> None:
    """A piece the file names but does not hold (a hand edit, a bad merge): the changed request is still a
    change, exit 1, and says its pinned text cannot be shown; no traceback."""
    logs = two_runs_of_one_session(tmp_path)
    assert run("golden", "update", "--full", str(logs))[0] == 0
    golden_file = logs / GOLDEN_NAME
    document = json.loads(golden_file.read_text())
    document["bodies"] = {ref: text for ref, text in document["bodies"].items() if SYSTEM_LINE not in text}
    document["logs"]["b/session.v3.jsonl"]["requests"][0]["body"] = [["messages", {"not": "a ref"}]]
    golden_file.write_text(json.dumps(document))
    assert run("golden", "check", str(logs))[0] == 0   # every digest still matches: no body is read
    for run_name in ("a", "b"):
        edit(logs / run_name / "session.v3.jsonl", SYSTEM_LINE, "Verify your work by running the tests.")
    code, out = run("golden", "check", str(logs))
    assert code == 1 and "the pinned body is not readable: its text cannot be shown" in out
    assert "Traceback" not in out


def test_a_full_golden_file_stays_about_the_size_of_its_logs(tmp_path: Path) -> None:
    """Each request repeats the history before it, so whole bodies grow as the square of a session's length
    (24.8 MB for this 2 MB log); stored as pieces, each message once, the file stays below the log's size."""
    import subprocess
    import sys

    logs = tmp_path / "big"
    logs.mkdir()
    log = logs / "session.jsonl"
    subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "benchmarks" / "generate_log.py"),
                    "--size", "2MB", "--seed", "7", "--out", str(log)], check=True, capture_output=True, timeout=300)
    assert run("golden", "update", "--full", str(logs))[0] == 0
    document = json.loads((logs / GOLDEN_NAME).read_text())
    assert len(document["logs"]["session.jsonl"]["requests"]) == 94
    assert (logs / GOLDEN_NAME).stat().st_size < log.stat().st_size
    assert run("golden", "check", str(logs))[0] == 0


def test_a_log_s_line_names_twelve_requests_then_counts_the_rest() -> None:
    from dsh_audit.golden import LogDiff, RequestChange
    from dsh_audit.reports import golden_view
    from dsh_audit.reports.views import Terminal

    part = {"field": "config.temperature", "change": "changed", "path": None, "before": "0", "after": "1",
            "detail": None}
    changes = [RequestChange(f"{k}.1#1", ("a" * 64, "b" * 64), (k, k), (part,)) for k in range(1, 16)]
    view = golden_view.render([LogDiff("x/session.jsonl", "changed", [], changes)], "g.json",
                              Terminal(width=200, color=False))
    assert "~ 1.1#1, 2.1#1, 3.1#1, 4.1#1, 5.1#1, 6.1#1, 7.1#1, 8.1#1, 9.1#1, 10.1#1, 11.1#1, 12.1#1, … 3 more " \
           "changed: change 1" in view
    assert "change 1: the same change in 15 requests\n    config.temperature: 0 -> 1" in view
