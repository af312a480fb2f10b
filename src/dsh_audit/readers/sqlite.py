"""SQLite session stores (session-persistence-sqlite, schema 17), opened read-only; one LogSource per session.

Row decoding follows the schema-17 codec (compression.ts, codec.ts): `ignorable = 0` marks a packed row
(seq = seq0, time = time0, 3..1024 members, data at most 1 MiB); other rows are scalar events whose `data`
is JSON text or a zstd BLOB of it, `surface_op` JSON text, `source_event_seqs` a varint BLOB. A malformed
row at or before the last valid `turn/end` is corruption; after it, it starts a removable torn tail
(compression.ts scanRows). Seq gaps are yielded as stored, for the verifier to report.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

import zstandard

from dsh_audit.errors import LogReadError
from dsh_audit.readers.jsonvalue import MAX_SAFE_INTEGER, JsonProblem, parse_json
from dsh_audit.readers.packed import CHUNK_ROW_TYPES, MemberBounds, PackedRow, check_row
from dsh_audit.records import JSON, LogRecord, LogSource, TornTail

APPLICATION_ID = 0x44534850  # "DSHP"
SCHEMA_VERSION = 17
SQLITE_MAGIC = b"SQLite format 3\x00"
_PACKED_BOUNDS = MemberBounds(minimum=3, maximum=1024)
_MAX_PACKED_DATA_BYTES = 1 << 20
_SESSION_COLUMNS = ("id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
                    "agent_preset")
_EVENT_COLUMNS = "seq, type, time, data, source_event_seqs, surface_op, ignorable"


def _connect(path: Path) -> sqlite3.Connection:
    # mode=ro: an audit never writes to (or creates) the user's store.
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    try:
        return sqlite3.connect(uri, uri=True)
    except sqlite3.Error as error:
        raise LogReadError(f"cannot open SQLite store read-only: {error}", path=str(path)) from None


def decode_source_event_seqs(blob: bytes) -> list[int]:
    """First value an unsigned LEB128 varint, each later one a zigzag delta; canonical varints only."""
    values: list[int] = []
    offset = 0
    while offset < len(blob):
        limit = MAX_SAFE_INTEGER if not values else 2 * MAX_SAFE_INTEGER
        value, shift = 0, 0
        while True:
            if offset >= len(blob):
                raise ValueError("malformed source_event_seqs: truncated varint")
            byte = blob[offset]
            offset += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if shift and not byte & 0x7F:
                    raise ValueError("malformed source_event_seqs: non-canonical varint")
                if value > limit:
                    raise ValueError("malformed source_event_seqs: varint out of range")
                break
            shift += 7
            if shift > 56:
                raise ValueError("malformed source_event_seqs: varint out of range")
        if values:
            value = values[-1] + (value >> 1 if value % 2 == 0 else -((value + 1) >> 1))
        if not 0 <= value <= MAX_SAFE_INTEGER:
            raise ValueError("malformed source_event_seqs: decoded seq out of range")
        values.append(value)
    return values


def _data_text(value: object, *, limit: int | None = None) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if not isinstance(value, bytes):
        raise ValueError(f"data must be JSON text or a zstd BLOB, got {type(value).__name__}")
    frame = zstandard.ZstdDecompressor().decompressobj()
    try:
        text = frame.decompress(value)
    except zstandard.ZstdError as error:
        raise ValueError(f"data BLOB is not valid zstd: {error}") from None
    if not frame.eof:
        raise ValueError("data BLOB is a truncated zstd frame")
    if limit is not None and len(text) > limit:
        raise ValueError(f"data exceeds {limit} bytes")
    return text


def _json(data: bytes, column: str) -> JSON:
    try:
        return parse_json(data)
    except JsonProblem as problem:
        raise ValueError(f"{column} is {problem}") from None


def decode_row(row: tuple[Any, ...]) -> dict[str, JSON] | PackedRow:
    """The event one stored row holds, or its validated packed run; ValueError names what is malformed."""
    seq, kind, time, data, seqs, surface_op, ignorable = row
    if ignorable == 0:
        if kind not in CHUNK_ROW_TYPES:
            raise ValueError(f"malformed {kind} storage row: packed discriminator requires a chunk tag")
        if seqs is not None or surface_op is not None:
            raise ValueError(f"malformed {kind} storage row: packed surface fields must be null")
        text = _data_text(data, limit=_MAX_PACKED_DATA_BYTES)
        if len(text) > _MAX_PACKED_DATA_BYTES:
            raise ValueError(f"malformed {kind} storage row: data exceeds {_MAX_PACKED_DATA_BYTES} bytes")
        return check_row(kind, seq, time, _json(text, "data"), bounds=_PACKED_BOUNDS)
    event: dict[str, JSON] = {"type": kind, "seq": seq, "time": time, "data": _json(_data_text(data), "data")}
    if seqs is not None:
        if not isinstance(seqs, bytes):
            raise ValueError("source_event_seqs must be a BLOB")
        event["sourceEventSeqs"] = decode_source_event_seqs(seqs)
    if surface_op is not None:
        event["surfaceOp"] = _json(str(surface_op).encode("utf-8", "surrogatepass"), "surface_op")
    if ignorable == 1:
        event["ignorable"] = True
    return event


def _header(row: tuple[Any, ...], label: str) -> dict[str, JSON]:
    sid, version, created_at, cwd, parent, seed_length, origin, depth, preset = row
    if version != 0:   # schema 17 stores the v0 layout (packed rows, seed_length); later writers use JSONL
        raise LogReadError(f'session "{sid}" is stored as log format v{version}; the SQLite schema-17 reader '
                           "reads format v0 only", path=label)
    header: dict[str, JSON] = {"type": "session", "version": version, "id": sid, "createdAt": created_at}
    optional = (("cwd", cwd), ("parentSession", parent), ("seedLength", seed_length), ("origin", origin),
                ("delegationDepth", depth), ("agentPreset", preset))
    header.update((key, value) for key, value in optional if value is not None)
    return header


def _last_turn_end(db: sqlite3.Connection, session_id: str) -> int:
    """Seq of the last turn/end row that decodes; -1 when there is none."""
    with closing(db.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? AND type = 'turn/end' "
                            "ORDER BY seq DESC", (session_id,))) as rows:
        for row in rows:
            try:
                decode_row(row)
            except ValueError:
                continue
            return int(row[0])
    return -1


def _events(source: LogSource, path: Path, session_id: str) -> Iterator[LogRecord]:
    # Cursors are closed explicitly: a statement left open (say, in a kept traceback) would keep the
    # connection, and its read lock on the user's store, alive after close().
    db = _connect(path)
    try:
        committed_until = _last_turn_end(db, session_id)
        with closing(db.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
                                (session_id,))) as rows:
            yield from _decoded(source, rows, committed_until)
    except sqlite3.Error as error:
        raise LogReadError(f"cannot read SQLite store: {error}", path=source.label) from None
    finally:
        db.close()


def _decoded(source: LogSource, rows: sqlite3.Cursor, committed_until: int) -> Iterator[LogRecord]:
    for row in rows:
        seq = int(row[0])
        try:
            events = decode_row(row)
        except ValueError as bad:
            if seq <= committed_until:
                raise LogReadError(f"{bad} (row before the last turn/end, so not a torn tail)",
                                   path=source.label, line=seq, seq=seq, event_type=str(row[1])) from None
            dropped = len(_stored_bytes(row[3])) + sum(len(_stored_bytes(rest[3])) for rest in rows)
            source.torn_tail = TornTail(seq, dropped, f"malformed row after the last turn/end: {bad}")
            return
        if isinstance(events, PackedRow):
            yield LogRecord(line=seq, seq=seq, event=events.first_event(), packed=True, explicit_seq=True,
                            run=events)
        else:
            yield LogRecord(line=seq, seq=seq, event=events, explicit_seq=True)


def _stored_bytes(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass")


def open_store(path: Path) -> Iterator[LogSource]:
    """Every session of a store, ordered by creation time then id; each streams its own rows."""
    db = _connect(path)
    try:
        application_id = db.execute("PRAGMA application_id").fetchone()[0]
        if application_id != APPLICATION_ID:
            raise LogReadError(f"not a dsh session store: application_id {application_id}, expected "
                               f"{APPLICATION_ID} (0x44534850, DSHP)", path=str(path))
        schema = db.execute("PRAGMA user_version").fetchone()[0]
        if schema != SCHEMA_VERSION:
            raise LogReadError(f"SQLite store has schema version {schema}; this reader reads "
                               f"{SCHEMA_VERSION}", path=str(path))
        sessions = db.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY created_at, id").fetchall()
    except sqlite3.Error as error:
        raise LogReadError(f"cannot read SQLite store: {error}", path=str(path)) from None
    finally:
        db.close()
    for row in sessions:
        label = f"{path}#{row[0]}"
        source = LogSource(label=label, header=_header(row, label), header_line=0, _events=iter(()),
                           explicit_seq=True)
        source._events = _events(source, path, str(row[0]))
        yield source
