"""Issue 12, items 3, 5 and 7: text from a log is data, never terminal control; sidecars are read only as
regular files beside the log; header-diff reads one log file at a time and keeps only what its next diff
needs; a replace costs what it shadows. Outputs are checked through the real CLI in a subprocess."""

from __future__ import annotations

import gc
import json
import os
import random
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_audit.cli import main
from dsh_audit.reports import header_diff
from dsh_audit.reports.header_diff import build_header_diff
from dsh_audit.surface import Surface
from dsh_audit.text import display, printable, printable_row
from dsh_audit.walker import Walker
from logbuilder import LogBuilder

# What a hostile log may hold: erase the line and return (a forged "ok" row over a FAIL), OSC 52 (writes the
# clipboard), BEL, a C1 CSI, a right-to-left override, DEL.
EVIL = "\x1b[2K\rok \x1b]52;c;ZXZpbA==\x07\x9b31m\u202eliaf\x7f"
# Raw characters no human view may print: C0 but newline and tab, DEL, C1, bidi controls, U+2028/9.
ACTIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
TOOL = {"name": f"read{EVIL}", "description": f"reads{EVIL}", "parameters": {"type": "object", "properties": {}}}


def audit(*args: str, cwd: Path, env: dict[str, str] | None = None,
          limit_files: int | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process (optionally with at most `limit_files` open files)."""
    def limited() -> None:
        if limit_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit_files, limit_files))

    return subprocess.run([sys.executable, "-m", "dsh_audit", *args], capture_output=True, text=True,
                          encoding="utf-8", errors="surrogateescape", cwd=cwd, timeout=120, check=False,
                          env={**os.environ, "COLUMNS": "150", "NO_COLOR": "1", **(env or {})},
                          preexec_fn=limited)


def write(log: LogBuilder, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in [log.header, *log.events]) + "\n",
                    encoding="utf-8")
    return path


def hostile_log(path: Path) -> Path:
    """EVIL in the session id and cwd, a tool name, a header config key and reason, an event type, the system
    prompt, user messages and an answer."""
    log = LogBuilder(f"s{EVIL}", cwd=f"/w/{EVIL}")
    usage = {"inputTokens": 100, "outputTokens": 10, "cacheReadTokens": 0}
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.user(f"hello {EVIL}")
    log.header_event("initial", system=f"be exact\n{EVIL}\n", tools=[TOOL], **{f"k{EVIL}": 1})
    log.response(1, 1, f"answer {EVIL}", usage=usage)
    log.add("step/end", {"turn": 1, "step": 1})
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    log.add(f"x/{EVIL}", {"v": EVIL}, ignorable=True)
    log.add("turn/start", {"turn": 2})
    log.add("step/start", {"turn": 2, "step": 1})
    log.user(f"again {EVIL}")
    log.header_event(f"change{EVIL}", system=f"be exact\n{EVIL}!\n", tools=[TOOL, {**TOOL, "name": f"write{EVIL}"}],
                     **{f"k{EVIL}": 2})
    log.response(2, 1, "ok", usage={**usage, "inputTokens": 200})
    log.add("step/end", {"turn": 2, "step": 1})
    log.add("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    return write(log, path)


# -- the rule ---------------------------------------------------------------------------------------------
def test_printable_escapes_what_acts_on_a_terminal_and_keeps_json_data() -> None:
    assert printable(f"a\tb\nc{EVIL}") == ("a\tb\nc\\u001b[2K\\rok \\u001b]52;c;ZXZpbA==\\u0007\\u009b31m"
                                            "\\u202eliaf\\u007f")
    assert display("a\tb\nc\rd\b\f") == "a\\tb\\nc\\rd\\b\\f"
    assert printable("lone \ud800") == display("lone \ud800") == "lone \\ud800"
    assert printable("C:\\path é ü ✓ 中文") == "C:\\path é ü ✓ 中文"   # backslashes and text untouched
    assert display(display(EVIL)) == display(EVIL) and not ACTIVE.search(display(EVIL))
    everything = "".join(map(chr, range(0x00, 0xA0))) + "\u2028\u2029\u202a\u202e\u2066\u2069"
    document = {"k" + everything: [everything, EVIL], "lone": "\udfff"}
    shown = printable(json.dumps(document, indent=2, ensure_ascii=False))
    assert not ACTIVE.search(shown) and json.loads(shown) == document   # valid JSON, the same data


def test_machine_rows_keep_the_real_text() -> None:
    assert printable_row({"a": EVIL, "b": "x\ud800", "n": 1}) == {"a": EVIL, "b": "x\\ud800", "n": 1}


# -- every human view -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [
    ["verify", "session.jsonl"], ["verify", "--strict", "session.jsonl"],
    ["cache-report", "session.jsonl"], ["cache-report", "--wide", "session.jsonl"],
    ["header-diff", "session.jsonl"], ["header-diff", "--wide", "session.jsonl"],
    ["explain", "session.jsonl", "2.1"]])
def test_human_views_show_log_text_escaped(command: list[str], tmp_path: Path) -> None:
    hostile_log(tmp_path / "session.jsonl")
    done = audit(*command, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    assert not ACTIVE.search(done.stdout + done.stderr), (done.stdout + done.stderr).encode("unicode_escape")
    assert "Traceback" not in done.stderr
    if command != ["cache-report", "session.jsonl"]:   # its narrow table leaves out the cause's detail
        assert "\\u001b[2K\\rok \\u001b]52;c;" in done.stdout   # shown, as JSON spells it


def test_the_sessions_table_shows_log_text_escaped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hostile_log(home / "sessions" / "--w--" / "s1" / "session.jsonl")
    (home / "sessions" / "--w--" / "s2").mkdir(parents=True)
    (home / "sessions" / "--w--" / "s2" / "session.jsonl").write_text(f"{EVIL * 20}\n")   # an error row
    done = audit("sessions", cwd=tmp_path, env={"DSH_HOME": str(home), "COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    assert not ACTIVE.search(done.stdout + done.stderr), done.stdout.encode("unicode_escape")
    lines = done.stdout.splitlines()
    rows = [line for line in lines if not line.startswith(" ") and "session(s) in" not in line]   # not the error

    assert len(rows) == 3 and all(len(line) <= 100 for line in lines), lines   # widths count the escapes


def test_file_and_folder_names_are_shown_escaped(tmp_path: Path) -> None:
    """A log's path is text the user did not write either: verify's status lines and golden's show it escaped."""
    folder = tmp_path / "logs" / "a\x1b[2K\rok\nb"
    hostile_log(folder / "session.jsonl")
    for command in (["verify", "logs"], ["golden", "update", "logs"], ["golden", "check", "logs"]):
        done = audit(*command, cwd=tmp_path)
        assert done.returncode in (0, 1), done.stderr
        assert not ACTIVE.search(done.stdout + done.stderr), (done.stdout + done.stderr).encode("unicode_escape")
        if command[0] == "verify" or command[1] == "check":   # update names only the golden file
            assert "a\\u001b[2K\\rok\\nb" in done.stdout + done.stderr, command


def test_a_finding_is_one_line_whatever_the_log_holds() -> None:
    from dsh_audit.findings import Finding

    line = Finding("schema", f"bad\n{EVIL}", seq=1, line=2, event_type=f"x/\n{EVIL}", log="a.jsonl").render()
    assert "\n" not in line and not ACTIVE.search(line) and line.startswith("a.jsonl:2: seq 1: x/\\n\\u001b")


def test_machine_formats_carry_the_real_text(tmp_path: Path) -> None:
    hostile_log(tmp_path / "session.jsonl")
    done = audit("header-diff", "--format", "json", "session.jsonl", cwd=tmp_path)
    rows = json.loads(done.stdout)["rows"]
    assert f"config.k{EVIL}" in {row["field"] for row in rows} and rows[0]["sessionId"] == f"s{EVIL}"
    done = audit("header-diff", "--format", "csv", "--out", "diff.csv", "session.jsonl", cwd=tmp_path)
    assert done.returncode == 0 and f"write{EVIL}" in (tmp_path / "diff.csv").read_bytes().decode()
    done = audit("verify", "--format", "json", "session.jsonl", cwd=tmp_path)
    assert not ACTIVE.search(done.stdout)   # JSON escapes, which json.loads reads back as the text
    types = {finding["eventType"] for finding in json.loads(done.stdout)["logs"][0]["findings"]}
    assert f"x/{EVIL}" in types
    done = audit("rebuild", "session.jsonl", cwd=tmp_path)
    request = json.loads(done.stdout)["requests"][0]["request"]
    assert request["tools"][0]["name"] == f"read{EVIL}"
    done = audit("rebuild", "--format", "jsonl", "session.jsonl", cwd=tmp_path)
    assert json.loads(done.stdout.splitlines()[0]) == request   # the exact bytes, untouched


# -- sidecars -------------------------------------------------------------------------------------------------
def sidecar_run(tmp_path: Path) -> Path:
    log = LogBuilder("side")   # a header change: the second request's expected read is counted on the prompt
    log.simple_turn(1, "hi", "hello", header_reason="initial", system="{{system}}")
    log.simple_turn(2, "more", "sure", header_reason="change", system="{{system}}", temperature=0.5)
    write(log, tmp_path / "run" / "session.jsonl")
    return tmp_path / "run"


def test_a_symlinked_sidecar_is_refused_and_its_target_never_shown(tmp_path: Path) -> None:
    run = sidecar_run(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET CONTENT", encoding="utf-8")
    (run / "system-prompt.expected.md").symlink_to(secret)
    done = audit("cache-report", "--sidecars", "--format", "csv", str(run), cwd=tmp_path)
    assert done.returncode == 2 and "SECRET" not in done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "system-prompt.expected.md" in done.stderr
    assert "symbolic link" in done.stderr
    done = audit("cache-report", "--format", "csv", str(run), cwd=tmp_path)   # without the flag: never read
    assert done.returncode == 0 and "SECRET" not in done.stdout


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "oversized", "directory", "not-utf8", "not-json"])
def test_a_sidecar_that_is_not_a_small_regular_file_is_one_line_exit_2(kind: str, tmp_path: Path) -> None:
    run = sidecar_run(tmp_path)
    name = "tool-schemas.expected.json" if kind == "not-json" else "system-prompt.expected.md"
    sidecar = run / name
    if kind == "fifo":
        os.mkfifo(sidecar)   # opening it for reading used to wait for a writer forever
    elif kind == "dev-zero":
        sidecar.symlink_to("/dev/zero")
    elif kind == "oversized":
        with sidecar.open("wb") as handle:   # sparse: costs no disk
            handle.truncate(16 * 1024 * 1024 + 1)
    elif kind == "directory":
        sidecar.mkdir()
    elif kind == "not-utf8":
        sidecar.write_bytes(b"\xff\xfe")
    else:
        sidecar.write_text("[" * 10 + "oops", encoding="utf-8")
    done = CliRunner().invoke(main, ["cache-report", "--sidecars", str(run)])   # in process: the same error path
    assert done.exit_code == 2, done.output
    assert done.stderr.count("\n") == 1 and name in done.stderr and "Traceback" not in done.stderr


