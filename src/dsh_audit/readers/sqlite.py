"""SQLite session stores (session-persistence-sqlite, schema 17), opened read-only; one LogSource per session.

Row decoding follows the schema-17 codec (compression.ts, codec.ts): `ignorable = 0` marks a packed row
(seq = seq0, time = time0, 3..1024 members, data at most 1 MiB); other rows are scalar events whose `data`
is JSON text or a zstd BLOB of it, `surface_op` JSON text, `source_event_seqs` a varint BLOB. A malformed
row at or before the last valid `turn/end` is corruption; after it, it starts a removable torn tail
(compression.ts scanRows). Seq gaps are yielded as stored, for the verifier to report.

The store is never written and nothing is created beside it (see `_uri`); `sessions` and `events` must be real
tables (a view could recurse without end); every stored value, compressed or not, is held to the line cap and
every JSON value to the depth cap (dsh_audit.readers.limits).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dsh_audit.errors import LogReadError
from dsh_audit.generations import generations
from dsh_audit.readers.found import refused_link
from dsh_audit.readers.jsonvalue import MAX_SAFE_INTEGER, JsonProblem, parse_json
from dsh_audit.readers.limits import InputLimits, OverLimit, located
from dsh_audit.readers.magic import APPLICATION_ID
from dsh_audit.readers.packed import CHUNK_ROW_TYPES, MemberBounds, PackedRow, check_row
from dsh_audit.readers.spool import label_of
from dsh_audit.readers.zstd import TooLarge, decompress_bounded
from dsh_audit.records import JSON, LogRecord, LogSource, TornTail

SCHEMA_VERSION = 17
_PACKED_BOUNDS = MemberBounds(minimum=3, maximum=1024)
_MAX_PACKED_DATA_BYTES = 1 << 20
_SESSION_COLUMNS = ("id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
                    "agent_preset")
_EVENT_COLUMNS = "seq, type, time, data, source_event_seqs, surface_op, ignorable"


_WAL_FORMAT = 2   # file header bytes 18-19 (write and read format versions): 2 in WAL mode, 1 with a rollback journal


def _uri(path: Path) -> str:
    """How to open the store so that reading neither changes it nor leaves a file beside it. A rollback-journal
    store: read-only. A WAL store whose -wal holds nothing: immutable, or SQLite would create -wal and -shm and
    leave them. One whose -wal holds writes: read-only with locks, as a reader beside a live dsh must; that
    needs the -shm index, which a crashed writer leaves; without it SQLite would create one, so it is refused.
    A link in the place of a file SQLite keeps beside the store is refused (readers.found)."""
    base = f"file:{quote(str(path.resolve()))}"
    for beside in (Path(f"{path}-journal"), Path(f"{path}-wal"), Path(f"{path}-shm")):
        if beside.is_symlink():   # SQLite would refuse it too (O_NOFOLLOW), saying only "unable to open"
            raise LogReadError(f"{refused_link(beside.name + ', beside the store,')}; remove it or audit a copy of "
                               "the store", path=label_of(path))
    with path.open("rb") as handle:
        header = handle.read(20)
    if len(header) < 20 or header[18] != _WAL_FORMAT:
        return f"{base}?mode=ro"
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if not wal.exists() or wal.stat().st_size == 0:
        return f"{base}?immutable=1"
    if not shm.exists():
        raise LogReadError(f"{wal.name} holds writes not yet in the store, and reading them would create "
                           f"{shm.name} beside it: audit a copy of both files, or let sqlite3 fold the log into "
                           "the store first", path=label_of(path))
    return f"{base}?mode=ro"


def _connect(path: Path, limits: InputLimits) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(_uri(path), uri=True)
    except sqlite3.Error as error:
        raise LogReadError(f"cannot open SQLite store read-only: {error}", path=label_of(path)) from None
    except OSError as error:
        raise LogReadError(f"cannot read: {error.strerror}", path=label_of(path)) from None
    # A stored value is one event's line: no longer than the line cap (SQLite refuses to fetch a longer one).
    db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_line_bytes)
    return db


def _sqlite_error(error: sqlite3.Error, label: str, limits: InputLimits) -> LogReadError:
    if isinstance(error, sqlite3.DataError) and "too big" in str(error):
        return located(limits.line_too_long(None), path=label)
    return LogReadError(f"cannot read SQLite store: {error}", path=label)


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


def _data_text(value: object, limits: InputLimits, *, packed: bool = False) -> bytes:
    """The JSON text of a data column. A packed row's exceeding 1 MiB is a malformed row (ValueError); any
    other exceeding the line cap is beyond what we read (OverLimit)."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if not isinstance(value, bytes):
        raise ValueError(f"data must be JSON text or a zstd BLOB, got {type(value).__name__}")
    limit = _MAX_PACKED_DATA_BYTES if packed else limits.max_line_bytes
    try:
        return decompress_bounded(value, limit)
    except TooLarge:
        if packed:
            raise ValueError(f"data exceeds {limit} bytes") from None
        raise limits.line_too_long(None) from None
    except ValueError as bad:
        raise ValueError(f"data BLOB is {bad}") from None


def _json(data: bytes, column: str) -> JSON:
    try:
        return parse_json(data)
    except JsonProblem as problem:
        raise ValueError(f"{column} is {problem}") from None


