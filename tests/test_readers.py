"""Readers: the shared corpus, both on-disk forms, zstd framing, SQLite stores, torn tails and bad input."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard

from conftest_reference import LOGS_ROOT, require_corpus
from dsh_audit.errors import LogReadError
from dsh_audit.readers import discover, open_log, open_logs
from dsh_audit.readers.sqlite import decode_source_event_seqs
from dsh_audit.records import LogRecord
from storebuilder import STORE_SCHEMA, varints

SHARED = LOGS_ROOT
require_corpus()

MANIFEST = json.loads((SHARED / "manifest.json").read_text())
SESSION_LOGS = {f["path"]: f for f in MANIFEST["files"] if f["kind"] == "session-log"}
ROWS = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
# Logs with all three packed row kinds (and, in permission-policy-context, an event whose data is 44 KB).
RICH = [
    "apps/web/tests/snapshots/permission-policy-context/session.jsonl",
    "apps/web/tests/snapshots/navigation-panes/seed.jsonl",
    "examples/acp-agent/tests/snapshots/fs-write-overwrite/session.jsonl",
]


def read(path: Path | str) -> tuple[Any, list[LogRecord]]:
    source = open_log(path)
    return source, list(source.records())


def stored_values(rel: str) -> tuple[bytes, list[dict[str, Any]]]:
    """The header line and the stored record objects of a shared log, parsed independently of the reader."""
    header, *rest = (SHARED / rel).read_bytes().splitlines()
    return header, [orjson.loads(line) for line in rest if line.strip()]


def make_explicit(values: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The persisted form of fixture records: seq by position, a made-up time; key order as the writer's."""
    out, position = [], 0
    for value in values:
        time = 1_700_000_000_000 + 7 * position
        if value["type"] in ROWS:
            out.append({"type": value["type"], "seq0": position, "time0": time, "data": value["data"]})
            data = value["data"]
            position += len(data.get("texts", data.get("args", [])))
        else:
            out.append({"type": value["type"], "seq": position, "time": time,
                        **{k: v for k, v in value.items() if k != "type"}})
            position += 1
    return out


def write_jsonl(path: Path, header: bytes, values: list[dict[str, Any]]) -> Path:
    path.write_bytes(header + b"\n" + b"".join(orjson.dumps(v) + b"\n" for v in values))
    return path


def without(event: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in keys}


def expect_error(path: Path | str, message: str) -> LogReadError:
    with pytest.raises(LogReadError) as caught:
        read(path)
    assert message in str(caught.value), str(caught.value)
    return caught.value


# --- the shared corpus -------------------------------------------------------------------------------------

def test_discover_finds_exactly_the_manifest_session_logs() -> None:
    found = discover([SHARED])
    assert found == sorted(found)
    assert {str(p.relative_to(SHARED)) for p in found} == set(SESSION_LOGS)
    assert len(found) == 100


@pytest.mark.parametrize("rel", sorted(SESSION_LOGS))
def test_shared_log_reads_with_manifest_counts(rel: str) -> None:
    features = SESSION_LOGS[rel]["features"]
    source, records = read(SHARED / rel)
    assert source.header["type"] == "session"
    assert source.torn_tail is None and not source.explicit_seq
    assert len(records) == features["event_count"]
    assert Counter(r.event["type"] for r in records) == Counter(features["event_types"])
    assert [r.seq for r in records] == list(range(len(records)))
    assert all("seq" not in r.event and "time" not in r.event for r in records)


def test_seq_convention_matches_readme_check() -> None:
    _, records = read(SHARED / "examples/acp-agent/tests/snapshots/fs-write-overwrite/session.jsonl")
    message = next(r for r in records if r.event["type"] == "assistant/message")
    cited = message.event["sourceEventSeqs"]
    assert cited == list(range(9, 69))
    assert {records[seq].event["type"] for seq in cited} == {"assistant/chunk"}
    assert any(records[seq].packed for seq in cited)