def test_a_regular_sidecar_is_still_read(tmp_path: Path) -> None:
    run = sidecar_run(tmp_path)
    (run / "system-prompt.expected.md").write_text("You are helpful.\n", encoding="utf-8")
    done = CliRunner().invoke(main, ["cache-report", "--sidecars", "--format", "json", str(run)])
    assert done.exit_code == 0, done.output
    assert [row["approximate"] for row in json.loads(done.stdout)["rows"]] == [False, False]   # the prompt known
    done = CliRunner().invoke(main, ["cache-report", "--format", "json", str(run)])
    assert [row["approximate"] for row in json.loads(done.stdout)["rows"]] == [False, True]    # left out


# -- header-diff: one log file open at a time, only what the next diff needs ---------------------------------
def small_log(session_id: str, **header: Any) -> LogBuilder:
    log = LogBuilder(session_id, **header)
    log.simple_turn(1, "hi", "hello", header_reason="initial")
    return log


def test_header_diff_reads_300_logs_with_200_files_allowed(tmp_path: Path) -> None:
    for k in range(300):
        write(small_log(f"s-{k:03d}"), tmp_path / "logs" / f"log-{k:03d}.jsonl")
    done = audit("header-diff", "--format", "csv", "logs", cwd=tmp_path, limit_files=200)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1 + 300 and "Too many open files" not in done.stderr