def decode_row(row: tuple[Any, ...], limits: InputLimits | None = None) -> dict[str, JSON] | PackedRow:
    """The event one stored row holds, or its validated packed run; ValueError names what is malformed,
    OverLimit (located at the row) a value beyond the line or depth cap."""
    try:
        return _decode_row(row, limits or InputLimits.from_env())
    except OverLimit as error:
        raise located(error, line=row[0], seq=row[0], event_type=str(row[1])) from None


def _decode_row(row: tuple[Any, ...], limits: InputLimits) -> dict[str, JSON] | PackedRow:
    seq, kind, time, data, seqs, surface_op, ignorable = row
    if ignorable == 0:
        if kind not in CHUNK_ROW_TYPES:
            raise ValueError(f"malformed {kind} storage row: packed discriminator requires a chunk tag")
        if seqs is not None or surface_op is not None:
            raise ValueError(f"malformed {kind} storage row: packed surface fields must be null")
        text = _data_text(data, limits, packed=True)
        if len(text) > _MAX_PACKED_DATA_BYTES:
            raise ValueError(f"malformed {kind} storage row: data exceeds {_MAX_PACKED_DATA_BYTES} bytes")
        return check_row(kind, seq, time, _json(text, "data"), bounds=_PACKED_BOUNDS)
    event: dict[str, JSON] = {"type": kind, "seq": seq, "time": time, "data": _json(_data_text(data, limits), "data")}
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
    stored = [known for known in generations() if known.sqlite_store]   # later writers use JSONL
    if version not in [known.version for known in stored]:
        raise LogReadError(f'session "{sid}" is stored as log format v{version}; the SQLite schema-17 reader '
                           f"reads format {' and '.join(known.label for known in stored)} only", path=label)
    header: dict[str, JSON] = {"type": "session", "version": version, "id": sid, "createdAt": created_at}
    optional = (("cwd", cwd), ("parentSession", parent), ("seedLength", seed_length), ("origin", origin),
                ("delegationDepth", depth), ("agentPreset", preset))
    header.update((key, value) for key, value in optional if value is not None)
    return header


def _last_turn_end(db: sqlite3.Connection, session_id: str, limits: InputLimits) -> int:
    """Seq of the last turn/end row that decodes; -1 when there is none."""
    with closing(db.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? AND type = 'turn/end' "
                            "ORDER BY seq DESC", (session_id,))) as rows:
        for row in rows:
            try:
                decode_row(row, limits)
            except ValueError:
                continue
            return int(row[0])
    return -1


def _events(source: LogSource, path: Path, session_id: str, limits: InputLimits) -> Iterator[LogRecord]:
    # Cursors are closed explicitly: a statement left open (say, in a kept traceback) would keep the
    # connection, and its read lock on the user's store, alive after close().
    db = _connect(path, limits)
    try:
        committed_until = _last_turn_end(db, session_id, limits)
        with closing(db.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
                                (session_id,))) as rows:
            yield from _decoded(source, rows, committed_until, limits)
    except sqlite3.Error as error:
        raise _sqlite_error(error, source.label, limits) from None
    except OverLimit as error:
        raise located(error, path=source.label) from None
    finally:
        db.close()


def _decoded(source: LogSource, rows: sqlite3.Cursor, committed_until: int,
             limits: InputLimits) -> Iterator[LogRecord]:
    for row in rows:
        seq = int(row[0])
        try:
            events = decode_row(row, limits)
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


def _require_tables(db: sqlite3.Connection, path: Path) -> None:
    """`sessions` and `events` must be tables: a view is a query, which may recurse or join without end."""
    kinds = dict(db.execute("SELECT lower(name), type FROM sqlite_master "
                            "WHERE lower(name) IN ('sessions', 'events')").fetchall())
    for name in ("sessions", "events"):
        if kinds.get(name) != "table":
            found = f"a {kinds[name]}" if name in kinds else "missing"
            raise LogReadError(f"not a dsh session store: {name} is {found}, expected a table", path=label_of(path))


def open_store(path: Path, limits: InputLimits | None = None) -> Iterator[LogSource]:
    """Every session of a store, ordered by creation time then id; each streams its own rows."""
    limits = limits or InputLimits.from_env()
    db = _connect(path, limits)
    try:
        application_id = db.execute("PRAGMA application_id").fetchone()[0]
        if application_id != APPLICATION_ID:
            raise LogReadError(f"not a dsh session store: application_id {application_id}, expected "
                               f"{APPLICATION_ID} (0x44534850, DSHP)", path=label_of(path))
        schema = db.execute("PRAGMA user_version").fetchone()[0]
        if schema != SCHEMA_VERSION:
            raise LogReadError(f"SQLite store has schema version {schema}; this reader reads "
                               f"{SCHEMA_VERSION}", path=label_of(path))
        _require_tables(db, path)
        sessions = db.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY created_at, id").fetchall()
    except sqlite3.Error as error:
        raise _sqlite_error(error, str(path), limits) from None
    finally:
        db.close()
    for row in sessions:
        label = f"{label_of(path)}#{row[0]}"
        source = LogSource(label=label, header=_header(row, label), header_line=0, _events=iter(()),
                           explicit_seq=True)
        source._events = _events(source, path, str(row[0]), limits)
        yield source