@pytest.mark.parametrize("scenario", [
    "examples/headless-agent/tests/snapshots/advanced-toolchain",
    "examples/headless-agent/tests/snapshots/compaction-recovery",
    "examples/jsonrpc-agent/tests/snapshots/persistent-tools",
])
def test_streamed_events_with_explicit_seq_match_expanded_log(scenario: str) -> None:
    """The client stream of the same session carries real seqs: an independent check of the seq convention."""
    streamed = []
    for path in (SHARED / scenario).glob("*.expected.jsonl"):
        for line in path.read_bytes().splitlines():
            value = orjson.loads(line)
            event = value.get("event") or value.get("params", {}).get("event")
            if event is not None:
                streamed.append(event)
    _, records = read(SHARED / scenario / "session.jsonl")
    assert len(streamed) == len(records)
    # The stream was scrubbed differently (it keeps real ids), so compare what the seq convention fixes.
    assert [(e["seq"], e["type"]) for e in streamed] == [(r.seq, r.event["type"]) for r in records]


# --- persisted (explicit seq/time) form ------------------------------------------------------------------

@pytest.mark.parametrize("rel", RICH)
def test_explicit_form_round_trip(rel: str, tmp_path: Path) -> None:
    header, values = stored_values(rel)
    explicit = make_explicit(values)
    path = write_jsonl(tmp_path / "session.jsonl", header, explicit)
    _, fixture_records = read(SHARED / rel)
    source, records = read(path)
    assert source.explicit_seq and source.torn_tail is None
    assert len(records) == len(fixture_records)
    for got, want in zip(records, fixture_records, strict=True):
        assert got.explicit_seq and got.seq == want.seq == got.event["seq"]
        assert list(got.event)[:3] == ["type", "seq", "time"]
        assert without(got.event, "seq", "time") == want.event
        assert (got.line, got.packed) == (want.line, want.packed)
    by_seq = {r.seq: r for r in records}
    for row in explicit:
        if row["type"] in ROWS:  # member k: time0 + sum(dt[:k])
            for k in range(len(row["data"]["dt"]) + 1):
                assert by_seq[row["seq0"] + k].event["time"] == row["time0"] + sum(row["data"]["dt"][:k])
        else:
            assert by_seq[row["seq"]].event == row


def test_explicit_seq_gaps_are_yielded_as_stored(tmp_path: Path) -> None:
    header, values = stored_values(RICH[2])
    explicit = make_explicit(values)
    explicit[3]["seq"] = 40  # a duplicate of a later seq and a gap: data for the verifier, not an error
    _, records = read(write_jsonl(tmp_path / "gap.jsonl", header, explicit))
    assert records[3].seq == 40 and records[3].explicit_seq
    assert records[4].seq == 4


# --- torn tails and unparsable lines ---------------------------------------------------------------------

def test_truncation_at_any_point_keeps_the_complete_prefix(tmp_path: Path) -> None:
    original = (SHARED / RICH[2]).read_bytes()
    _, full = read(SHARED / RICH[2])
    line_ends = [i + 1 for i, byte in enumerate(original) if byte == 0x0A]
    cuts = [line_ends[0] + 5, line_ends[5] - 1, line_ends[5], line_ends[12] + 40, len(original) - 1]
    for cut in cuts:
        path = tmp_path / f"cut{cut}.jsonl"
        path.write_bytes(original[:cut])
        source, records = read(path)
        complete_lines = sum(1 for end in line_ends if end <= cut)
        expected = [r for r in full if r.line <= complete_lines]
        assert [r.event for r in records] == [r.event for r in expected]
        if cut in line_ends:
            assert source.torn_tail is None
        else:
            assert source.torn_tail is not None
            assert source.torn_tail.line == complete_lines + 1
            assert source.torn_tail.dropped_bytes == cut - line_ends[complete_lines - 1]


