"""Hostile and unusual inputs (issue 12, items 3 and 6) through the real CLI, each in a child process held to a
hard address-space limit: the exit code, one line of error, no traceback, the input unchanged, and the child's
peak resident memory (os.wait4) within a budget that reading a whole over-long line or frame would break.

Families: an endless device, a 1 GB final line, lines over the line cap, zstd frames that expand without
bound, JSON nested past the depth cap (and up to it), standard input and named pipes, SQLite stores named
as `store.db#sessionId`, in WAL mode, or with a recursive view for `events`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

from cli_child import Run, run_audit
from dsh_audit.readers import open_log
from dsh_audit.readers.limits import MAX_DEPTH
from storebuilder import STORE_SCHEMA, varints

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_logs" / "compaction-recovery" / "session.jsonl"
MiB, GiB = 1 << 20, 1 << 30
# verify and rebuild map a few hundred MiB at most; polars alone reserves about 1.4 GiB of address space when
# imported (cache-report, header-diff, report, explain), which is reservation, not use: the resident budget
# below is what tells.
LIGHT, HEAVY = {"verify", "rebuild"}, {"cache-report", "header-diff", "report", "explain"}
AS_LIMIT = {**dict.fromkeys(LIGHT, 3 * GiB // 2), **dict.fromkeys(HEAVY, 4 * GiB)}
RSS_BUDGET = 640 * MiB   # default line cap (256 MiB) twice over, plus the interpreter and polars


def audit(*args: str, stdin: bytes | Path | None = None, env: dict[str, str] | None = None,
          timeout: float = 120) -> Run:
    """The CLI in a child under its command's address-space limit, with its own peak RSS (tests/cli_child.py)."""
    command = next(arg for arg in args if arg in AS_LIMIT)   # the group's options (the caps) may come first
    return run_audit(*args, as_limit=AS_LIMIT[command], stdin=stdin, env=env, timeout=timeout)


def one_line_error(run: Run, code: int, *needles: str) -> str:
    """The run failed with `code` and said why on exactly one line (stderr, or verify's report row)."""
    assert run.code == code, run.text
    assert "Traceback" not in run.text and "internal error" not in run.text, run.text
    assert "MemoryError" not in run.text and "RecursionError" not in run.text, run.text
    lines = run.err.strip().splitlines()
    if not lines:   # verify reports an unreadable log as a row of its table: UNREADABLE, then the error
        rows = [row for row in run.out.splitlines() if not row.startswith("in /")]   # a root given absolute
        assert rows[0].startswith("UNREADABLE") and rows[2][0] != " ", run.out   # the error on one line
        label = rows[0].removeprefix("UNREADABLE").strip().rsplit("  (", 1)[0]
        located = re.fullmatch(r"line (\d+): (.*)", rows[1].strip())   # the row names the log: told as stderr would
        lines = [f"{label}:{located[1]}: {located[2]}" if located else f"{label}: {rows[1].strip()}"]
    assert len(lines) == 1, run.text
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def bounded(run: Run, budget: int = RSS_BUDGET) -> None:
    assert run.peak_rss < budget, f"peak RSS {run.peak_rss >> 20} MiB"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_beside(path: Path) -> dict[str, str]:
    return {p.name: digest(p) for p in sorted(path.parent.iterdir()) if p.is_file()}


ALL_COMMANDS: list[tuple[str, ...]] = [("verify",), ("rebuild", "--format", "digest"), ("cache-report",),
                                       ("header-diff",)]


def every_command(log: str, out_dir: Path) -> Iterator[tuple[str, ...]]:
    """Every command that reads a log, with `log` in its place."""
    for command in ALL_COMMANDS:
        yield (*command, log)
    yield ("explain", log, "1.1")
    yield ("report", log, "-o", str(out_dir / "report.html"))