def test_header_churn_keeps_one_snapshot_and_joins_each_system_head_once(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A v3 log of 300 header changes under one 40-block system head: every change is diffed against the one
    before as it is read, so the snapshots alive stay at two whatever the count, and the head's text is joined
    once, not once per event."""
    log = LogBuilder("churn", version=3)
    log.add("system/message", {"message": {"role": "system", "content": [
        {"type": "text", "text": f"rule {k}\n"} for k in range(40)]}}, surfaceOp="append")
    log.add("turn/start", {"turn": 1})
    for k in range(300):
        log.add("request/header", {"header": {"config": {"provider": "p", "model": "m", "temperature": k}},
                                   "reason": "initial" if k == 0 else "change"})
    path = write(log, tmp_path / "session.v3.jsonl")
    alive: list[int] = []
    joins = 0
    snapshot_rows, system_text = header_diff._snapshot_rows, header_diff.system_text

    def counting_rows(*args: Any) -> list[dict[str, Any]]:
        if args[1].seq in (100, 300):
            alive.append(sum(isinstance(o, header_diff.Snapshot) for o in gc.get_objects()))
        return snapshot_rows(*args)

    def counting_text(message: Any) -> str:
        nonlocal joins
        joins += 1
        return system_text(message)

    monkeypatch.setattr(header_diff, "_snapshot_rows", counting_rows)
    monkeypatch.setattr(header_diff, "system_text", counting_text)
    frame = build_header_diff([path])
    assert frame.height == 300 and frame["field"].drop_nulls().unique().to_list() == ["config.temperature"]
    assert alive == [2, 2], alive   # the new snapshot and the one before it
    assert joins <= 2, joins        # None (no head yet), then the head


def test_a_spawned_child_is_diffed_against_the_parent_snapshot_at_the_spawn(tmp_path: Path) -> None:
    parent = small_log("parent")
    parent.header_event("change", temperature=0.1)
    parent.add("subagent/spawn", {"sessionId": "child"}, ignorable=True)   # names the child: the fork point
    parent.header_event("change", temperature=0.9)
    child = small_log("child", parentSession="parent")
    write(parent, tmp_path / "session.jsonl")
    write(child, tmp_path / "session.1.jsonl")   # sorts before its parent: walked after it all the same
    frame = build_header_diff([tmp_path])
    child_rows = frame.filter(frame["sessionId"] == "child")
    assert child_rows["against"][0].startswith(f"parent session.jsonl seq {parent.next_seq - 3} (spawn at parent seq "
                                               f"{parent.next_seq - 2}")
    assert child_rows.select("field", "before", "after").rows() == [("config.temperature", "0.1", None)]


def test_a_fork_cycle_is_read_without_looping(tmp_path: Path) -> None:
    write(small_log("sess-aaa-1", parentSession="sess-bbb-2"), tmp_path / "a.jsonl")
    write(small_log("sess-bbb-2", parentSession="sess-aaa-1"), tmp_path / "b.jsonl")
    frame = build_header_diff([tmp_path])
    assert sorted(frame["sessionId"].to_list()) == ["sess-aaa-1", "sess-bbb-2"]
    assert all(against.startswith("parent ") for against in frame["against"])


# -- replace folding: what a replace shadows, not what the surface holds ---------------------------------------
def _naive(nodes: list[int], messages: dict[int, bytes | None]) -> list[bytes]:
    return [m for m in (messages[node] for node in nodes) if m is not None]


def test_surface_replaces_match_the_list_rebuild_they_replace() -> None:
    """Random appends and replaces (one node or a range, messages that project to nothing) agree with the old
    algorithm: list.index, splice, rebuild `visible` from scratch."""
    rng = random.Random(12)
    for _ in range(30):
        surface = Surface()
        nodes: list[int] = []
        messages: dict[int, bytes | None] = {}
        for seq in range(200):
            empty = rng.random() < 0.2
            event = {"type": "assistant/message" if empty else "user/message",
                     "data": {"message": {"role": "assistant", "content": []}} if empty else {"content": seq}}
            if nodes and rng.random() < 0.5:
                i = rng.randrange(len(nodes))
                j = i if rng.random() < 0.7 else rng.randrange(i, len(nodes))
                event["sourceEventSeqs"] = sorted(nodes[i:j + 1])
                assert surface.replace(seq, event, {"startSeq": nodes[i], "endSeq": nodes[j]}) == nodes[i:j + 1]
                for node in nodes[i:j + 1]:
                    messages.pop(node)
                nodes[i:j + 1] = [seq]
            else:
                surface.append(seq, event)
                nodes.append(seq)
            messages[seq] = surface.messages[seq]
            assert surface.nodes == nodes and surface.visible == _naive(nodes, messages)


def test_a_replace_copies_the_message_list_only_when_a_request_holds_it() -> None:
    """20k single-node replaces with a request (which keeps its message list) after every 1000: the list is
    copied once per request, never per replace, and every kept request still has its dispatched body."""
    log = LogBuilder("replaces")
    log.add("turn/start", {"turn": 1})
    nodes = [log.user(f"note {k}") for k in range(2000)]
    for step, k in enumerate(range(0, 20_000), 1):
        node = nodes[k % len(nodes)]
        nodes[k % len(nodes)] = log.user(f"edit {k}", surfaceOp={"op": "replace", "start": node, "end": node},
                                         sourceEventSeqs=[node])
        if step % 1000 == 0:
            log.add("step/start", {"turn": 1, "step": step // 1000})
            log.header_event("initial" if step == 1000 else "change")
            log.response(1, step // 1000, "ok")
            log.add("step/end", {"turn": 1, "step": step // 1000})
    walker = Walker(log.source(), parts=True, bodies=True)
    lists, requests = set(), []
    for walked in walker:
        lists.add(id(walker.fold.surface.visible))
        if walked.closed is not None:
            requests.append(walked.closed)
    assert len(requests) == 20 and len(lists) <= 1 + len(requests)
    assert all(request.parts is not None and request.parts.body() == request.body for request in requests)


def test_repeated_seqs_of_a_malformed_log_find_nodes_as_list_index_does() -> None:
    """A log may repeat seqs (a finding of its own): a replace still names the first live node with that seq."""
    rng = random.Random(7)
    for _ in range(50):
        surface = Surface()
        nodes: list[int] = []
        for step in range(120):
            seq = rng.randrange(step + 1) if rng.random() < 0.3 else 1000 + step   # often a seq seen before
            event: dict[str, Any] = {"type": "user/message", "data": {"content": step}}
            if nodes and rng.random() < 0.5:
                start, end = rng.choice(nodes), rng.choice(nodes)
                i, j = nodes.index(start), nodes.index(end)
                event["sourceEventSeqs"] = sorted(set(nodes[min(i, j):max(i, j) + 1]))
                if i > j or seq <= max(event["sourceEventSeqs"]):
                    continue
                assert surface.replace(seq, event, {"startSeq": start, "endSeq": end}) == nodes[i:j + 1]
                nodes[i:j + 1] = [seq]
            else:
                surface.append(seq, event)
                nodes.append(seq)
            assert surface.nodes == nodes and len(surface.visible) == len(nodes)