def test_unterminated_final_line_is_dropped_even_when_it_parses(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes((SHARED / RICH[2]).read_bytes()[:-1])
    source, records = read(path)
    _, full = read(SHARED / RICH[2])
    assert len(records) == len(full) - 1
    assert source.torn_tail is not None and "no trailing newline" in source.torn_tail.reason


def test_unparsable_last_line_is_a_torn_tail_but_mid_file_an_error(tmp_path: Path) -> None:
    lines = (SHARED / RICH[2]).read_bytes().splitlines(keepends=True)
    last = tmp_path / "last.jsonl"
    last.write_bytes(b"".join(lines) + b'{"type":"turn/st\n\n')
    source, records = read(last)
    assert len(records) == len(read(SHARED / RICH[2])[1])
    assert source.torn_tail is not None and source.torn_tail.line == len(lines) + 1
    assert "not valid JSON" in source.torn_tail.reason
    middle = tmp_path / "middle.jsonl"
    middle.write_bytes(b"".join([*lines[:4], b"{oops\n", *lines[4:]]))
    error = expect_error(middle, "not valid JSON")
    assert error.line == 5 and error.path == str(middle)
    assert str(error).startswith(f"{middle}:5: ")


# --- zstd ------------------------------------------------------------------------------------------------

def write_zstd(path: Path, header: bytes, lines: list[bytes], batch: int) -> Path:
    """Header frame, then one checksummed frame per batch of whole lines, as the writer appends them."""
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    frames = [compressor.compress(header + b"\n")]
    for start in range(0, len(lines), batch):
        frames.append(compressor.compress(b"".join(line + b"\n" for line in lines[start:start + batch])))
    path.write_bytes(b"".join(frames))
    return path


@pytest.mark.parametrize("suffix", [".jsonl.zstd", ".jsonl.zst"])
def test_zstd_multi_frame_reads_every_frame(suffix: str, tmp_path: Path) -> None:
    header, *lines = (SHARED / RICH[0]).read_bytes().splitlines()
    path = write_zstd(tmp_path / f"session{suffix}", header, lines, batch=3)
    source, records = read(path)
    _, plain = read(SHARED / RICH[0])
    assert source.torn_tail is None
    assert [(r.seq, r.line, r.event) for r in records] == [(r.seq, r.line, r.event) for r in plain]
    assert discover([tmp_path]) == [path]


def test_zstd_torn_final_frame_keeps_complete_lines(tmp_path: Path) -> None:
    header, *lines = (SHARED / RICH[0]).read_bytes().splitlines()
    whole = write_zstd(tmp_path / "whole.jsonl.zstd", header, lines, batch=5).read_bytes()
    last_frame = whole.rfind(b"\x28\xb5\x2f\xfd")
    kept_lines = (len(lines) - 1) // 5 * 5  # lines in the complete frames
    _, plain = read(SHARED / RICH[0])
    for cut in (last_frame + 2, last_frame + 30, len(whole) - 3):
        path = tmp_path / f"torn{cut}.jsonl.zstd"
        path.write_bytes(whole[:cut])
        source, records = read(path)
        assert source.torn_tail is not None and "incomplete final zstd frame" in source.torn_tail.reason
        assert len(records) >= sum(1 for r in plain if r.line <= kept_lines + 1)
        assert [r.event for r in records] == [r.event for r in plain[:len(records)]]
    expect_error(_with(tmp_path / "hdr.jsonl.zstd", whole[:10]), "empty log: no session header line (incomplete")


def _with(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_zstd_corruption_is_an_error(tmp_path: Path) -> None:
    header, *lines = (SHARED / RICH[2]).read_bytes().splitlines()
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    head = compressor.compress(header + b"\n")
    body = compressor.compress(b"".join(line + b"\n" for line in lines[:4]))
    tail = compressor.compress(b"".join(line + b"\n" for line in lines[4:]))
    flipped = bytearray(body)
    flipped[-1] ^= 0xFF  # the content checksum
    expect_error(_with(tmp_path / "a.jsonl.zstd", head + bytes(flipped) + tail), "corrupt zstd frame")
    expect_error(_with(tmp_path / "b.jsonl.zstd", head + b"JUNKJUNK" + tail), "invalid frame magic")
    mid_line = compressor.compress(lines[0] + b"\n" + lines[1][:10])
    expect_error(_with(tmp_path / "c.jsonl.zstd", head + mid_line + tail), "ends mid-line")
    two_lines = compressor.compress(header + b"\n" + lines[0] + b"\n")
    expect_error(_with(tmp_path / "d.jsonl.zstd", two_lines + tail), "first frame is not exactly one line")


# --- SQLite ----------------------------------------------------------------------------------------------

def data_column(value: Any, blobs: list[int]) -> str | bytes:
    text = orjson.dumps(value)
    if len(text) >= 4096:
        packed = zstandard.ZstdCompressor(level=3).compress(text)
        if len(packed) < len(text):
            blobs.append(len(text))
            return packed
    return text.decode()


def build_store(path: Path, logs: dict[str, list[dict[str, Any]]], headers: dict[str, dict[str, Any]]) -> list[int]:
    blobs: list[int] = []
    db = sqlite3.connect(path)
    db.executescript(STORE_SCHEMA)
    db.execute("PRAGMA application_id = 1146308688")
    db.execute("PRAGMA user_version = 17")
    db.execute("INSERT INTO persistence_state VALUES (1, '00000000-0000-4000-8000-000000000000')")
    for sid, values in logs.items():
        h = headers[sid]
        db.execute("INSERT INTO sessions VALUES (?,?,?,?,?,?,?,?,?,'inc',0)",
                   (sid, h.get("version", 0), h["createdAt"], h.get("cwd"), h.get("parentSession"),
                    h.get("seedLength"), h.get("origin"), h.get("delegationDepth"), h.get("agentPreset")))
        for v in values:
            if v["type"] in ROWS:
                row = (v["seq0"], v["type"], v["time0"], data_column(v["data"], blobs), None, None, 0)
            else:
                seqs = v.get("sourceEventSeqs")
                op = v.get("surfaceOp")
                row = (v["seq"], v["type"], v["time"], data_column(v["data"], blobs),
                       None if seqs is None else varints(seqs),
                       None if op is None else orjson.dumps(op).decode(), 1 if v.get("ignorable") else None)
            db.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", (sid, *row))
    db.commit()
    db.close()
    return blobs


def store_of(tmp_path: Path, rels: list[str]) -> tuple[Path, dict[str, Path], list[int]]:
    logs, headers, plain = {}, {}, {}
    for index, rel in enumerate(rels):
        header_line, values = stored_values(rel)
        sid = f"session-{index}"
        headers[sid] = {**orjson.loads(header_line), "id": sid}
        logs[sid] = make_explicit(values)
        plain[sid] = write_jsonl(tmp_path / f"{sid}.jsonl", orjson.dumps(headers[sid]), logs[sid])
    store = tmp_path / "sessions.db"
    return store, plain, build_store(store, logs, headers)


def test_sqlite_store_reads_like_the_jsonl_log(tmp_path: Path) -> None:
    store, plain, blobs = store_of(tmp_path, RICH)
    assert blobs and max(blobs) >= 4096  # a zstd BLOB data value was exercised
    digest = hashlib.sha256(store.read_bytes()).hexdigest()
    sources = list(open_logs(store))
    assert sorted(s.label for s in sources) == [f"{store}#session-{i}" for i in range(len(RICH))]
    created = [s.header["createdAt"] for s in sources]
    assert created == sorted(created)
    for source in sources:
        sid = source.header["id"]
        jsonl_source, expected = read(plain[sid])
        assert source.header == {k: v for k, v in jsonl_source.header.items() if k != "version"} | {"version": 0}
        records = list(source.records())
        assert [(r.seq, r.event) for r in records] == [(r.seq, r.event) for r in expected]
        assert [r.packed for r in records] == [r.packed for r in expected]
        assert any(r.event.get("sourceEventSeqs") for r in records)
    assert hashlib.sha256(store.read_bytes()).hexdigest() == digest
    assert discover([tmp_path]) == sorted([store, *plain.values()])
    assert open_log(f"{store}#session-1").label == f"{store}#session-1"
    expect_error(store, "holds 3 sessions")


def test_sqlite_malformed_rows(tmp_path: Path) -> None:
    store, _, _ = store_of(tmp_path, [RICH[2]])
    db = sqlite3.connect(store)
    last_end = db.execute("SELECT max(seq) FROM events WHERE type = 'turn/end'").fetchone()[0]
    row_seq, row_data = db.execute("SELECT seq, data FROM events WHERE ignorable = 0 ORDER BY seq").fetchone()
    db.execute("UPDATE events SET data = '{\"turn\":1}' WHERE seq = ?", (row_seq,))
    db.commit()
    error = expect_error(store, "malformed reasoning-chunks storage row: data must be exactly")
    assert error.line == row_seq == error.seq and row_seq < last_end
    db.execute("UPDATE events SET data = ? WHERE seq = ?", (row_data, row_seq))
    db.execute("UPDATE events SET source_event_seqs = x'8000' WHERE type = 'assistant/message'")
    db.commit()
    db.close()
    expect_error(store, "non-canonical varint")


def test_sqlite_torn_tail_after_last_turn_end(tmp_path: Path) -> None:
    store, plain, _ = store_of(tmp_path, [RICH[2]])
    _, expected = read(plain["session-0"])
    db = sqlite3.connect(store)
    db.execute("INSERT INTO events VALUES ('session-0', ?, 'text-chunks', 0, '{\"turn\":1}', NULL, NULL, 0)",
               (len(expected),))
    db.commit()
    db.close()
    source = open_log(store)
    records = list(source.records())
    assert len(records) == len(expected)
    assert source.torn_tail is not None and source.torn_tail.line == len(expected)


def test_sqlite_identity_is_checked(tmp_path: Path) -> None:
    store, _, _ = store_of(tmp_path, [RICH[2]])
    db = sqlite3.connect(store)
    db.execute("PRAGMA user_version = 16")
    db.commit()
    expect_error(store, "schema version 16")
    db.execute("PRAGMA user_version = 17")
    db.execute("PRAGMA application_id = 7")
    db.commit()
    db.close()
    expect_error(store, "not a dsh session store")
    assert discover([tmp_path]) == [tmp_path / "session-0.jsonl"]


def test_sqlite_session_of_another_generation_is_refused(tmp_path: Path) -> None:
    """A schema-17 store holds the generations generations.json marks sqliteStore (v0): a session naming
    another format is refused with both named, as a one-line read error."""
    store, _, _ = store_of(tmp_path, [RICH[2]])
    db = sqlite3.connect(store)
    db.execute("UPDATE sessions SET version = 2")
    db.commit()
    db.close()
    expect_error(store, 'session "session-0" is stored as log format v2; the SQLite schema-17 reader reads '
                        "format v0 only")


def test_source_event_seq_varints() -> None:
    assert decode_source_event_seqs(varints([300, 5, 5, 70000, 2**53 - 1])) == [300, 5, 5, 70000, 2**53 - 1]
    assert decode_source_event_seqs(b"") == []
    for bad, why in [(b"\x80\x00", "non-canonical"), (b"\x80", "truncated"), (b"\x05\x0d", "out of range")]:
        with pytest.raises(ValueError, match=why):
            decode_source_event_seqs(bad)


# --- bad input -------------------------------------------------------------------------------------------

HEADER = b'{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0}\n'
TEXT_DATA = {"turn": 1, "step": 1, "index": 0, "dt": [0, 0], "texts": ["a", "b", "c"]}


@pytest.mark.parametrize(("content", "message", "line"), [
    (b"", "empty log: no session header line", None),
    (b"\n\n", "empty log: no session header line", None),
    (b'{"type":"turn/start","data":{}}\n', "first line is not a session header", 1),
    (b"[1]\n", "first line is not a session header", 1),
    (b"{nope\n", "session header line: not valid JSON", 1),
    (HEADER[:-1], "torn header", 1),
    (b'{"type":"session","version":5,"id":"s","createdAt":0}\n',
     "uses log format v5, newer than any generation dsh-audit knows (v0 to v4)", 1),
    (b'{"type":"session","version":-1,"id":"s","createdAt":0}\n', "which is not a dsh log generation", 1),
    (b'{"type":"session","version":"0","id":"s"}\n', "version must be a number", 1),
    (HEADER + b'{"type":"x","data":"\xff"}\n{"type":"y","data":1}\n', "invalid UTF-8", 2),
    (HEADER + b"[1,2]\n", "expected a JSON object", 2),
    (HEADER + b'{"data":1}\n', "event has no string type", 2),
    (HEADER + b'{"type":"x","seq":-1,"data":1}\n', "seq must be a non-negative safe integer", 2),
])
def test_bad_input_is_a_read_error(content: bytes, message: str, line: int | None, tmp_path: Path) -> None:
    error = expect_error(_with(tmp_path / "bad.jsonl", content), message)
    assert error.line == line and error.path == str(tmp_path / "bad.jsonl")


@pytest.mark.parametrize(("row", "message"), [
    ({"type": "text-chunks", "seq0": 0, "time0": 0, "extra": 1, "data": TEXT_DATA}, "envelope must be exactly"),
    ({"type": "text-chunks", "data": {**TEXT_DATA, "dt": [0]}}, "dt length 1 does not match 3 members"),
    ({"type": "text-chunks", "data": {**TEXT_DATA, "dt": [], "texts": []}}, "must hold 1 members, got 0"),
    ({"type": "text-chunks", "data": {**TEXT_DATA, "dt": [0, 0.5]}}, "dt must be an array of safe integers"),
    ({"type": "text-chunks", "seq0": 2**53, "data": TEXT_DATA}, "seq0 must be a non-negative safe integer"),
    ({"type": "text-chunks", "time0": 2**53 - 1, "data": {**TEXT_DATA, "dt": [1, 0]}}, "member times"),
    ({"type": "text-chunks", "data": {**TEXT_DATA, "dt": [2**53, 0]}}, "dt must be an array of safe integers"),
    ({"type": "text-chunks", "data": {**TEXT_DATA, "dt": [0, -(2**53)]}}, "dt must be an array of safe integers"),
    ({"type": "text-chunks", "time0": 0, "data": {**TEXT_DATA, "dt": [2**52, 2**52]}}, "member times"),
    ({"type": "text-chunks", "time0": 1 - 2**53, "data": {**TEXT_DATA, "dt": [5, -6]}}, "member times"),
    ({"type": "reasoning-chunks", "data": {**TEXT_DATA, "id": "c"}}, "data must be exactly"),
    ({"type": "tool-call-chunks", "data": {**TEXT_DATA}}, "data must be exactly {turn, step, index, id"),
    ({"type": "tool-call-chunks", "data": {"turn": 1, "step": 1, "index": 0, "id": 5, "dt": [], "args": ["{"]}},
     "id (and name when present) must be strings"),
])
def test_malformed_packed_row_is_a_read_error(row: dict[str, Any], message: str, tmp_path: Path) -> None:
    path = _with(tmp_path / "row.jsonl", HEADER + orjson.dumps(row) + b"\n" + b'{"type":"turn/end","data":{}}\n')
    error = expect_error(path, message)
    assert error.line == 2 and error.seq == 0


def test_packed_rows_expand_with_reference_key_order(tmp_path: Path) -> None:
    tool = {"type": "tool-call-chunks", "seq0": 5, "time0": 100,
            "data": {"turn": 2, "step": 3, "index": 1, "id": "call-1", "name": "read", "dt": [4, -1],
                     "args": ["{", "}", ""]}}
    _, records = read(_with(tmp_path / "t.jsonl", HEADER + orjson.dumps(tool) + b"\n"))
    assert [r.seq for r in records] == [5, 6, 7] and all(r.packed and r.line == 2 for r in records)
    assert [r.event["time"] for r in records] == [100, 104, 103]
    assert orjson.dumps(records[0].event) == (
        b'{"type":"assistant/chunk","seq":5,"time":100,"data":{"turn":2,"step":3,"chunk":'
        b'{"type":"tool-call-delta","index":1,"id":"call-1","name":"read","argumentsDelta":"{"}}}')


def test_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(LogReadError, match="no such file"):
        discover([tmp_path / "absent"])
    expect_error(tmp_path / "absent.jsonl", "no such file")
    expect_error(tmp_path, "is a directory")


# --- streaming -------------------------------------------------------------------------------------------

def test_reading_streams_instead_of_loading_the_file(tmp_path: Path) -> None:
    header, *lines = (SHARED / RICH[0]).read_bytes().splitlines()
    body = b"".join(line + b"\n" for line in lines)
    copies = 80  # about 6.5 MB of log
    raw = tmp_path / "big.jsonl"
    with raw.open("wb") as out:
        out.write(header + b"\n")
        for _ in range(copies):
            out.write(body)
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    packed = tmp_path / "big.jsonl.zstd"
    with packed.open("wb") as out:
        out.write(compressor.compress(header + b"\n"))
        for _ in range(copies):
            out.write(compressor.compress(body))
    expected = copies * SESSION_LOGS[RICH[0]]["features"]["event_count"]
    for path in (raw, packed):
        tracemalloc.start()
        source = open_log(path)
        count = sum(1 for _ in source.records())
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert count == expected
        assert peak < 2_000_000, f"{path.name}: peak {peak} bytes for a {path.stat().st_size}-byte file"


def test_json_that_javascript_accepts_but_orjson_refuses(tmp_path: Path) -> None:
    """JSON.parse accepts a lone surrogate escape; NaN stays refused."""
    path = _with(tmp_path / "s.jsonl", HEADER + b'{"type":"user/message","data":{"text":"\\ud800"}}\n')
    _, records = read(path)
    assert records[0].event["data"]["text"] == "\ud800"
    expect_error(_with(tmp_path / "n.jsonl", HEADER + b'{"type":"x","data":NaN}\n{"type":"y"}\n'),
                 "not valid JSON")