# --- endless and over-long input ------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [c[0] for c in ALL_COMMANDS])
def test_dev_zero_ends_with_one_line_naming_the_line_cap(command: str) -> None:
    args = next(c for c in ALL_COMMANDS if c[0] == command)
    run = audit(*args, "/dev/zero", timeout=60)
    one_line_error(run, 2, "/dev/zero:1:", "line cap of 256 MiB")
    bounded(run)


def test_a_1gb_final_line_without_newline_is_dropped_unread(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    log.write_bytes(SAMPLE.read_bytes())
    with log.open("r+b") as handle:   # sparse: a gigabyte of NULs that costs no disk
        handle.truncate(log.stat().st_size + GiB)
    before = digest(log)
    for args in (("rebuild", "--format", "digest"), ("cache-report",)):
        run = audit(*args, str(log))
        assert run.code == 0 and "Traceback" not in run.text, run.text
        bounded(run)
    run = audit("verify", str(log))
    assert run.code == 0, run.text
    assert "[torn-tail] dropped torn final line 33 (1073741824 bytes)" in run.out
    assert "longer than the line cap" in run.out
    assert digest(log) == before


def test_a_line_over_the_cap_is_an_error_with_its_line(tmp_path: Path) -> None:
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    long_message = json.loads(lines[3])
    long_message["data"]["padding"] = "x" * (80 * 1024)   # line 4 grows past a 64 KiB cap
    log = tmp_path / "long.jsonl"
    log.write_bytes(b"".join([*lines[:3], json.dumps(long_message).encode() + b"\n", *lines[4:]]))
    env = {"DSH_AUDIT_MAX_LINE_BYTES": "64K"}
    for args in every_command(str(log), tmp_path):
        run = audit(*args, env=env)
        one_line_error(run, 2, f"{log}:4:", "line cap of 64 KiB (65536 bytes)", "DSH_AUDIT_MAX_LINE_BYTES")
    assert audit("verify", str(log)).code != 2   # under the default cap it reads


def test_a_bad_cap_setting_is_a_usage_error() -> None:
    run = audit("verify", str(SAMPLE), env={"DSH_AUDIT_MAX_LINE_BYTES": "lots"})
    one_line_error(run, 2, "DSH_AUDIT_MAX_LINE_BYTES must be a size")


def test_the_caps_are_flags_too_and_workers_take_them(tmp_path: Path) -> None:
    """`audit --max-line-bytes SIZE CMD` caps the run as the variable does, in `verify -j` workers too; a flag
    beats the variable; a bad size is one usage line."""
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    long_message = json.loads(lines[3])
    long_message["data"]["padding"] = "x" * (80 * 1024)
    for name in ("a", "b"):
        (tmp_path / f"{name}.jsonl").write_bytes(b"".join([*lines[:3], json.dumps(long_message).encode() + b"\n",
                                                         *lines[4:]]))
    run = audit("--max-line-bytes", "64K", "verify", "-j", "2", str(tmp_path))
    assert run.code == 2 and "Traceback" not in run.err, run.text
    assert run.out.count("line cap of 64 KiB (65536 bytes); if the log is genuine, raise it with --max-line-bytes") == 2
    read = audit("--max-line-bytes", "1M", "verify", str(tmp_path), env={"DSH_AUDIT_MAX_LINE_BYTES": "64K"})
    assert read.code == 1 and "line cap" not in read.out and "2 log(s), 2 failed" in read.out   # read: the padding
    one_line_error(audit("--max-line-bytes", "lots", "verify", str(SAMPLE)), 2, "--max-line-bytes must be a size")
    bomb = tmp_path / "session.jsonl.zstd"
    bomb.write_bytes(zstandard.ZstdCompressor().compress(HEADER) + rle_bomb(b"\n", 2048))
    one_line_error(audit("--max-decompressed-bytes", "64M", "verify", str(bomb)), 2, str(bomb),
                   "cap of 64 MiB", "--max-decompressed-bytes")


# --- zstd frames that expand without bound ----------------------------------------------------------------------

HEADER = b'{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0}\n'


def rle_bomb(byte: bytes, blocks: int = 131072, end: bytes = b"") -> bytes:
    """A zstd frame of RLE blocks, 4 bytes for each 128 KiB (131072 blocks: 512 KiB expanding to 16 GiB), then
    `end` as one last block of its byte repeated."""
    frame = b"\x28\xb5\x2f\xfd" + bytes([0x00, (17 - 10) << 3])   # no content size; a 128 KiB window

    def block(size: int, last: bool, value: bytes) -> bytes:
        return ((size << 3) | 2 | last).to_bytes(3, "little") + value[:1]

    body = block(128 << 10, False, byte) * (blocks - 1) + block(128 << 10, not end, byte)
    return frame + body + (block(len(end), True, end) if end else b"")


@pytest.mark.parametrize("filler", [b"\0", b"\n", b" "])   # one endless line; blank lines; a blank line
def test_a_zstd_bomb_stops_at_the_decompressed_cap(filler: bytes, tmp_path: Path) -> None:
    needle = "decompresses to more than the cap of 512 MiB"
    log = tmp_path / "session.jsonl.zstd"
    log.write_bytes(zstandard.ZstdCompressor().compress(HEADER) + rle_bomb(filler))
    assert log.stat().st_size < 600_000
    env = {"DSH_AUDIT_MAX_DECOMPRESSED_BYTES": "512M"}
    for args in (("verify", str(log)), ("rebuild", "--format", "digest", str(log))):
        run = audit(*args, env=env)
        one_line_error(run, 2, str(log), needle, "DSH_AUDIT_MAX_DECOMPRESSED_BYTES")
        bounded(run)


def test_a_zstd_bomb_of_one_line_stops_at_the_line_cap(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl.zstd"
    log.write_bytes(zstandard.ZstdCompressor().compress(HEADER) + rle_bomb(b"x", 4096, end=b"\n"))   # 512 MiB, one line
    run = audit("rebuild", "--format", "digest", str(log), env={"DSH_AUDIT_MAX_LINE_BYTES": "16M"})
    one_line_error(run, 2, f"{log}:2:", "line cap of 16 MiB")
    bounded(run, 256 * MiB)


# --- JSON nesting ---------------------------------------------------------------------------------------------------

def nested_log(depth: int, tmp_path: Path) -> Path:
    """The sample log with a value in its tool schema that brings the request/header line to `depth` levels in
    all, and a second header in step 2 whose schema differs at the deepest level: a place the schema checks, the
    request serialization and header-diff's DeepDiff (four stack frames per level of a list) all walk."""
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if b'"request/header"' in line)
    original = lines[index]

    def header(leaf: str, reason: str) -> bytes:
        event = json.loads(original)
        event["data"]["reason"] = reason
        event["data"]["header"]["tools"][0]["parameters"]["properties"]["x"] = "@"
        text = json.dumps(event, separators=(",", ":"))
        levels = depth - 7   # event, data, header, tools, tools[0], parameters, properties enclose the value
        return text.replace('"@"', "[" * levels + leaf + "]" * levels).encode() + b"\n"

    lines[index] = header("1", "initial")
    second_step = [i for i, line in enumerate(lines) if b'"step/start"' in line][1]
    lines.insert(second_step + 1, header("2", "change"))
    log = tmp_path / "deep.jsonl"
    log.write_bytes(b"".join(lines))
    return log


TOO_DEEP = f"JSON nested deeper than {MAX_DEPTH} levels"


def test_json_nested_990_deep_is_one_line_in_every_command(tmp_path: Path) -> None:
    log = nested_log(990, tmp_path)
    before = digest(log)
    for args in every_command(str(log), tmp_path):
        run = audit(*args)
        one_line_error(run, 2, f"{log}:8: seq 6", TOO_DEEP)
    assert digest(log) == before


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5000])   # one past the cap; past orjson's own limit (1024)
def test_json_nested_past_the_cap_is_refused(depth: int, tmp_path: Path) -> None:
    log = nested_log(depth, tmp_path)
    for args in (("verify", str(log)), ("rebuild", "--format", "digest", str(log))):
        one_line_error(audit(*args), 2, f"{log}:8: seq 6", TOO_DEEP)


def test_json_nested_up_to_the_cap_reads_in_every_command(tmp_path: Path) -> None:
    log = nested_log(MAX_DEPTH, tmp_path)
    for args in every_command(str(log), tmp_path):
        run = audit(*args)
        assert run.code == 0, (args, run.text)
        assert "Traceback" not in run.text and "internal error" not in run.text
    diff = audit("header-diff", "--format", "csv", str(log))
    assert "schema-changed" in diff.out, diff.text   # DeepDiff did walk to the bottom


def test_deep_json_through_the_stdlib_parser_is_refused_too(tmp_path: Path) -> None:
    # A lone surrogate escape sends the line to the stdlib parser (orjson refuses it, JSON.parse does not).
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    lines.insert(2, b'{"type":"future/x","ignorable":true,"data":{"s":"\\ud800","v":' + b"[" * 900 + b"]" * 900
                 + b"}}\n")
    log = tmp_path / "surrogate.jsonl"
    log.write_bytes(b"".join(lines))
    one_line_error(audit("rebuild", "--format", "digest", str(log)), 2, f"{log}:3:", TOO_DEEP)


# --- standard input and named pipes ---------------------------------------------------------------------------------

def test_stdin_is_streamed_and_read_like_the_file(tmp_path: Path) -> None:
    data = SAMPLE.read_bytes()
    expected = audit("rebuild", "--format", "digest", str(SAMPLE))
    piped = audit("rebuild", "--format", "digest", "-", stdin=data)
    assert piped.code == 0 and piped.out == expected.out and expected.out.count("\n") == 3
    run = audit("verify", "-", stdin=data)
    assert run.code == 0 and run.out.startswith("ok         <stdin>  (v0, 31 events, 3 requests)"), run.text
    for args in (("cache-report", "-"), ("header-diff", "-"), ("explain", "-", "1.2#2")):
        run = audit(*args, stdin=data)
        assert run.code in (0, 1) and "Traceback" not in run.text and run.out, (args, run.text)
    compressed = zstandard.ZstdCompressor().compress(data)   # one frame: the recompressed form
    assert audit("rebuild", "--format", "digest", "-", stdin=compressed).out == expected.out


def test_stdin_beside_files_with_workers_is_read_by_the_main_process() -> None:
    run = audit("verify", "-j", "2", "-", str(SAMPLE), str(SAMPLE.parent), stdin=SAMPLE.read_bytes())
    assert run.code == 0 and "ok         <stdin>  (v0, 31 events, 3 requests)" in run.out, run


def test_stdin_from_a_file_redirect_and_empty_stdin(tmp_path: Path) -> None:
    assert audit("verify", "-", stdin=SAMPLE).code == 0
    one_line_error(audit("verify", "-", stdin=b""), 2, "<stdin>", "empty log")


def test_report_reads_stdin_once_as_it_reads_the_file(tmp_path: Path) -> None:
    """The page's three parts come from one walk of each log, so a log on standard input is read like the file."""
    run = audit("report", "-", "-o", str(tmp_path / "r.html"), stdin=SAMPLE.read_bytes())
    filed = audit("report", str(SAMPLE), "-o", str(tmp_path / "f.html"))
    assert run.code == filed.code == 0 and "Traceback" not in run.text, run.text
    summary = "1 session log(s), 3 request(s), 0 collapse(s), cost $0.000018\n"
    assert run.out.split(": ", 1)[1] == filed.out.split(": ", 1)[1] == summary, run.out


def test_a_sqlite_store_on_stdin_is_refused(tmp_path: Path) -> None:
    store = build_store(tmp_path / "store.db")
    run = audit("verify", "-", stdin=store.read_bytes())
    one_line_error(run, 2, "<stdin>", "SQLite store cannot be read from a pipe")


def _fifo_writer(fifo: Path, data: bytes) -> threading.Thread:
    def write() -> None:
        try:
            with fifo.open("wb") as handle:
                handle.write(data)
        except BrokenPipeError:
            pass
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_named_pipe_is_read_once_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    writer = _fifo_writer(fifo, SAMPLE.read_bytes())
    run = audit("verify", str(fifo), timeout=60)
    writer.join(10)
    assert run.code == 0 and run.out.startswith(f"ok         {fifo}  (v0, 31 events, 3 requests)"), run.text
    writer = _fifo_writer(fifo, SAMPLE.read_bytes())
    run = audit("report", str(fifo), "-o", str(tmp_path / "r.html"), timeout=60)
    writer.join(10)
    assert run.code == 0 and "1 session log(s), 3 request(s)" in run.out, run.text
    again = tmp_path / "again.jsonl"   # the same pipe by another name: refused, never read as empty
    again.symlink_to(fifo)
    writer = _fifo_writer(fifo, SAMPLE.read_bytes())
    run = audit("verify", str(fifo), str(again), timeout=60)
    writer.join(10)
    assert run.code == 2 and f"ok         {fifo}  (v0, 31 events, 3 requests)" in run.out, run.text
    assert "UNREADABLE" in run.out and "already read: a pipe can be read only once" in run.out, run.text


def test_a_directory_walk_never_opens_a_pipe(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    os.mkfifo(tmp_path / "logs" / "session.v3.jsonl")   # no writer: opening it would block for ever
    (tmp_path / "logs" / "session.jsonl").write_bytes(SAMPLE.read_bytes())
    run = audit("verify", str(tmp_path / "logs"), timeout=60)
    assert run.code == 0 and "1 log(s), 0 failed" in run.out, run.text


# --- SQLite stores --------------------------------------------------------------------------------------------------

def _rows(session_id: str) -> list[tuple[Any, ...]]:
    rows = []
    for record in open_log(SAMPLE).records():
        event = record.event
        seqs, op = event.get("sourceEventSeqs"), event.get("surfaceOp")
        rows.append((session_id, record.seq, event["type"], 1_700_000_000_000 + record.seq, json.dumps(event["data"]),
                     None if seqs is None else varints(seqs), None if op is None else json.dumps(op), None))
    return rows


def build_store(path: Path, sessions: tuple[str, ...] = ("s-1", "s-2"), *, wal: bool = False) -> Path:
    """A schema-17 store holding the sample log once per session id."""
    db = sqlite3.connect(path)
    db.executescript(STORE_SCHEMA)
    db.execute("PRAGMA application_id = 1146308688")
    db.execute("PRAGMA user_version = 17")
    db.execute("INSERT INTO persistence_state VALUES (1, 'store')")
    for index, sid in enumerate(sessions):
        db.execute("INSERT INTO sessions VALUES (?, 0, ?, NULL, NULL, NULL, NULL, 0, NULL, 'inc', 0)", (sid, index))
        db.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", _rows(sid))
    db.commit()
    if wal:
        db.execute("PRAGMA journal_mode = WAL")
    db.close()
    return path


def test_a_store_selector_works_in_every_command(tmp_path: Path) -> None:
    store = build_store(tmp_path / "store.db")
    before = files_beside(store)
    expected = audit("rebuild", "--format", "digest", str(SAMPLE)).out
    assert audit("rebuild", "--format", "digest", f"{store}#s-2").out == expected
    for args in every_command(f"{store}#s-2", tmp_path):
        run = audit(*args)
        assert run.code in (0, 1) and "Traceback" not in run.text, (args, run.text)
        assert "no such file" not in run.text
    run = audit("verify", f"{store}#s-2")
    assert run.code == 0 and run.out.startswith(f"ok         {store}#s-2  (v0, 31 events, 3 requests)"), run.text
    one_line_error(audit("verify", f"{store}#nope"), 2, "no session 'nope' in this store")
    one_line_error(audit("rebuild", f"{tmp_path}/missing.db#s-1"), 2, "missing.db: no such file")
    (tmp_path / "report.html").unlink(missing_ok=True)
    assert files_beside(store) == before


def test_explain_on_a_store_of_several_sessions_asks_which(tmp_path: Path) -> None:
    """explain reads one session: of a store holding two (or none) it names none, and says how to pick one."""
    store = build_store(tmp_path / "store.db")
    one_line_error(audit("explain", str(store), "1.1"), 2, "holds 2 sessions; name one as", "#SESSION_ID")
    assert audit("explain", f"{store}#s-1", "1.1").code in (0, 1)
    empty = build_store(tmp_path / "empty.db", sessions=())
    one_line_error(audit("explain", str(empty), "1.1"), 2, "holds 0 sessions")


def test_a_wal_store_is_read_without_leaving_files_beside_it(tmp_path: Path) -> None:
    store = build_store(tmp_path / "store.db", wal=True)
    assert store.read_bytes()[18] == 2   # WAL mode, and no -wal or -shm after a clean close
    before = files_beside(store)
    assert set(before) == {"store.db"}
    for args in (("verify", str(store)), ("rebuild", "--format", "digest", f"{store}#s-1"),
                 ("cache-report", str(store))):
        run = audit(*args)
        assert run.code == 0, (args, run.text)
    assert files_beside(store) == before


def test_a_live_wal_store_is_read_with_its_log_and_nothing_added(tmp_path: Path) -> None:
    store = build_store(tmp_path / "store.db", ("s-1",), wal=True)
    writer = sqlite3.connect(store)   # a live dsh: its last session is still only in the -wal file
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("INSERT INTO sessions VALUES ('s-live', 0, 9, NULL, NULL, NULL, NULL, 0, NULL, 'inc', 0)")
    writer.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", _rows("s-live"))
    writer.commit()
    try:
        names = set(files_beside(store))
        main_file = digest(store)
        assert names == {"store.db", "store.db-wal", "store.db-shm"}
        run = audit("verify", f"{store}#s-live")
        assert run.code == 0 and "31 events, 3 requests" in run.out, run.text
        assert set(files_beside(store)) == names and digest(store) == main_file
    finally:
        writer.close()


def test_a_wal_log_without_its_index_is_refused_not_created(tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    store = build_store(live / "store.db", ("s-1",), wal=True)
    writer = sqlite3.connect(store)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE sessions SET created_at = 5")
    writer.commit()
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("store.db", "store.db-wal"):   # copied without its -shm, as a backup might
        (copy / name).write_bytes((live / name).read_bytes())
    writer.close()
    before = files_beside(copy / "store.db")
    one_line_error(audit("verify", str(copy / "store.db")), 2, "store.db-wal holds writes", "store.db-shm")
    assert files_beside(copy / "store.db") == before


def test_a_recursive_view_for_events_is_refused_at_once(tmp_path: Path) -> None:
    store = build_store(tmp_path / "store.db", ("s-1",))
    db = sqlite3.connect(store)
    db.executescript("""
        ALTER TABLE events RENAME TO stored_events;
        CREATE VIEW events AS WITH RECURSIVE n(seq) AS (SELECT 0 UNION ALL SELECT seq + 1 FROM n)
          SELECT 's-1' AS session_id, seq, 'turn/end' AS type, 0 AS time, '{}' AS data,
                 NULL AS source_event_seqs, NULL AS surface_op, NULL AS ignorable FROM n;
    """)
    db.close()
    before = files_beside(store)
    for args in (("verify", str(store)), ("rebuild", f"{store}#s-1")):
        one_line_error(audit(*args, timeout=60), 2, "events is a view, expected a table")
    assert files_beside(store) == before


def test_a_zstd_bomb_in_a_store_blob_stops_at_the_line_cap(tmp_path: Path) -> None:
    store = build_store(tmp_path / "store.db", ("s-1",))
    bomb = rle_bomb(b" ", 8192)   # 1 GiB of spaces in 32 KiB
    db = sqlite3.connect(store)
    db.execute("UPDATE events SET data = ? WHERE seq = 3", (bomb,))
    db.commit()
    db.close()
    run = audit("rebuild", "--format", "digest", str(store), env={"DSH_AUDIT_MAX_LINE_BYTES": "16M"})
    one_line_error(run, 2, f"{store}#s-1:3: seq 3", "line cap of 16 MiB")
    bounded(run, 256 * MiB)


# --- the line splitter at its edges (in process: no CLI needed to pin these down) -----------------------------------

def _lines(blocks: list[bytes], cap: int) -> tuple[list[tuple[int, bytes, bool]], Any]:
    from dsh_audit.readers.limits import InputLimits
    from dsh_audit.readers.lines import LineSplitter

    splitter = LineSplitter(InputLimits(max_line_bytes=cap), "x")
    out = [line for block in blocks for line in splitter.feed(block)]
    out.extend(splitter.finish())
    return out, splitter.overlong


def test_the_splitter_holds_lines_of_exactly_the_cap_across_any_blocks() -> None:
    from dsh_audit.errors import LogReadError

    data = b"h" * 10 + b"\n" + b"a" * 1024 + b"\n\n  \n" + b"b" * 1024 + b"\n" + b"c" * 5
    expected = [(1, b"h" * 10, True), (2, b"a" * 1024, True), (3, b"", True), (4, b"  ", True),
                (5, b"b" * 1024, True), (6, b"c" * 5, False)]
    for size in (1, 2, 7, 1024, 1025, len(data)):   # blank lines may come as one: every reader skips them
        blocks = [data[i:i + size] for i in range(0, len(data), size)]
        lines, overlong = _lines(blocks, 1024)
        assert [line for line in lines if line[1].strip()] == [line for line in expected if line[1].strip()], size
        assert overlong is None
    with pytest.raises(LogReadError, match="x:2: line longer than the line cap of 1 KiB"):
        _lines([b"h\n" + b"a" * 1025 + b"\n"], 1024)
    with pytest.raises(LogReadError, match="x:1: line longer"):   # the header: at once, never skipped
        _lines([b"a" * 600, b"a" * 600], 1024)
    lines, overlong = _lines([b"h\n", b"a" * 3000], 1024)       # an unterminated tail: dropped unread
    assert lines == [(1, b"h", True)] and overlong is not None
    assert (overlong.line, overlong.dropped_bytes) == (2, 3000)


def test_blank_runs_cost_one_line_each_block() -> None:
    lines, _ = _lines([b"h\n", b"\n" * 5000, b"  \n" * 10, b"e\n"], 1 << 20)
    assert lines == [(1, b"h", True), (5001, b"", True), (5011, b"", True), (5012, b"e", True)]


def test_size_settings() -> None:
    from dsh_audit.errors import DshAuditError
    from dsh_audit.readers.limits import InputLimits, describe, parse_size

    assert [parse_size(text, "X") for text in ("65536", "64K", "64KiB", "256m", "4G", " 2 GB ")] == \
        [65536, 65536, 65536, 256 << 20, 4 << 30, 2 << 30]
    for bad in ("", "lots", "-1", "1.5G", "100"):
        with pytest.raises(DshAuditError):
            parse_size(bad, "X")
    assert describe(256 << 20) == "256 MiB (268435456 bytes)" and describe(1500) == "1500 bytes"
    assert InputLimits.from_env({}) == InputLimits()
    assert InputLimits.from_env({"DSH_AUDIT_MAX_DECOMPRESSED_BYTES": "1G"}).max_decompressed_bytes == 1 << 30
